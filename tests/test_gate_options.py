"""Each gate opt-in as a pytest option (`pytest --scaledmm-baseline B --scaledmm-allow-...`): the
same gate as `scaledmm gate`, failing the session without the opt-in and naming the pytest flag
that accepts it, passing with it and saying what it let pass."""

from matrices import IN_PROCESS, matrix_text, planted

CANDIDATE = (*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "new.json", "--scaledmm-baseline", "old.json")


def _baseline(matrix_project, kernels, axes=None):
    matrix_project.write_matrix(matrix_text(kernels, axes))
    return matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "old.json")


def test_allow_worse_accepts_values_further_off_in_a_case_that_failed_alike(matrix_project):
    axes = {"m": [16], "n": [32], "mode": ["inductor"]}
    _baseline(matrix_project, [planted("k", "fp32_out", module="planted_evidence_kernels")], axes)
    matrix_project.write_matrix(
        matrix_text([planted("k", "fp32_out_far_off", module="planted_evidence_kernels")], axes)
    )
    refused = matrix_project.run(*CANDIDATE)
    assert refused.ret == 1
    refused.stdout.fnmatch_lines(
        ["*gate FAILED*", "*off by more: eager max abs error*(--scaledmm-allow-worse accepts it)"]
    )
    accepted = matrix_project.run(*CANDIDATE, "--scaledmm-allow-worse")
    accepted.assert_outcomes(failed=1)
    assert accepted.ret == 0, accepted.stdout.str()
    accepted.stdout.fnmatch_lines(["*note: accepted (--scaledmm-allow-worse): *off by more*"])


def test_allow_missing_accepts_a_candidate_that_ran_part_of_the_baseline(matrix_project):
    axes = {"mode": ["eager", "inductor"]}
    _baseline(matrix_project, [planted("k", "correct")], axes).assert_outcomes(passed=2)
    refused = matrix_project.run(*CANDIDATE, "-k", "inductor")
    refused.assert_outcomes(passed=1)
    assert refused.ret == 1
    refused.stdout.fnmatch_lines(
        ["*gate FAILED*", "*candidate run is incomplete*(--scaledmm-allow-missing accepts it)"]
    )
    accepted = matrix_project.run(*CANDIDATE, "-k", "inductor", "--scaledmm-allow-missing")
    assert accepted.ret == 0, accepted.stdout.str()
    accepted.stdout.fnmatch_lines(["*note: skipped (--scaledmm-allow-missing): 1 case(s) of the baseline are missing*"])


def test_allow_looser_slack_accepts_a_kernels_larger_tolerance_slack(matrix_project):
    entry = {"name": "mine", "impl": "planted_kernels:correct"}
    _baseline(matrix_project, [entry]).assert_outcomes(passed=1)
    matrix_project.write_matrix(matrix_text([{**entry, "slack": 2, "slack_reason": "rounds its epilogue twice"}]))
    refused = matrix_project.run(*CANDIDATE)
    assert refused.ret == 1
    refused.stdout.fnmatch_lines(["*slack loosened from 1 to 2*(--scaledmm-allow-looser-slack accepts it)"])
    accepted = matrix_project.run(*CANDIDATE, "--scaledmm-allow-looser-slack")
    assert accepted.ret == 0, accepted.stdout.str()
    accepted.stdout.fnmatch_lines(["*note: accepted (--scaledmm-allow-looser-slack): *loosened from 1 to 2*"])
