"""Small matrix files for the tests, written from Python values.

`matrix_text([planted("correct"), "aten_scaled_mm"], {"m": [1, 4]})` is a matrix of one planted
kernel and one built-in over BASE_AXES with m overridden; its default profile holds every
combination of the axes for every kernel, unless `cases` says otherwise, and its limits keep the
M = 65536 extreme shape out (WITHOUT_M65536) unless `limits` says otherwise.
"""

import math
from pathlib import Path

import yaml

# One case per kernel: a 0-D scale against a [1] one, compiled with aot_eager, the smallest shape.
# The axes a matrix that leaves them out gets the whole range of (schema.PRODUCTION_DEFAULTS),
# narrowed to their neutral value: tests of reporting and running keep one case per kernel.
SYNTHETIC = {
    "dtype_a": ["e4m3fn"],
    "dtype_b": ["e4m3fn"],
    "out_dtype": ["bf16"],
    "bias": [False],
    "use_fast_accum": [False],
    "scale_layout": ["contiguous"],
    "activation_rank": [2],
    "special_scale": ["none"],
    "value_regime": ["standard"],
    "operand_layout": ["dense"],
    "bias_dtype": ["out"],
    "scale_dtype": ["fp32"],
}
# The same axes as lines under `axes:` in a matrix written as text.
SYNTHETIC_YAML = "".join(f"  {axis}: [{str(values[0]).lower()}]\n" for axis, values in SYNTHETIC.items())
BASE_AXES = {
    "scale_a": ["tensor_0d"],
    "scale_b": ["tensor_1d"],
    "mode": ["aot_eager"],
    "m": [4],
    "k": [32],
    "n": [16],
    **SYNTHETIC,
}


def synthetic(axes: dict, *keep: str) -> dict:
    """`axes` with the SYNTHETIC axes it does not list (but those in `keep`, left out) added."""
    return {**{k: v for k, v in SYNTHETIC.items() if k not in keep}, **axes}


# Limits that keep the M = 65536 extreme shape (matrix/shape_extremes.py) out of a test's run, the
# run saying "not proven" of it: torch's CPU _scaled_mm takes seconds a call there and a case
# calls it up to 15 times. M = 65536 with K >= 16 exceeds it; ordinary shapes (up to K = 16384 by
# N = 32) and the K and N extremes stay in.
WITHOUT_M65536 = {"max_operand_elements": 2**19}
WITHOUT_M65536_YAML = "limits: {max_operand_elements: 524288}\n"

# Cases in the pytest process without triage: for tests of reporting, not of isolation.
IN_PROCESS = ("--scaledmm-isolate=no", "--no-scaledmm-triage")


def planted(name: str, function: str | None = None, module: str = "planted_kernels", **declared) -> dict:
    """A kernel entry named `name` that runs `module:function` (default: the function `name`),
    with declarations such as min_m=2 or scale_forms=[...]."""
    return {"name": name, "impl": f"{module}:{function or name}", **declared}


def matrix_text(kernels, axes=None, *, cases=None, base=BASE_AXES, **top) -> str:
    """matrix.yaml text. `kernels`: entries from `planted` or names (built-in or hook kernels);
    `axes` override `base`; `top` adds or replaces top-level keys (known_failures, exclude,
    profiles, limits: None leaves the key out)."""
    axes = {**base, **(axes or {})}
    if cases is None:
        cases = math.prod(len(values) for values in axes.values()) * len(kernels)
    top = {"limits": WITHOUT_M65536, **top}
    if top["limits"] is None:
        del top["limits"]
    document = {"version": 1, "kernels": list(kernels), "axes": axes, "profiles": {"default": {"cases": cases}}, **top}
    return yaml.safe_dump(document, sort_keys=False)


def catalogue_matrix(path, entries) -> Path:
    """Write a one-kernel matrix (aten_scaled_mm, inductor, one case) whose known_failures are
    `entries` to `path`; return the path."""
    path.write_text(matrix_text(["aten_scaled_mm"], {"mode": ["inductor"]}, cases=1, known_failures=list(entries)))
    return path
