"""Fingerprint the cases every shipped matrix makes: ids, params and their JSON round trip, and
the generation notes (slice counts, warnings, what valid cases can cover) the report carries.

Run before and after a change to the case record or the generator; equal digests mean every case
id and recorded report stays as it is. Prints one line per (matrix, profile, arch): the case
count, the cases' digest and the notes' digest; then the keys and value types the cases hold.

    python scripts/case_fingerprint.py [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

from pytest_scaledmm.matrix.cases import generate_cases
from pytest_scaledmm.matrix.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
MATRICES = [ROOT / "matrix.yaml", *sorted((ROOT / "matrices").glob("*.yaml"))]
ARCHS = ("cpu", "sm90", "sm100", "gfx942")


def fingerprint() -> tuple[dict, dict, dict]:
    digests: dict[str, str] = {}
    notes_digests: dict[str, str] = {}
    keys: dict[str, set] = defaultdict(set)
    for path in MATRICES:
        spec = load_spec(path)
        for name, profile in spec.profiles.items():
            for arch in ARCHS:
                cases, notes = generate_cases(spec, profile, arch)
                rows = [(case.id, case.to_json()) for case in cases]
                for _, params in rows:
                    for key, value in params.items():
                        keys[key].add(type(value).__name__)
                text = json.dumps(rows, sort_keys=False)
                where = f"{path.name}:{name}:{arch}"
                digests[where] = f"{len(rows)} {hashlib.sha256(text.encode()).hexdigest()[:16]}"
                notes_text = json.dumps(notes, sort_keys=True)
                notes_digests[where] = hashlib.sha256(notes_text.encode()).hexdigest()[:16]
    return digests, notes_digests, {key: sorted(types) for key, types in sorted(keys.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    digests, notes_digests, keys = fingerprint()
    for where, digest in digests.items():
        print(f"{where:40} {digest} notes {notes_digests[where]}")
    for key, types in keys.items():
        print(f"key {key}: {', '.join(types)}")
    if args.out:
        args.out.write_text(json.dumps({"digests": digests, "notes": notes_digests, "keys": keys}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
