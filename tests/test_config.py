"""Configuration the pytest way: every option as an ini option and a SCALEDMM_* variable, with
the command line first, then the environment, then the ini file, then the default; a bad value
from the environment or an ini file is one usage error naming it; options without
--scaledmm-matrix say that the matrix did not run, and without it the plugin is inert and imports
no torch. Help texts say what the code does."""

import subprocess
import sys

import pytest

from matrices import IN_PROCESS, matrix_text, planted

# Two profiles of different sizes: which one ran shows in the collected count.
PROFILES = {"default": {"cases": 2}, "smoke": {"cases": 1}}
MATRIX = matrix_text(["aten_scaled_mm"], {"m": [4, 8]}, profiles=PROFILES)


def collected(result) -> int:
    return sum(1 for line in result.outlines if "::" in line)


@pytest.fixture
def project(matrix_project):
    matrix_project.write_matrix(MATRIX)
    return matrix_project


def test_pyproject_sets_the_profile(project, pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nscaledmm_profile = "smoke"\n')
    result = project.run("--scaledmm-matrix", "--collect-only", "-q")
    assert result.ret == 0
    assert collected(result) == 1
    assert "Unknown config option" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    "name, text",
    [
        ("pytest.ini", "[pytest]\nscaledmm_profile = smoke\n"),
        ("tox.ini", "[pytest]\nscaledmm_profile = smoke\n"),
        ("setup.cfg", "[tool:pytest]\nscaledmm_profile = smoke\n"),
    ],
)
def test_ini_files_set_the_profile(project, pytester, name, text):
    (pytester.path / name).write_text(text)
    assert collected(project.run("--scaledmm-matrix", "--collect-only", "-q")) == 1


def test_command_line_beats_environment_beats_ini(project, pytester, monkeypatch):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nscaledmm_profile = "smoke"\n')
    monkeypatch.setenv("SCALEDMM_PROFILE", "default")
    assert collected(project.run("--scaledmm-matrix", "--collect-only", "-q")) == 2  # env over ini
    result = project.run("--scaledmm-matrix", "--scaledmm-profile", "smoke", "--collect-only", "-q")
    assert collected(result) == 1  # command line over env


def test_environment_alone_sets_the_profile_and_a_flag(project, monkeypatch):
    monkeypatch.setenv("SCALEDMM_PROFILE", "smoke")
    monkeypatch.setenv("SCALEDMM_STRICT_ERRORS", "yes")
    result = project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    assert result.ret == 0
    report = project.report()
    assert report["matrix"]["profile"] == "smoke" and len(report["cases"]) == 1
    assert report["session"]["strict_errors"] is True


def test_an_ini_path_is_relative_to_the_ini_file(project, pytester, monkeypatch):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nscaledmm_report = "out/ini-report.json"\n')
    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    result = project.run(
        "-c",
        str(pytester.path / "pyproject.toml"),
        "--scaledmm-matrix",
        str(pytester.path / "matrix.yaml"),
        *IN_PROCESS,
    )
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / "out" / "ini-report.json").is_file()
    assert not (pytester.path / "elsewhere" / "out").exists()


@pytest.mark.parametrize(
    "env, value, expected",
    [
        ("SCALEDMM_TIMEOUT", "nan", "SCALEDMM_TIMEOUT=nan: must be a finite number of seconds above 0"),
        ("SCALEDMM_TRIAGE_BUDGET", "-1", "SCALEDMM_TRIAGE_BUDGET=-1: must be a finite number of seconds above 0"),
        ("SCALEDMM_SEED", "abc", "SCALEDMM_SEED=abc: expected an integer"),
        ("SCALEDMM_ISOLATE", "maybe", "SCALEDMM_ISOLATE=maybe: expected one of yes, no"),
        ("SCALEDMM_STRICT_ERRORS", "sometimes", "SCALEDMM_STRICT_ERRORS=sometimes: expected one of 1, true"),
        ("SCALEDMM_DEVICE", "gpu", "SCALEDMM_DEVICE=gpu: not a device; use auto"),
    ],
)
def test_a_bad_environment_value_is_one_usage_error_naming_the_variable(project, monkeypatch, env, value, expected):
    monkeypatch.setenv(env, value)
    result = project.run("--scaledmm-matrix")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and expected in errors[0], result.stderr.str()
    assert "Traceback" not in result.stderr.str()


def test_a_bad_ini_value_names_the_file_and_the_key(project, pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nscaledmm_timeout = "nan"\n')
    result = project.run("--scaledmm-matrix")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "ERROR: pyproject.toml [tool.pytest.ini_options] scaledmm_timeout = nan: must be a finite number"
        in result.stderr.str()
    )


def test_a_bad_tox_ini_value_names_the_file(project, pytester):
    (pytester.path / "tox.ini").write_text("[pytest]\nscaledmm_max_autotune_configs = many\n")
    result = project.run("--scaledmm-matrix")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: tox.ini [pytest] scaledmm_max_autotune_configs = many: expected an integer" in result.stderr.str()


