#!/usr/bin/env bash
# Speed figures on one GPU, in $OUT/speed.txt (+ JSON): the default profile with likely failures
# first (wall, start -> first failure signature, every signature); the bench profile with the
# autotune cap against a bare loop; the bench profile with Inductor's full autotune search.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
{
  echo "## default profile, -n ${WORKERS:-8}, likely failures first, cap 4"
  $PY benchmarks/bench_matrix.py --profile default -n "${WORKERS:-8}" --first-failure --configs 4 --no-bare --json "$OUT/speed_default.json"
  echo "## bench, cap 4, -n 1, with bare loop"
  $PY benchmarks/bench_matrix.py --profile bench --configs 4 --json "$OUT/speed_cap4.json"
  echo "## bench, full autotune search, harness only"
  $PY benchmarks/bench_matrix.py --profile bench --configs 0 --no-bare --json "$OUT/speed_full.json"
} >"$OUT/speed.txt" 2>&1
cat "$OUT/speed.txt"
