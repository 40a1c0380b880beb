"""Scheduling for the tail (plugin/schedule.py): the costliest cases first in every worker's
collection, handed out one at a time; every case's seconds accounted in its record."""

import json

from case_factory import case_record

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.plugin import longest_first, schedule
from pytest_scaledmm.plugin.cost import case_cost
from pytest_scaledmm.verdict.case_axes import CaseParams

MODES_MATRIX = matrix_text(
    [planted("correct")],
    {"mode": ["eager", "aot_eager", "inductor"], "scale_a": ["tensor_0d", "tensor_1d"]},
)


def _mode(case_id: str) -> str:
    return next(mode for mode in ("aot_eager", "inductor", "eager") if f"-{mode}-" in case_id)


def test_without_a_previous_report_the_compile_mode_orders_the_cases(matrix_project):
    matrix_project.write_matrix(MODES_MATRIX)
    ids = matrix_project.collect()
    assert len(ids) == 6
    assert [_mode(i) for i in ids] == ["inductor"] * 2 + ["aot_eager"] * 2 + ["eager"] * 2


def test_the_previous_reports_seconds_order_the_next_run(matrix_project):
    matrix_project.write_matrix(MODES_MATRIX)
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS)
    result.assert_outcomes(passed=6)
    newest = max((matrix_project.path / ".scaledmm" / "reports").glob("*.json"), key=lambda p: p.stat().st_mtime)
    data = json.loads(newest.read_text())
    # Every case's own clock is in its record, and holds its parts.
    for case in data["cases"]:
        timing = case["timing"]
        parts = sum(v for k, v in timing.items() if k != "case_s")
        assert timing["case_s"] >= parts - 1e-3, timing
    # Say the eager cases were the slow ones: the next run starts with them.
    for case in data["cases"]:
        case["timing"] = {"case_s": 100.0 if "-eager-" in case["id"] else 0.01}
    newest.write_text(json.dumps(data))
    ids = matrix_project.collect()
    assert [_mode(i) for i in ids[:2]] == ["eager", "eager"]
    assert sorted(ids) == sorted(c["id"] for c in data["cases"])


def test_measured_seconds_prefer_the_cases_own_clock_and_refuse_garbage():
    assert schedule.measured_seconds({"timing": {"case_s": 3.0, "compile_s": 2.0}}) == 3.0
    assert schedule.measured_seconds({"timing": {"compile_s": 2.0, "eager_s": 0.5}}) == 2.5
    assert schedule.measured_seconds({"timing": {"case_s": True}}) is None
    assert schedule.measured_seconds({"timing": None}) is None
    assert schedule.measured_seconds({}) is None


def test_a_refused_case_is_cheaper_than_a_valid_one_of_its_mode():
    valid = case_cost(case_record(mode="max-autotune", purpose="valid"))
    refused = case_cost(case_record(mode="max-autotune", purpose="boundary"))
    host = case_cost(case_record(mode="max-autotune", operand_layout="scale_on_host"))
    assert refused < valid < host
    assert case_cost(case_record(mode="eager")) < case_cost(case_record(mode="inductor"))


class _Node:
    """The part of xdist's WorkerController a scheduler talks to."""

    def __init__(self, name):
        self.gateway = type("Gateway", (), {"id": name})()
        self.workerinput = {"workerid": name}
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices):
        self.sent.extend(indices)

    def shutdown(self):
        self.shutting_down = True


class _Config:
    """What xdist's LoadScheduling reads of the config: three workers, no chunk limit."""

    def getvalue(self, name):
        return {"tx": ["3*popen"]}.get(name)

    getoption = getvalue


