"""The session's own seconds (plugin/timeline.py): each process's configure, generation and first
case, and the last record, in the report's `session.phases`."""

import pytest

from matrices import matrix_text

AXES = {"mode": ["eager"], "m": [16, 17], "k": [32], "n": [16, 32]}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_the_report_says_when_each_process_reached_its_first_case(matrix_project, workers):
    matrix_project.write_matrix(matrix_text(["aten_scaled_mm"], AXES, cases=4))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *workers)
    assert result.ret in (0, 1), result.stdout.str()
    session = matrix_project.report()["session"]
    phases = session["phases"]
    # A worker's timeline comes with its first case: each worker that ran one is there.
    runners = sorted(set(phases["processes"]) - {"main"}) if workers else ["main"]
    assert "main" in phases["processes"]
    assert runners and set(runners) <= ({"gw0", "gw1"} if workers else {"main"})
    for name in runners:
        process = phases["processes"][name]
        assert process["generation_s"] > 0  # each process that collects generates the cases
        assert 0 <= process["configured_s"] <= process["first_case_s"] <= phases["last_record_s"]
    assert phases["last_record_s"] <= session["wall_s"]
    if workers:  # the controller generates too, and runs no case
        assert phases["processes"]["main"]["first_case_s"] is None
