"""The oracle: each side's output of one case checked against the float64 reference."""

from __future__ import annotations


def check_sides(params, inputs, eager_ran, eager_out, compiled_outs, slack):
    """Each side against the float64 reference (inputs.reference: exact values for zero and
    negative scales, IEEE non-finite positions for inf and nan ones, the tolerance built from the
    finite scales). With a special scale value the compiled outputs must also match eager's
    (parity: the same NaN and inf positions, finite values within twice the tolerance)."""
    from .inputs import check_metadata, compare, expected_shape, parity, reference

    shape, dtype = expected_shape(params), inputs.out_dtype
    ref = reference(params, inputs, slack)
    eager_check = compiled_check = None
    if eager_ran:
        eager_check = compare(eager_out, ref, shape, dtype)
    if compiled_outs is not None:
        checks = [compare(out, ref, shape, dtype) for out in compiled_outs]
        special = params.get("special_scale", "none") != "none"
        if special and eager_ran and check_metadata(eager_out, shape, dtype) is None:
            bound = {**ref.bound, "model": "twice the reference tolerance, against eager"}
            checks += [parity(eager_out, out, ref.tolerance, shape, dtype, bound) for out in compiled_outs]
        # The first failing check (reference before parity), else the closest call.
        failing = [c for c in checks if not c["ok"]]
        compiled_check = failing[0] if failing else max(checks, key=lambda c: c["ratio"])
    return eager_check, compiled_check
