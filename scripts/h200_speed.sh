#!/usr/bin/env bash
# Speed figures on one GPU, in $OUT/speed.txt (+ JSON): the default profile with likely failures
# first (wall, start -> first failure signature, every signature); the bench profile with the
# autotune cap against a bare loop; the autotuning cases of the bench profile with the cap and
# with Inductor's full search, side by side.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
{
  echo "## default profile, -n ${WORKERS:-8}, likely failures first, cap 4"
  timeout 200 $PY benchmarks/bench_matrix.py --profile default -n "${WORKERS:-8}" --first-failure --configs 4 --no-bare --json "$OUT/speed_default.json"
  echo "## bench, cap 4, -n 1, with bare loop"
  timeout 200 $PY benchmarks/bench_matrix.py --profile bench --configs 4 --json "$OUT/speed_bench.json"
  echo "## autotuning cases of bench, -n 4: cap 4 then full search"
  timeout 150 $PY benchmarks/bench_matrix.py --profile bench -n 4 -k "autotune or triton" --configs 4,0 --no-bare --json "$OUT/speed_autotune.json"
} >"$OUT/speed.txt" 2>&1
cat "$OUT/speed.txt"
