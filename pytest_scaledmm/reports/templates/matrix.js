// The page's one script (render.py puts it inline and names its hash in the page's
// Content-Security-Policy: no other script, inline or injected, may run).
(function () {
  function show(id) {
    document.querySelectorAll(".panel").forEach(function (p) { p.hidden = p.id !== id; });
    document.querySelectorAll(".bar.sel").forEach(function (b) { b.classList.remove("sel"); });
    var bar = document.querySelector('.bar[data-panel="' + id + '"]');
    if (bar) bar.classList.add("sel");
  }
  document.querySelectorAll(".bar[data-panel]").forEach(function (bar) {
    bar.addEventListener("click", function () { show(bar.dataset.panel); history.replaceState(null, "", "#cell=" + bar.dataset.panel); });
    bar.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); bar.click(); } });
  });
  document.querySelectorAll("button.copy").forEach(function (btn) {
    btn.addEventListener("click", function () {
      // "copied" only once the clipboard took it; with no clipboard (a page served over plain
      // http) or a refused one, the command is selected for the reader to copy.
      function selectIt() {
        var code = btn.parentNode.querySelector("code");
        if (code) window.getSelection().selectAllChildren(code);
        btn.textContent = "selected: copy it";
      }
      if (!navigator.clipboard || !navigator.clipboard.writeText) return selectIt();
      navigator.clipboard.writeText(btn.dataset.copy).then(function () { btn.textContent = "copied"; }, selectIt);
    });
  });
  // #cell=p-R-C opens that cell's panel: a link to one cell can be shared.
  var target = location.hash.replace(/^#cell=/, "");
  if (target && document.getElementById(target)) show(target);
})();
