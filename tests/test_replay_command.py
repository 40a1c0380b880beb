"""The command that replays a case (a failure's `replay:` line, the summary, the step summary,
`scaledmm compare`'s table, Markdown and HTML): as short as it can be, the matrix named once in
the case's node id, and exact from any directory, whatever the ini file or the environment say
there; built from report data, which may be crafted, it has no word that pytest or a shell reads
as anything but what it is, or it is not offered and the reason stands in its place."""

import html
import re
import shlex

import pytest
import torch
import yaml
from reports_factory import CAND, case, report, write

from matrices import IN_PROCESS, planted, synthetic
from pytest_scaledmm.cli import main
from pytest_scaledmm.matrix.replay_command import replay_command

AXES = synthetic(
    {"scale_a": ["tensor_0d"], "scale_b": ["tensor_1d"], "mode": ["aot_eager"], "m": [4, 8], "k": [32], "n": [16]}
)
OPTIONS = ("--scaledmm-matrix", "--scaledmm-profile", "--scaledmm-seed", "--scaledmm-device", "--scaledmm-recorded-on")


def _matrix(path, *kernels, profiles=None):
    path.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "kernels": list(kernels),
                "axes": AXES,
                "profiles": profiles or {"default": {"cases": 2 * len(kernels)}},
            },
            sort_keys=False,
        )
    )
    return path


def _run(pytester, *args):
    return pytester.runpytest("-p", "no:cacheprovider", "-W", "ignore", *args)


def _replay_lines(result) -> list[str]:
    # Under CI pytest prints each failure's whole message again in the short summary: once each.
    lines = (line[len("replay: ") :] for line in result.outlines if line.startswith("replay: "))
    return list(dict.fromkeys(lines))


def _records(path) -> dict:
    import json

    return {c["id"]: c["outcome"] for c in json.loads(path.read_text())["cases"]}


# -- as short as it can be, and exact -------------------------------------------------------------------


def test_the_command_names_the_matrix_once_and_replays_exactly_that_case(matrix_project, pytester, monkeypatch):
    """Replayed from another directory whose ini file names another matrix and profile, with a
    SCALEDMM_MATRIX of its own: the one case runs, with the id and the outcome it had."""
    project = pytester.mkdir("proj")
    matrix = _matrix(
        project / "matrix.yaml",
        planted("good", "correct"),
        planted("bad", "ignores_scale_b"),
        profiles={"default": {"cases": 4}, "smoke": {"cases": 1, "axes": {"m": [8]}}},
    )
    monkeypatch.chdir(project)
    first = _run(pytester, "--scaledmm-matrix", "--scaledmm-report", "first.json", *IN_PROCESS)
    first.assert_outcomes(passed=2, failed=2)
    recorded = _records(project / "first.json")
    commands = _replay_lines(first)
    assert len(commands) == 2
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "pytest" and words[2:] == [
            "--scaledmm-matrix",
            "--scaledmm-recorded-on",
            f"torch={torch.__version__},device=cpu",
            "--scaledmm-profile",
            "default",
        ], words
        assert command.count(str(matrix)) == 1 and words[1].startswith(f"{matrix}::")

    elsewhere = pytester.mkdir("elsewhere")
    _matrix(elsewhere / "other.yaml", planted("other", "correct"))
    (elsewhere / "pytest.ini").write_text("[pytest]\nscaledmm_matrix = other.yaml\nscaledmm_profile = smoke\n")
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("SCALEDMM_MATRIX", str(elsewhere / "other.yaml"))
    for command in commands:
        case_id = shlex.split(command)[1].split("::", 1)[1]
        replayed = _run(pytester, *shlex.split(command)[1:], "--scaledmm-report", "again.json", *IN_PROCESS)
        assert _records(elsewhere / "again.json") == {case_id: recorded[case_id]}
        assert f"replay: {command}" in replayed.outlines  # the same case prints the same command
    assert recorded[case_id] == "MISMATCH" and replayed.ret == pytest.ExitCode.TESTS_FAILED


