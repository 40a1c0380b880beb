"""pytest side of reproducing failures: isolation and triage settings, replay by case id,
and the triage summary."""

from __future__ import annotations

import difflib
import pytest


def configure_reproduce(config, state) -> None:
    """Called from the plugin's pytest_configure once the session state exists."""
    option = config.getoption
    timeout = option("scaledmm_timeout")
    if timeout <= 0:
        raise pytest.UsageError(f"--scaledmm-timeout must be positive, got {timeout:g}")
    state.configure_runner(
        isolate=option("scaledmm_isolate") == "yes",
        timeout=timeout,
        triage=option("scaledmm_triage"),
        triage_budget=option("scaledmm_triage_budget"),
    )
    wanted = option("scaledmm_case") or []
    if wanted:
        check_case_ids(state, wanted)
    config.pluginmanager.register(ReproducePlugin(config, state, set(wanted)), "scaledmm-reproduce")


def check_case_ids(state, wanted) -> None:
    """Every requested id must be a case of this matrix and profile; otherwise one usage error
    naming the profile that has it, or the closest ids."""
    from .cases import generate_cases

    ids = [case.id for case in state.cases()]
    known = set(ids)
    problems = []
    for cid in wanted:
        if cid in known:
            continue
        line = f"unknown case id {cid!r} in profile {state.profile.name!r} of {state.spec.path}"
        elsewhere = []
        for name, profile in state.spec.profiles.items():
            if name != state.profile.name and cid in {c.id for c in generate_cases(state.spec, profile)[0]}:
                elsewhere.append(name)
        if elsewhere:
            line += f"; it is a case of profile {', '.join(elsewhere)}: add --scaledmm-profile {elsewhere[0]}"
        else:
            close = difflib.get_close_matches(cid, ids, n=5, cutoff=0.5)
            if close:
                line += "; close matches:\n    " + "\n    ".join(close)
        problems.append(line)
    if problems:
        raise pytest.UsageError("--scaledmm-case: " + "\n".join(problems))


class ReproducePlugin:
    def __init__(self, config, state, wanted: set):
        self.config = config
        self.state = state
        self.wanted = wanted

    def _controller(self) -> bool:
        return not hasattr(self.config, "workerinput")

    def pytest_collection_modifyitems(self, session, config, items):
        """--scaledmm-case: keep exactly those cases. Ids are those of the full collection, since
        deselection happens after every case was collected."""
        if not self.wanted:
            return
        keep, drop = [], []
        for item in items:
            case = getattr(item, "case", None)
            (drop if case is not None and case.id not in self.wanted else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_unconfigure(self, config):
        self.state.close()

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if not self._controller():
            return
        from .triage import summary_lines

        lines = summary_lines(self.state.records.values())
        if lines:
            terminalreporter.section("scaled-mm triage and repro")
            for line in lines:
                terminalreporter.write_line(line)
