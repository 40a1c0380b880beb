"""Every file a matrix run reads or writes besides the matrix (the explore corpus, the repro
directory, the baseline report, the JUnit XML) is checked in pytest_configure: a bad one is one
usage error naming the file (and the key), before any case runs, never a traceback after them."""

import os

import pytest

from matrices import IN_PROCESS, matrix_text, planted

# One case of a planted kernel that fails (a repro script would be written for it).
FAILING = matrix_text([planted("broken", "ignores_scale_b")])
# One explore item whose search finds a failure (tests/planted_kernels.py).
EXPLORE = matrix_text([planted("rank", "asserts_rank_under_compile")], {"mode": ["eager"]})
EXPLORE_ARGS = ("--scaledmm-explore", "--scaledmm-explore-examples", "5", *IN_PROCESS)


def _usage_error(result) -> str:
    """The run stopped at configure with one usage error line, no case ran: that line."""
    err = result.stderr.str()
    lines = [line for line in result.errlines if line.strip()]
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:] + err[-2000:]
    assert "Traceback" not in err and "INTERNALERROR" not in err, err
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), err
    out = result.stdout.str()
    assert "explore[" not in out and "passed" not in out and "failed" not in out, out
    return lines[0][len("ERROR: ") :]


@pytest.mark.parametrize(
    "text, key",
    [
        ("root:x:0:0:root:/root:/bin/bash\n", "(top level)"),  # a file that is no corpus at all
        ("version: 1\ncases: [{params: {kernel: rank}}]\n", "cases[0].params"),  # a corpus with a bad entry
        ("cases: [\n", ""),  # not YAML
    ],
)
def test_a_corpus_that_is_not_one_stops_explore_before_it_searches(matrix_project, text, key):
    matrix_project.write_matrix(EXPLORE)
    corpus = matrix_project.path / "corpus.yaml"
    corpus.write_text(text)
    result = matrix_project.run("--scaledmm-matrix", *EXPLORE_ARGS, "--scaledmm-corpus", "corpus.yaml")
    line = _usage_error(result)
    assert line.startswith(f"--scaledmm-corpus: {corpus}: "), line
    assert f"key '{key}'" in line if key else "not valid YAML" in line, line
    assert corpus.read_text() == text  # never replaced


def test_a_corpus_from_the_environment_is_named_by_its_variable(matrix_project, monkeypatch):
    matrix_project.write_matrix(EXPLORE)
    (matrix_project.path / "corpus.yaml").write_text("[1, 2]\n")
    monkeypatch.setenv("SCALEDMM_CORPUS", "corpus.yaml")
    line = _usage_error(matrix_project.run("--scaledmm-matrix", *EXPLORE_ARGS))
    assert line.startswith("SCALEDMM_CORPUS=corpus.yaml: "), line
    assert "must be object, not a list (not a corpus file?)" in line, line


@pytest.mark.parametrize("where", ["directory", "under a file"])
def test_a_corpus_that_cannot_be_written_stops_explore_before_it_searches(matrix_project, where):
    matrix_project.write_matrix(EXPLORE)
    if where == "directory":
        (matrix_project.path / "corpus").mkdir()
        corpus, expected = matrix_project.path / "corpus", "is a directory"
    else:
        (matrix_project.path / "notes.txt").write_text("mine\n")
        corpus, expected = matrix_project.path / "notes.txt" / "corpus.yaml", "not a directory"
    line = _usage_error(matrix_project.run("--scaledmm-matrix", *EXPLORE_ARGS, "--scaledmm-corpus", str(corpus)))
    assert line.startswith(f"--scaledmm-corpus: {corpus}: "), line
    assert expected in line, line


def test_a_new_corpus_in_a_new_directory_is_made_by_explore(matrix_project):
    """A corpus that is not there yet is explore's to write, its directory too."""
    matrix_project.write_matrix(EXPLORE)
    result = matrix_project.run(
        "--scaledmm-matrix", *EXPLORE_ARGS, "--scaledmm-corpus", "found/corpus.yaml", "--scaledmm-report", "r.json"
    )
    result.assert_outcomes(failed=1)
    assert "corpus: 1 new minimal case(s)" in result.stdout.str()
    assert (matrix_project.path / "found" / "corpus.yaml").read_text().count("params:") == 1


def test_a_corpus_spoilt_during_the_search_costs_one_line_not_the_findings(matrix_project, pytester):
    """Checked at configure, changed before the end: the findings stay in the report, the file as it is."""
    matrix_project.write_matrix(EXPLORE)
    pytester.makeconftest(
        "from pathlib import Path\n"
        "def pytest_collection_finish(session):\n"
        "    Path('corpus.yaml').write_text('[1]\\n')\n"
    )
    result = matrix_project.run(
        "--scaledmm-matrix", *EXPLORE_ARGS, "--scaledmm-corpus", "corpus.yaml", "--scaledmm-report", "r.json"
    )
    result.assert_outcomes(failed=1)
    assert "Traceback" not in result.stderr.str() and "INTERNALERROR" not in result.stderr.str()
    corpus = matrix_project.path / "corpus.yaml"
    assert (
        f"corpus: not saved ({corpus}: key '(top level)': must be object, not a list (not a corpus file?));"
        " the 1 minimal case(s) are in the report"
    ) in result.stdout.str()
    assert corpus.read_text() == "[1]\n"
    assert [case["outcome"] for case in matrix_project.report("r.json")["cases"]] == ["COMPILE_ONLY_ERROR"]


def test_a_repro_dir_that_cannot_be_written_stops_the_run_before_any_case(matrix_project):
    matrix_project.write_matrix(FAILING)
    (matrix_project.path / "repro").write_text("a file, not a directory\n")
    line = _usage_error(matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "--scaledmm-repro-dir", "repro"))
    assert line.startswith(f"--scaledmm-repro-dir: {matrix_project.path / 'repro'}: "), line
    assert "not a directory" in line, line


def test_a_junit_path_that_cannot_be_written_stops_the_run_before_any_case(matrix_project):
    matrix_project.write_matrix(FAILING)
    (matrix_project.path / "out").write_text("a file, not a directory\n")
    line = _usage_error(matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "--junitxml", "out/junit.xml"))
    assert line.startswith(f"--junitxml: {matrix_project.path / 'out' / 'junit.xml'}: "), line
    assert "not a directory" in line, line


@pytest.mark.parametrize("make, words", [("link", "a link to nothing"), ("fifo", "not a regular file")])
def test_a_junit_path_that_is_no_file_stops_the_run_before_any_case(matrix_project, make, words):
    """A dangling link failed with a traceback after the last case; a FIFO hung the run there."""
    matrix_project.write_matrix(FAILING)
    target = matrix_project.path / "junit.xml"
    if make == "link":
        target.symlink_to(matrix_project.path / "gone" / "x.xml")
    else:
        os.mkfifo(target)
    line = _usage_error(matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "--junitxml", "junit.xml"))
    assert line.startswith(f"--junitxml: {target}: "), line
    assert words in line, line


@pytest.mark.parametrize("text, words", [("{}\n", "not a pytest-scaledmm report"), ("[\n", "corrupt JSON")])
def test_a_baseline_that_is_not_a_report_stops_the_run_before_any_case(matrix_project, text, words):
    matrix_project.write_matrix(FAILING)
    (matrix_project.path / "base.json").write_text(text)
    line = _usage_error(matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "--scaledmm-baseline", "base.json"))
    assert line.startswith("--scaledmm-baseline: ") and "base.json" in line, line
    assert words in line, line