def test_a_node_id_of_a_case_the_profile_lacks_says_which_profile_has_it(matrix_project, pytester):
    matrix_project.write_matrix(
        yaml.safe_dump(
            {
                "version": 1,
                "kernels": [planted("good", "correct")],
                "axes": AXES,
                "profiles": {"default": {"cases": 2}, "smoke": {"cases": 1, "axes": {"m": [4]}}},
            }
        )
    )
    big = next(cid for cid in matrix_project.collect() if "m8" in cid)
    result = matrix_project.run(
        f"{matrix_project.path / 'matrix.yaml'}::{big}", "--scaledmm-matrix", "--scaledmm-profile", "smoke"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"node id: unknown case id '{big}' in profile 'smoke'" in result.stderr.str()
    assert "it is a case of profile default: add --scaledmm-profile default" in result.stderr.str()


def test_a_matrix_not_named_yaml_is_given_to_the_option_too(matrix_project, pytester):
    """A bare --scaledmm-matrix takes the matrix from a *.yaml or *.yml argument only."""
    matrix = _matrix(matrix_project.path / "kernels.matrix", planted("bad", "ignores_scale_b"))
    first = matrix_project.run(f"--scaledmm-matrix={matrix}", "--scaledmm-report", "first.json", *IN_PROCESS)
    command = _replay_lines(first)[0]
    words = shlex.split(command)
    assert words[1].startswith(f"{matrix}::") and words[2:4] == ["--scaledmm-matrix", str(matrix)]
    replayed = matrix_project.run(*words[1:], "--scaledmm-report", "again.json", *IN_PROCESS)
    replayed.assert_outcomes(failed=1)
    assert list(_records(matrix_project.path / "again.json")) == [words[1].split("::", 1)[1]]


def test_two_matrix_files_for_a_bare_flag_are_a_usage_error(matrix_project):
    one = _matrix(matrix_project.path / "one.yaml", planted("good", "correct"))
    two = _matrix(matrix_project.path / "two.yaml", planted("good", "correct"))
    result = matrix_project.run(str(one), str(two), "--scaledmm-matrix")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--scaledmm-matrix without a path: the command line names 2 matrix files" in result.stderr.str()


# -- no word from report data is read as anything but what it is -----------------------------------------

# Paths a crafted report can name: each must reach pytest as a path (relative ones from ./).
SAFE_PATHS = [
    "@args.txt",
    "-x.yaml",
    "--debug=FILE",
    "sub dir/$(touch x).yaml",
    "`id`;rm.yaml",
    "~/m.yaml",
    "/abs/m.yaml",
]
# Paths no command line carries as they are: refused, with the reason in place of the command.
UNSAFE_PATHS = [
    ("x\ny.yaml", "\\n"),
    ("x\0y.yaml", "\\x00"),
    ("\x1b[31mred.yaml", "\\x1b"),
    ("evil\u202egpj.yaml", "\\u202e"),
    ("not-utf8-\udcff.yaml", "\\udcff"),
    ("/a::b/m.yaml", "'::'"),
    ("/a[1]/m.yaml", "'['"),
    # A page shows two spaces as one: copied from Markdown or HTML, it would name another path.
    ("/tmp/a  b/m.yaml", "a run of spaces"),
]


@pytest.mark.parametrize("path", SAFE_PATHS)
def test_a_path_from_a_report_is_a_path_word(path):
    words = shlex.split(replay_command(path, "c1", "smoke", 3, "cpu", {"torch": "2.13.0", "device": "cpu"}))
    expected = path if path.startswith("/") else "./" + path
    assert words[:3] == ["pytest", f"{expected}::c1", "--scaledmm-matrix"]
    # Every other word is one of the plugin's options or the value after one: never from the path.
    options = [w for w in words[2:] if w.startswith("-")]
    assert all(w in OPTIONS for w in options), words
    assert not any(w.startswith(("-", "@")) for w in words[1:] if w not in OPTIONS), words


@pytest.mark.parametrize("path, shown", UNSAFE_PATHS)
def test_a_path_no_command_line_carries_is_refused_with_the_reason(path, shown):
    command = replay_command(path, "c1")
    assert command.startswith(f"(no replay command: the matrix path holds {shown}, ") and "--scaledmm" not in command
    assert "\n" not in command and "\0" not in command and "\x1b" not in command


@pytest.mark.parametrize("value, what", [("-k", "case id"), ("@args", "case id"), (2**64, "seed"), (-1, "seed")])
def test_other_report_words_outside_the_grammar_are_refused(value, what):
    if what == "seed":
        assert (
            replay_command("/m.yaml", "c1", seed=value) == "(no replay command: the seed is not one this plugin writes)"
        )
    else:
        assert replay_command("/m.yaml", value).startswith("(no replay command: the case id")
    for word in ("@args", "-x", "a b"):
        assert replay_command("/m.yaml", "c1", profile=word).startswith("(no replay command: the profile")
        assert replay_command("/m.yaml", "c1", device=word).startswith("(no replay command: the device")


def _compare_outputs(tmp_path, matrix_path, capsys, monkeypatch) -> list[str]:
    """The replay commands `scaledmm compare` offers for a crafted report naming `matrix_path`:
    in its terminal table, its Markdown, its HTML (shown and behind the copy button) and the
    step summary."""
    cases = [case("c1", "PASS"), case("c2", "PASS")]
    baseline = write(tmp_path / "baseline.json", report(cases, matrix_path=matrix_path, torch="2.11.0"))
    crafted = write(
        tmp_path / "crafted.json",
        report([case("c1", "PASS"), case("c2", "MISMATCH", "MISMATCH: compiled off")], matrix_path=matrix_path, **CAND),
    )
    page, md = tmp_path / "out.html", tmp_path / "out.md"
    for path in (page, md, tmp_path / "summary.md"):
        path.unlink(missing_ok=True)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    assert main(["compare", str(baseline), str(crafted), "--markdown", str(md), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    found = [line.split("replay: ", 1)[1] for line in out.splitlines() if "replay: " in line]
    text = html.unescape(page.read_text())
    found += re.findall(r'data-copy="([^"]*)"', page.read_text())
    found = [html.unescape(f) for f in found] + re.findall(r"<code>((?:pytest|\(no replay)[^<]*)</code>", text)
    for markdown in (md.read_text(), (tmp_path / "summary.md").read_text()):
        # Markdown escapes punctuation, and a joiner after "@" keeps GitHub from reading a mention.
        unescaped = re.sub(r"\\(.)", r"\1", markdown).replace("\u200d", "")
        found += [m.strip() for m in re.findall(r"\| ((?:pytest|\(no replay)[^|]*) \|\s*$", unescaped, re.M)]
        found += re.findall(r"Replay one case: `+ (.*?) `+", unescaped)
    assert len(found) >= 6, found  # the table, the panel, the button, the root causes, both Markdown files
    return found


@pytest.mark.parametrize("path", ["@args.txt", "-x.yaml", "--debug=FILE"])
def test_compare_offers_a_crafted_path_as_a_path(tmp_path, capsys, monkeypatch, path):
    for command in _compare_outputs(tmp_path, path, capsys, monkeypatch):
        words = shlex.split(command)
        assert words[1] in (f"./{path}::c1", f"./{path}::c2") and not any(w.startswith("@") for w in words), command


@pytest.mark.parametrize("path, shown", UNSAFE_PATHS[:3] + UNSAFE_PATHS[-2:])
def test_compare_puts_the_reason_in_place_of_a_command_it_cannot_offer(tmp_path, capsys, monkeypatch, path, shown):
    for command in _compare_outputs(tmp_path, path, capsys, monkeypatch):
        assert command.startswith("(no replay command: the matrix path holds "), command
        assert "--scaledmm" not in command


def test_the_offered_command_never_reads_pytest_arguments_from_the_artifact(pytester, monkeypatch, capsys):
    """An unpacked artifact holds a report naming `@args.txt` as its matrix, and `args.txt`:
    pytest (>= 8.2) reads a word `@FILE` as the arguments in FILE. The command compare offers,
    run there, neither writes the file those arguments name nor imports the conftest.py of the
    directory they add."""
    artifact = pytester.mkdir("artifact")
    (artifact / "args.txt").write_text("--debug=clobbered.log\nplanted\n")
    (artifact / "planted").mkdir()
    (artifact / "planted" / "conftest.py").write_text("open('imported', 'w').close()\n")
    for name, outcome, torch_version in (("old", "PASS", "2.11.0"), ("new", "MISMATCH", "2.13.0")):
        cases = [case("c1", outcome, "MISMATCH: compiled off" if outcome == "MISMATCH" else None)]
        write(artifact / f"{name}.json", report(cases, matrix_path="@args.txt", torch=torch_version))
    assert main(["compare", str(artifact / "old.json"), str(artifact / "new.json")]) == 0
    command = next(line for line in capsys.readouterr().out.splitlines() if "replay: " in line).split("replay: ")[1]
    monkeypatch.chdir(artifact)
    result = pytester.runpytest("-p", "no:cacheprovider", *shlex.split(command)[1:])
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # ./@args.txt is no file: nothing ran
    assert not (artifact / "clobbered.log").exists() and not (artifact / "imported").exists()
    assert not (artifact / "planted" / "imported").exists()


def test_a_matrix_path_a_command_cannot_carry_is_said_in_the_run_and_the_step_summary(
    matrix_project, pytester, monkeypatch, tmp_path
):
    """The matrix in a directory whose name holds a line break: the run goes ahead, and where its
    failure's replay command would be, the terminal and the step summary say why there is none."""
    project = pytester.mkdir("line\nbreak")
    _matrix(project / "matrix.yaml", planted("bad", "ignores_scale_b"))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.chdir(project)
    result = _run(pytester, "--scaledmm-matrix", "--scaledmm-report", str(tmp_path / "r.json"), *IN_PROCESS)
    result.assert_outcomes(failed=2)
    reason = "(no replay command: the matrix path holds \\n, which a command line cannot carry as it is)"
    assert f"replay: {reason}" in result.outlines
    assert not any(line.startswith("replay: pytest") for line in result.outlines)
    assert reason in re.sub(r"\\(.)", r"\1", summary.read_text())