def test_a_command_line_value_is_named_by_its_flag(project):
    result = project.run("--scaledmm-matrix", "--scaledmm-timeout", "nan")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--scaledmm-timeout must be a finite number of seconds above 0, got nan" in result.stderr.str()


def test_options_without_the_matrix_say_the_matrix_did_not_run(project, pytester, monkeypatch):
    pytester.makepyfile(test_unit="def test_one():\n    pass\n")
    monkeypatch.setenv("SCALEDMM_SEED", "3")
    result = project.run("--scaledmm-profile", "smoke")
    result.assert_outcomes(passed=1)  # the project's own tests run as ever
    hint = [line for line in result.outlines if "the matrix did not run" in line]
    assert len(hint) == 1
    assert "--scaledmm-profile" in hint[0] and "SCALEDMM_SEED=3" in hint[0] and "--scaledmm-matrix" in hint[0]


def test_an_ini_matrix_alone_does_not_take_over_the_project_tests(project, pytester):
    """scaledmm_matrix in the ini names the file a bare --scaledmm-matrix runs; `pytest` alone
    runs the project's tests and says why the matrix did not run."""
    pytester.makepyfile(test_unit="def test_one():\n    pass\n")
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nscaledmm_matrix = "matrix.yaml"\n')
    result = project.run()
    result.assert_outcomes(passed=1)
    assert any("scaledmm_matrix" in line and "the matrix did not run" in line for line in result.outlines)


def test_ini_matrix_is_the_file_a_bare_flag_runs(project, pytester):
    other = pytester.mkdir("matrices")
    (other / "small.yaml").write_text(matrix_text(["aten_scaled_mm"], {"m": [4, 8, 16]}, cases=3))
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nscaledmm_matrix = "matrices/small.yaml"\n')
    assert collected(project.run("--scaledmm-matrix", "--collect-only", "-q")) == 3


def test_addopts_turns_the_matrix_on(project, pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\naddopts = "--scaledmm-matrix"\nscaledmm_profile = "smoke"\n')
    assert collected(project.run("--collect-only", "-q")) == 1


def test_no_options_no_hint(project, pytester):
    pytester.makepyfile(test_unit="def test_one():\n    pass\n")
    result = project.run()
    result.assert_outcomes(passed=1)
    assert "the matrix did not run" not in result.stdout.str()


def test_a_directory_stands_for_its_matrix_yaml(project, pytester):
    sub = pytester.mkdir("proj")
    (sub / "matrix.yaml").write_text(matrix_text(["aten_scaled_mm"], {"m": [4, 8, 16]}, cases=3))
    assert collected(project.run("--scaledmm-matrix", "proj", "--collect-only", "-q")) == 3
    result = project.run("--scaledmm-matrix", str(pytester.mkdir("empty")))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "empty/matrix.yaml: file not found" in result.stderr.str()


def test_help_names_each_option_ini_and_variable_without_shouty_metavars(pytester):
    result = pytester.runpytest("--help")
    text = result.stdout.str()
    assert "=SCALEDMM_" not in text  # no metavar spelled as the dest
    assert "--scaledmm-profile=NAME" in text and "--scaledmm-seed=N" in text
    assert "smoke" in text and "profiles:" in text  # where profile names come from
    from pytest_scaledmm.plugin.options import PLUGIN_OPTIONS

    flat = " ".join(text.split())
    for option in PLUGIN_OPTIONS:
        assert f"ini {option.ini_name}, env {option.env_name}" in flat, option.flag


# -- without --scaledmm-matrix ---------------------------------------------------------------------


def test_inert_without_the_flag(matrix_project, pytester):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = matrix_project.run()
    result.assert_outcomes(passed=1)
    assert "scaled-mm matrix" not in result.stdout.str()
    assert not (pytester.path / ".scaledmm").exists()


def test_plugin_import_does_not_import_torch():
    code = "import sys, pytest_scaledmm.plugin.entry; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- a bad shard, keep, case or list names its real source -----------------------------------------


TWO_KERNELS = matrix_text([planted("correct"), planted("ignores_scale_b")], {"out_dtype": ["bf16", "fp16"]})


def _usage_lines(result):
    return [line for line in result.stderr.lines if line.strip()]


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("SCALEDMM_SHARD", "3/2", "ERROR: SCALEDMM_SHARD=3/2: '3/2' is not I/N with whole numbers 1 <= I <= N"),
        ("SCALEDMM_SHARD", "a/b", "ERROR: SCALEDMM_SHARD=a/b: 'a/b' is not I/N"),
        ("SCALEDMM_SHARD", "1/0", "ERROR: SCALEDMM_SHARD=1/0: '1/0' is not I/N"),
        (
            "SCALEDMM_KEEP",
            "-1",
            "ERROR: SCALEDMM_KEEP=-1: keeps at least one report (the run's own): N must be a whole number >= 1, got -1",
        ),
        ("SCALEDMM_KEEP", "two", "ERROR: SCALEDMM_KEEP=two: expected an integer"),
    ],
)
def test_a_bad_shard_or_keep_from_the_environment_names_the_variable(
    matrix_project, monkeypatch, name, value, expected
):
    monkeypatch.setenv(name, value)
    matrix_project.write_matrix(TWO_KERNELS)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = _usage_lines(result)
    assert len(lines) == 1 and lines[0].startswith(expected) and "--scaledmm-" not in lines[0].split(":")[0]
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    "ini, text, expected",
    [
        (
            "tox.ini",
            "[pytest]\nscaledmm_shard = 0/2\n",
            "ERROR: tox.ini [pytest] scaledmm_shard = 0/2: '0/2' is not I/N",
        ),
        (
            "pytest.ini",
            "[pytest]\nscaledmm_keep = 0\n",
            "ERROR: pytest.ini [pytest] scaledmm_keep = 0: keeps at least one report",
        ),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\nscaledmm_shard = 2\n",
            "ERROR: pyproject.toml [tool.pytest.ini_options] scaledmm_shard = 2: '2' is not I/N",
        ),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\nscaledmm_keep = 2.5\n",
            "ERROR: pyproject.toml [tool.pytest.ini_options] scaledmm_keep = 2.5: expected an integer",
        ),
    ],
)
def test_a_bad_shard_or_keep_from_an_ini_file_names_the_file(matrix_project, pytester, ini, text, expected):
    (pytester.path / ini).write_text(text)
    matrix_project.write_matrix(TWO_KERNELS)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = _usage_lines(result)
    assert len(lines) == 1 and lines[0].startswith(expected)


