"""Build small but schema-valid reports for the compare / gate / render tests."""

import json
from pathlib import Path

from case_factory import case_params

from pytest_scaledmm.cli import main
from pytest_scaledmm.reports.report import build_report, ids_sha256

DATA = Path(__file__).parent / "data"


def environment(torch="2.13.0+cpu", arch="cpu", tox_env=None, **extra):
    return {
        "torch": torch,
        "cuda": None,
        "hip": None,
        "python": "3.11.7",
        "device": "cpu" if arch == "cpu" else "cuda:0",
        "device_name": "x86_64" if arch == "cpu" else "NVIDIA H200",
        "arch": arch,
        "tox_env": tox_env,
        "hypothesis": "6.170.17",
        "plugin": "0.1.0",
        **extra,
    }


# A recorded case's params: no bias or use_fast_accum key, the key set these records have always had.
CASE_PARAMS = case_params(scale_b="tensor_1d", mode="inductor", without=("bias", "use_fast_accum"))


def case(cid, outcome, signature=None, **params):
    record = {
        "id": cid,
        "params": {**CASE_PARAMS, **params},
        "outcome": outcome,
        "signature": signature,
        "layer": None,
        "detail": "",
    }
    if outcome in ("PASS", "FIXED_UPSTREAM"):  # what a real passing record proves (reports/proof.py)
        check = {"ok": True, "ratio": 0.5, "bound": {"slack": 1.0}}
        record["errors"] = {"eager": dict(check), "compiled": dict(check)}
    else:
        record.update(_evidence_of(outcome, signature))
    return record


def _evidence_of(outcome, signature) -> dict:
    """What each side of a real record of that outcome says it did (reports/evidence.py reads it):
    refused on both sides, or eager checked and compiled off or raising; none where nothing ran."""
    raised = {"type": "RuntimeError", "message": signature or outcome, "root_type": "RuntimeError"}
    passed = {"ok": True, "ratio": 0.5, "bound": {"slack": 1.0}}
    if outcome in ("MISMATCH", "FALLBACK", "XFAIL"):
        return {"errors": {"eager": dict(passed), "compiled": {"ok": False, "ratio": 2.0, "bound": {"slack": 1.0}}}}
    if outcome == "COMPILE_ONLY_ERROR":
        return {"errors": {"eager": dict(passed), "compiled": None}, "compiled_error": dict(raised)}
    if outcome in ("UNSUPPORTED", "ERROR_PARITY", "BOUNDARY_PARITY", "REFUSED", "INTERNAL_ERROR"):
        return {"eager_error": dict(raised), "compiled_error": dict(raised)}
    return {}


def report(cases, matrix_hash="0123456789abcdef", matrix_path="matrix.yaml", session=None, **env):
    """A report of `cases`; `session` overrides keys of a complete session block."""
    data = build_report(
        environment(**env),
        {"path": matrix_path, "hash": matrix_hash, "profile": "smoke", "seed": 1, "cases": len(cases)},
        cases,
        {
            "started": "1970-01-01T00:00:00.000000+00:00",
            "wall_s": 1.0,
            "complete": True,
            "incomplete_reasons": [],
            "generated": len(cases),
            "recorded": len(cases),
            **(session or {}),
        },
    )
    # build_report sorts by id and keeps every record: a duplicate id stays a duplicate.
    return data


def whole_shard(cases, **extra) -> dict:
    """The shard block of a run of one shard holding `cases`, as the plugin writes it."""
    ids = [c["id"] for c in cases]
    return {
        "index": 1,
        "count": 1,
        "cases": len(ids),
        "total_cases": len(ids),
        "total_ids_sha256": ids_sha256(ids),
        "ids_sha256": ids_sha256(ids),
        **extra,
    }


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=1))
    return path


# The torch releases of the two sides in gate tests.
BASE = dict(torch="2.11.0")
CAND = dict(torch="2.13.0")


def gate(tmp_path, baseline, candidate, *extra) -> int:
    """`scaledmm gate` on the two reports, written into tmp_path; its exit code."""
    b = write(tmp_path / "baseline.json", baseline)
    c = write(tmp_path / "candidate.json", candidate)
    return main(["gate", "--baseline", str(b), "--candidate", str(c), *extra])


def three(outcome_of_c3="PASS", signature=None):
    """c1 and c2 passing, c3 as given."""
    return [case("c1", "PASS"), case("c2", "PASS"), case("c3", outcome_of_c3, signature)]
