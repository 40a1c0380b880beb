"""The corpus: minimal failing cases that explore mode found, in a YAML file that matrix.yaml
lists under `include:` so that every run (every tox env) replays them.

    # written by pytest --scaledmm-explore
    version: 1
    cases:
      - id: fp8e4m3-s0d_x_s1d-m1k16n16-bf16-inductor-1a2b3c
        outcome: COMPILE_ONLY_ERROR
        signature: "InductorError <- AssertionError: ..."
        found: {torch: 2.11.0, arch: sm90, date: 2026-11-30}
        params: {kernel: aten_scaled_mm, scale_a: tensor_0d, ..., m: 1, k: 16, n: 16}

Only `params` decides the case (its id is recomputed from them); a missing categorical axis takes
the matrix default. This module reads and writes the file; which entries to add is explore mode's
(plugin/explore.py). Below spec.py, which reads a matrix's includes through it. No torch import here.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..verdict.regimes import SPECIAL_OPERANDS
from ..verdict.support_fields import ACCUMULATION
from . import bounded_yaml
from .errors import MatrixError
from .schema import AXIS_DEFAULTS, CATEGORICAL_AXES, KERNEL_AXES, SHAPE_AXES, size_problem, takes_axis

CORPUS_VERSION = 1
DEFAULT_NAME = "scaledmm-corpus.yaml"

_VALUES = {name: list(values) for name, values in CATEGORICAL_AXES.items()}
for _side in ("dtype_a", "dtype_b"):
    _VALUES[_side] = _VALUES[_side] + ["int8"]  # the int8 family's operands
# The axes some kernels take (value regimes, layouts, grouped GEMM ...), and a declared accumulation.
_VALUES.update({name: list(values) for name, (values, _, _) in KERNEL_AXES.items()})
_VALUES["accumulation"] = list(ACCUMULATION)
_VALUES["activation"] = ["dynamic"]
_VALUES["special_operand"] = list(SPECIAL_OPERANDS)

CORPUS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["version", "cases"],
    "properties": {
        "version": {"const": CORPUS_VERSION},
        "cases": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["params"],
                "properties": {
                    "id": {"type": "string"},
                    "outcome": {"type": "string"},
                    "signature": {"type": ["string", "null"]},
                    "found": {"type": "object"},
                    "params": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["kernel", *SHAPE_AXES],
                        "properties": {
                            "kernel": {"type": "string", "minLength": 1},
                            **{name: {"enum": values} for name, values in _VALUES.items()},
                            **{dim: {"type": "integer", "minimum": 0, "maximum": 65536} for dim in SHAPE_AXES},
                            # Why generation made the case (cases.py); a record's params carry it.
                            "purpose": {"enum": ["valid", "boundary", "special"]},
                            "expected_refusal": {"type": "string", "pattern": "^[a-z0-9_]{1,40}$"},
                            "activation_divisor": {"type": "number", "exclusiveMinimum": 0},
                        },
                    },
                },
            },
        },
    },
}


@dataclass(frozen=True)
class IncludedCase:
    source: Path
    index: int
    params: Mapping[str, Any]


# What a case holds that an entry does not decide: the kernel's declaration (its accumulation, a
# dynamic activation and its divisor: matrix/cases.py kernel_case_params adds the kernel's own
# when the case is included) and generation's judgement of the case (why it was made). Taken from
# an entry, they would loosen the bound or excuse a failure.
NOT_FROM_AN_ENTRY = ("accumulation", "activation", "activation_divisor", "purpose", "expected_refusal")


def complete_params(params: Mapping[str, Any]) -> dict:
    """An entry's params with every categorical axis it leaves out at the matrix default, and the
    other axes it gives (a value regime, a layout, a special operand ...) as given: the case the
    entry was saved from. NOT_FROM_AN_ENTRY is left out."""
    full = {"kernel": params["kernel"]}
    for name in CATEGORICAL_AXES:
        full[name] = params.get(name, AXIS_DEFAULTS[name][0])
    for dim in SHAPE_AXES:
        full[dim] = params[dim]
    full.update((key, value) for key, value in params.items() if key not in full and key not in NOT_FROM_AN_ENTRY)
    return full


def read_entries(path: Path) -> list[dict]:
    """The file's entries as written, read within the bounds of every matrix file (bounded_yaml)
    and validated against CORPUS_SCHEMA; a problem is a MatrixError naming the key."""
    import jsonschema  # noqa: PLC0415  0.3 s start-up

    data = bounded_yaml.load(path, bounded_yaml.read_text(path, "included file"))
    validator = jsonschema.Draft202012Validator(CORPUS_SCHEMA)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        key = ""
        for part in error.absolute_path:
            key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
        # jsonschema's message quotes the value: a file that is not a corpus (/etc/passwd) would
        # be pasted into the line. Its type is said instead; other messages are cut short.
        if error.validator == "type":
            kind = {
                dict: "a mapping",
                list: "a list",
                str: "text",
                bool: "a boolean",
                int: "a number",
                float: "a number",
                type(None): "empty",
            }.get(type(error.instance), type(error.instance).__name__)
            message = f"must be {error.validator_value}, not {kind}" + (" (not a corpus file?)" if not key else "")
        else:
            message = error.message if len(error.message) <= 120 else error.message[:117] + "..."
        raise MatrixError(path, key or "(top level)", message)
    return list(data["cases"])


def load_corpus(path: Path) -> list[IncludedCase]:
    return [IncludedCase(path, i, complete_params(entry["params"])) for i, entry in enumerate(read_entries(path))]


def included_cases(matrix_path: Path, text: str) -> list[IncludedCase]:
    """The cases of every file under the matrix's `include:`, paths relative to the matrix file.
    A matrix whose `include` key is malformed yields nothing here: parse_spec reports it; YAML
    that cannot be read within bounds is a MatrixError here already."""
    data = bounded_yaml.load(matrix_path, text)
    includes = data.get("include") if isinstance(data, dict) else None
    if not isinstance(includes, list) or not all(isinstance(p, str) for p in includes):
        return []
    found: list[IncludedCase] = []
    for i, name in enumerate(includes):
        target = (matrix_path.parent / name).resolve()
        try:
            mode = os.stat(target).st_mode
        except FileNotFoundError:
            raise MatrixError(matrix_path, f"include[{i}]", f"no such file: {target}") from None
        except OSError as exc:
            raise MatrixError(
                matrix_path, f"include[{i}]", f"cannot be read: {target}: {exc.strerror or exc}"
            ) from None
        if not stat.S_ISREG(mode):
            raise MatrixError(
                matrix_path, f"include[{i}]", f"not a regular file (a device, a FIFO, a directory): {target}"
            )
        found += load_corpus(target)
    return found


def check_kernels(included: Iterable[IncludedCase], kernel_names: Iterable[str]) -> None:
    names = set(kernel_names)
    for case in included:
        if case.params["kernel"] not in names:
            raise MatrixError(
                case.source,
                f"cases[{case.index}].params.kernel",
                f"kernel {case.params['kernel']!r} is not in the matrix (kernels: {', '.join(sorted(names))})",
            )


def check_kernel_axes(included: Iterable[IncludedCase], kernels: Mapping[str, bool]) -> None:
    """Every axis an included case gives that only some kernels take (schema.KERNEL_AXES) is one
    its kernel takes; `kernels`: name -> built-in."""
    for case in included:
        name = case.params["kernel"]
        for axis, (_, _, takers) in KERNEL_AXES.items():
            if axis in case.params and not takes_axis(name, takers, kernels.get(name, False)):
                raise MatrixError(case.source, f"cases[{case.index}].params.{axis}", f"kernel {name!r} takes no {axis}")


def check_sizes(included: Iterable[IncludedCase], limits: Mapping[str, int]) -> None:
    """Every included case within the matrix's tensor-element limits (schema.size_problem)."""
    for case in included:
        problem = size_problem(case.params["m"], case.params["k"], case.params["n"], limits)
        if problem is not None:
            raise MatrixError(
                case.source, f"cases[{case.index}].params", f"{problem[1]} (the including matrix's limits)"
            )


def write_corpus(path: Path, entries: Iterable[Mapping[str, Any]]) -> None:
    """Write the whole corpus (entries with id, outcome, signature, found, params), atomically."""
    path = Path(path)
    body = yaml.safe_dump({"version": CORPUS_VERSION, "cases": [dict(e) for e in entries]}, sort_keys=False, width=120)
    header = (
        "# Minimal failing cases found by `pytest --scaledmm-matrix --scaledmm-explore`.\n"
        "# List this file under `include:` in matrix.yaml to replay them in every run.\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(header + body)
    os.replace(tmp, path)
