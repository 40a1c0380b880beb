"""The oracle: each side's output of one case checked against the float64 reference."""

from __future__ import annotations


def check_sides(params, inputs, eager_ran, eager_out, compiled_outs, slack):
    """Each side against the float64 reference; with a special scale value (zero, negative, inf,
    nan) eager's shape and dtype, then compiled against eager (parity), not against a number."""
    from .inputs import check_metadata, compare, expected_shape, parity, reference

    shape, dtype = expected_shape(params), inputs.out_dtype
    special = params.get("special_scale", "none") != "none"
    eager_check = compiled_check = None
    if special:
        tolerance = reference(params, inputs, slack, scale_a=inputs.finite_scale_a).tolerance
        if eager_ran:
            eager_check = check_metadata(eager_out, shape, dtype) or {"ok": True, "ratio": 0.0, "max_abs": 0.0}
        if compiled_outs is not None:
            if eager_ran and eager_check["ok"]:
                checks = [parity(eager_out, out, tolerance, shape, dtype) for out in compiled_outs]
            else:  # nothing sound to compare against: metadata only
                checks = [check_metadata(out, shape, dtype) or {"ok": True, "ratio": 0.0} for out in compiled_outs]
            compiled_check = max(checks, key=lambda c: c["ratio"])
        return eager_check, compiled_check
    ref = reference(params, inputs, slack)
    if eager_ran:
        eager_check = compare(eager_out, ref, shape, dtype)
    if compiled_outs is not None:
        compiled_check = max((compare(out, ref, shape, dtype) for out in compiled_outs), key=lambda c: c["ratio"])
    return eager_check, compiled_check
