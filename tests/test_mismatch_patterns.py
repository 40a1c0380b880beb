"""What the off elements of a wrong output share: one constant factor (an ignored output scale),
a band of columns (a misread scale block), or nothing. Distinct bugs get distinct signatures;
scattered errors of one bug never split into several."""

import torch

from pytest_scaledmm.verdict.classify import classify
from pytest_scaledmm.verdict.outcome import normalise_message
from pytest_scaledmm.verdict.reference import Reference, compare


def _reference(value, rel=2.0**-8):
    tolerance = value.abs() * rel + 1e-6
    return Reference(value, tolerance, {"model": "test"})


def _value(rows=64, cols=256, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(rows, cols, generator=generator, dtype=torch.float64) + 0.5) * torch.where(
        torch.rand(rows, cols, generator=generator) > 0.5, 1.0, -1.0
    ).double()


def _check(out, ref):
    return compare(out.to(torch.float32), ref, tuple(ref.value.shape), torch.float32)


def test_an_output_scaled_by_one_number_is_off_by_one_constant_factor():
    ref = _reference(_value())
    check = _check(ref.value * 0.25, ref)
    assert not check["ok"]
    assert check["pattern"] == "by one constant factor"
    assert check["where"] == "output = 0.25 x reference"


def test_a_misread_column_block_is_off_in_a_band_of_columns():
    ref = _reference(_value())
    out = ref.value.clone()
    out[:, 128:] *= torch.linspace(3.0, 9.0, 128, dtype=torch.float64)  # another scale, per column
    check = _check(out, ref)
    assert check["pattern"] == "in a band of columns"
    assert check["where"] == "columns 128-255 of 256"


def test_a_band_of_rows():
    ref = _reference(_value())
    out = ref.value.clone()
    out[16:32] += 5.0
    check = _check(out, ref)
    assert check["pattern"] == "in a band of rows"
    assert check["where"] == "rows 16-31 of 64"


def test_scattered_errors_share_nothing():
    ref = _reference(_value())
    out = ref.value.clone()
    generator = torch.Generator().manual_seed(1)
    scattered = torch.rand(out.shape, generator=generator) < 0.05
    out[scattered] += 3.0
    check = _check(out, ref)
    assert not check["ok"]
    assert "pattern" not in check


def test_a_sparse_band_is_not_a_band():
    # Errors in one column range but only here and there: no block was misread.
    ref = _reference(_value())
    out = ref.value.clone()
    out[::7, 130:140] += 3.0
    check = _check(out, ref)
    assert "pattern" not in check


def test_a_right_output_has_no_pattern():
    ref = _reference(_value())
    check = _check(ref.value, ref)
    assert check["ok"] and "pattern" not in check


def _signature(eager_out, compiled_out, ref):
    eager, compiled = _check(eager_out, ref), _check(compiled_out, ref)
    return classify(None, None, 1, eager, compiled)


def test_the_pattern_splits_two_bugs_into_two_signatures_and_keeps_one_bug_one():
    ref = _reference(_value())
    halved = _signature(ref.value * 0.5, ref.value * 0.5, ref)
    quartered = _signature(ref.value * 4, ref.value * 4, ref)
    band = ref.value.clone()
    band[:, 128:] *= 7.0
    banded = _signature(band, band, ref)
    assert halved.outcome == "MISMATCH"
    assert (
        halved.signature
        == quartered.signature
        == "MISMATCH: eager+compiled values off the reference by one constant factor"
    )
    assert banded.signature == "MISMATCH: eager+compiled values off the reference in a band of columns"
    assert "columns 128-255 of 256" in banded.detail and "output = 0.5 x reference" in halved.detail


def test_data_dependent_guards_on_different_expressions_are_one_signature():
    texts = [
        "Could not guard on data-dependent expression Eq(u0, 64) (unhinted: Eq(u0, 64)). (Size-like symbols: u0)",
        "Consider annotating your code using torch._check*(). Could not guard on data-dependent expression u0 < 2 "
        "(unhinted: u0 < 2). (Size-like symbols: u0)",
        "Consider annotating your code using torch._check*(). Could not guard on data-dependent expression 64*u0 < 2",
    ]
    assert {normalise_message(text) for text in texts} == {"Could not guard on data-dependent expression <expr>"}


def test_eager_names_the_bug_when_both_sides_are_off_in_their_own_ways():
    # Eager misreads one column block; the compiled template returns garbage everywhere.
    ref = _reference(_value())
    band = ref.value.clone()
    band[:, 128:] *= 7.0
    garbage = ref.value * 0 + 1e22
    assert (
        _signature(band, garbage, ref).signature
        == _signature(band, band, ref).signature
        == ("MISMATCH: eager+compiled values off the reference in a band of columns")
    )


def test_inf_where_the_reference_is_finite_is_its_own_pattern():
    # An overflow in a band of columns is an overflow first: no band, no factor.
    ref = _reference(_value())
    out = ref.value.clone()
    out[:, 128:] = float("inf")
    check = _check(out, ref)
    assert check["pattern"] == "non-finite where the reference is finite"
    assert check["where"] == f"{64 * 128} of {64 * 256} elements non-finite"
    assert _signature(out, out, ref).signature == (
        "MISMATCH: eager+compiled values off the reference non-finite where the reference is finite"
    )
