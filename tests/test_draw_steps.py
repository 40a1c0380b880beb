"""The input draw: production dimensions as steps (verdict/draw.py DRAW_STEPS) and a draw that is
the same whatever the thread count (repro scripts check the very tensors)."""

import pytest
from case_factory import case_record

from pytest_scaledmm.verdict.draw import DRAW_STEPS, make_inputs
from pytest_scaledmm.verdict.facts import input_facts

torch = pytest.importorskip("torch")


def test_an_element_picked_twice_takes_its_last_draw():
    from pytest_scaledmm.verdict.regimes import _last_of_each  # noqa: PLC0415

    picks = torch.tensor([3, 1, 3, 2, 1])
    assert _last_of_each(picks).tolist() == [4, 3, 2]  # 1 at 4, 2 at 3, 3 at 2


def test_a_full_range_draw_is_the_same_on_one_thread_and_on_several():
    """M x K = 2048 x 256: about 8000 subnormal picks, some of them twice with other signs; a
    parallel write of those kept either sign, so the tensors depended on the thread count."""
    params = case_record(m=2048, k=256, n=128, value_regime="full_range", out_dtype="fp16")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = input_facts(make_inputs(params, 7, "cpu"))
        torch.set_num_threads(max(2, threads))
        shared = input_facts(make_inputs(params, 7, "cpu"))
    finally:
        torch.set_num_threads(threads)
    assert alone == shared


def test_each_step_is_named_for_what_it_draws():
    names = [step.__name__ for step in DRAW_STEPS]
    assert len(set(names)) == len(names) and all(name.endswith("_step") for name in names)
    # The special value goes in last: every earlier step sees the finite scales.
    assert names[-2:] == ["_special_scale_step", "_special_operand_step"]