def _scheduled(collection: list[str]):
    """The longest-first scheduler over three workers gw0-gw2 that collected `collection`, after
    its first hand-out; the case HOST is in the host lane."""
    sched = longest_first.LongestFirstScheduling(_Config(), log=None, host_lane=[HOST.rpartition("::")[2]])
    nodes = [_Node("gw0"), _Node("gw1"), _Node("gw2")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    return sched, nodes


def test_the_scheduler_hands_the_next_case_in_order_to_the_worker_that_is_free():
    sched, nodes = _scheduled([f"case{i}" for i in range(12)])
    # The three costliest start at once, one on each worker, each with two queued behind it.
    assert longest_first.QUEUED_PER_WORKER == 3
    assert [node.sent for node in nodes] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    # gw1 finishes its first: it gets the next case in order, and only one.
    sched.mark_test_complete(nodes[1], 1, duration=5.0)
    assert nodes[1].sent == [1, 4, 7, 9] and nodes[0].sent == [0, 3, 6]
    for index in (3, 0):  # finished out of order: the queue still tops up to three
        sched.mark_test_complete(nodes[0], index, duration=0.1)
    assert nodes[0].sent == [0, 3, 6, 10, 11] and not sched.pending
    sched.mark_test_complete(nodes[2], 2)
    assert nodes[2].sent == [2, 5, 8]
    # Nothing left to hand out: every worker stops after its queue (gw0 still runs 6, 10 and 11).
    assert all(node.shutting_down for node in nodes) and sched.node2pending[nodes[0]] == [6, 10, 11]


def test_a_worker_always_holds_the_case_after_its_next_while_cases_remain():
    """xdist's worker takes the index of the case after next before it runs one: with fewer than
    two queued beside the running one, it would wait for the controller between cases."""
    sched, nodes = _scheduled([f"case{i}" for i in range(30)])
    while sched.pending:
        for node in nodes:
            running = sched.node2pending[node][0]
            sched.mark_test_complete(node, running)
            if sched.pending:  # the one it starts now, and the one after it, are already there
                assert len(sched.node2pending[node]) >= 3


HOST = "matrix.yaml::i8-row_x_row-m16k128n128-bf16-max-autotune-hostscale-1a2b3c"


def test_only_inductor_cases_with_a_host_scale_are_in_the_host_lane():
    host = CaseParams(kernel="int8_w8a8", m=16, k=128, n=128, mode="max-autotune", operand_layout="scale_on_host")
    assert schedule.builds_host_kernel(host)
    assert schedule.builds_host_kernel(host.with_values(mode="max-autotune-no-cudagraphs"))
    assert not schedule.builds_host_kernel(host.with_values(mode="eager"))
    assert not schedule.builds_host_kernel(host.with_values(operand_layout="a_padded"))


def test_the_host_lane_goes_to_its_worker_and_to_any_once_that_worker_is_gone():
    sched, nodes = _scheduled(
        [HOST, HOST, HOST, HOST, "matrix.yaml::a", "matrix.yaml::b", "matrix.yaml::c", "matrix.yaml::d"]
    )
    # The four host cases come first in order; only gw0 takes them (three queued at a time).
    assert nodes[0].sent == [0, 1, 2] and nodes[1].sent == [4, 6] and nodes[2].sent == [5, 7]
    # gw1 and gw2 have nothing more they may take (the host case waits for gw0), but they stay:
    # should gw0 die, they take its cases. All stop once nothing is pending.
    assert not any(node.shutting_down for node in nodes)
    sched.mark_test_complete(nodes[0], 0)
    assert nodes[0].sent == [0, 1, 2, 3] and not sched.pending
    # gw0 still holds host cases behind the one it runs: the others wait in case it dies.
    assert not any(node.shutting_down for node in nodes)
    for index in (1, 2):
        sched.mark_test_complete(nodes[0], index)
    assert all(node.shutting_down for node in nodes)


def test_the_host_lane_is_not_stranded_when_its_worker_dies_last():
    sched, nodes = _scheduled([HOST, HOST, HOST, HOST, "matrix.yaml::a", "matrix.yaml::b"])
    for node, index in ((nodes[1], 4), (nodes[2], 5)):
        sched.mark_test_complete(node, index)
    assert not nodes[1].shutting_down and not nodes[2].shutting_down
    sched.remove_node(nodes[0])  # gw0 dies in case 0 with 1 and 2 queued: 1, 2 and 3 go to the others
    assert sorted(nodes[1].sent + nodes[2].sent) == [1, 2, 3, 4, 5] and not sched.pending


def test_a_host_case_left_when_its_worker_dies_goes_to_any_worker():
    sched, nodes = _scheduled([HOST, HOST, HOST] + [f"matrix.yaml::c{i}" for i in range(9)])
    assert nodes[0].sent == [0, 1, 2] and nodes[1].sent == [3, 5, 7] and nodes[2].sent == [4, 6, 8]
    sched.remove_node(nodes[0])  # it crashed in case 0: cases 1 and 2 go back, first in the order
    for index in (3, 5):
        sched.mark_test_complete(nodes[1], index)
    assert nodes[1].sent == [3, 5, 7, 1, 2]
    for index in (4, 6, 8):
        sched.mark_test_complete(nodes[2], index)
    assert nodes[2].sent == [4, 6, 8, 9, 10, 11] and not sched.pending


def test_the_other_workers_stay_while_the_host_lane_holds_cases_behind_the_one_it_runs():
    sched, nodes = _scheduled([HOST, HOST, HOST, "matrix.yaml::a", "matrix.yaml::b", "matrix.yaml::c"])
    assert nodes[0].sent == [0, 1, 2] and not sched.pending
    # Everything is handed out, but gw0 holds two host cases behind the one it runs: should it
    # die, gw1 or gw2 must still be there to take them.
    assert not nodes[1].shutting_down and not nodes[2].shutting_down
    sched.remove_node(nodes[0])
    assert sorted(nodes[1].sent + nodes[2].sent) == [1, 2, 3, 4, 5] and not sched.pending
    for node in nodes[1:]:
        for index in list(sched.node2pending[node]):
            sched.mark_test_complete(node, index)
    assert all(node.shutting_down for node in nodes[1:])


def test_once_the_host_lane_runs_its_last_case_every_worker_stops_after_its_queue():
    sched, nodes = _scheduled([HOST, HOST, "matrix.yaml::a", "matrix.yaml::b"])
    assert nodes[0].sent == [0, 1] and not any(node.shutting_down for node in nodes)
    sched.mark_test_complete(nodes[0], 0)  # gw0 now runs its last case, with none behind it
    assert all(node.shutting_down for node in nodes)


def test_the_controller_finds_the_host_lane_in_its_typed_cases():
    from types import SimpleNamespace

    from pytest_scaledmm.matrix.case_params import make_case

    base = {"kernel": "int8_w8a8", "m": 16, "k": 128, "n": 128, "operand_layout": "scale_on_host"}
    host = make_case({**base, "mode": "inductor"})
    eager = make_case({**base, "mode": "eager"})
    state = SimpleNamespace(cases=lambda: [eager, host])
    sched = longest_first.LongestFirst(state).pytest_xdist_make_scheduler(_Config(), log=None)
    assert sched.host_lane == {host.id}