def test_the_command_line_still_names_the_flag(matrix_project, monkeypatch):
    monkeypatch.setenv("SCALEDMM_SHARD", "1/2")  # the command line wins, and its value is the bad one
    matrix_project.write_matrix(TWO_KERNELS)
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-shard", "2/1", "--scaledmm-report", "r.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result)[0].startswith("ERROR: --scaledmm-shard: '2/1' is not I/N")


def test_an_ini_list_that_is_not_all_words_is_one_error_or_the_hint_never_an_internal_error(matrix_project, pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nscaledmm_case = ["a", 1]\n')
    pytester.makepyfile(test_plain="def test_ok(): pass")
    plain = matrix_project.run("test_plain.py")  # the project's own tests, no matrix
    assert plain.ret == 0 and "INTERNALERROR" not in plain.stdout.str() + plain.stderr.str()
    assert any("scaledmm_case = a 1 take(s) effect only with --scaledmm-matrix" in line for line in plain.outlines)
    matrix_project.write_matrix(TWO_KERNELS)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result) == [
        "ERROR: pyproject.toml [tool.pytest.ini_options] scaledmm_case = a 1: expected a list of words"
    ]


def test_a_case_id_names_its_source_and_the_shard_that_runs_it(matrix_project, monkeypatch):
    matrix_project.write_matrix(TWO_KERNELS)
    monkeypatch.setenv("SCALEDMM_CASE", "nope")
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result)[0].startswith("ERROR: SCALEDMM_CASE=nope: unknown case id 'nope' in profile 'default'")
    monkeypatch.delenv("SCALEDMM_CASE")
    in_first = set(matrix_project.collect("--scaledmm-shard", "1/2"))
    other = next(cid for cid in matrix_project.collect() if cid not in in_first)
    result = matrix_project.run(
        *IN_PROCESS,
        "--scaledmm-matrix",
        "--scaledmm-shard",
        "1/2",
        "--scaledmm-case",
        other,
        "--scaledmm-report",
        "r.json",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result) == [
        f"ERROR: --scaledmm-case: case id '{other}' is not in shard 1/2: another shard runs it"
        " (leave out --scaledmm-shard to run it)"
    ]


# -- help texts say what the code does -------------------------------------------------------------


def test_the_report_help_names_the_real_default_directory():
    from pytest_scaledmm.plugin import options as opt
    from pytest_scaledmm.reports.report_dir import PROJECT_MARKERS, REPORTS_SUBDIR, default_report_name

    assert "under the rootdir" not in opt.REPORT.help
    assert f"<project>/{REPORTS_SUBDIR.as_posix()}/report-" in opt.REPORT.help
    assert default_report_name(0).startswith("report-19700101-")
    assert all(marker in opt.REPORT.help for marker in PROJECT_MARKERS if not marker.startswith("."))
    assert "--rootdir" in opt.REPORT.help
    assert "a directory stands for its matrix.yaml" in opt.MATRIX.help
    assert f"<project>/{REPORTS_SUBDIR.as_posix()}" in opt.KEEP.help


# -- numeric settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variable, value",
    [
        ("SCALEDMM_MAX_AUTOTUNE_CONFIGS", "-1"),
        ("SCALEDMM_SEED", "-1"),
        ("SCALEDMM_SEED", "\u0663"),
        ("SCALEDMM_EXPLORE_EXAMPLES", "0"),
    ],
)
def test_numeric_settings_out_of_range_are_one_usage_error(matrix_project, monkeypatch, variable, value):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    monkeypatch.setenv(variable, value)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and variable in errors[0], result.stderr.lines


def test_a_seed_in_other_digits_on_the_command_line_is_refused(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-seed", "\u0663")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
