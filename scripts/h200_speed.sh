#!/usr/bin/env bash
# Speed figures on one GPU: the bench profile with the autotune cap (4 configs) against a bare
# loop, the same profile with Inductor's full search, and the time to the first failure signature
# of the default profile with likely failures first. Output in $OUT/speed.txt and speed_*.json.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
{
  echo "## bench, cap 4, -n 1, with bare loop"
  $PY benchmarks/bench_matrix.py --profile bench --configs 4 --json "$OUT/speed_cap4.json"
  echo "## bench, full search vs cap 4, harness only"
  $PY benchmarks/bench_matrix.py --profile bench --configs 0 --no-bare --json "$OUT/speed_full.json"
  echo "## default profile: start -> first failure signature, likely failures first, stop at first"
  start=$(date +%s.%N)
  $PY -m pytest -p no:cacheprovider -q -W ignore --scaledmm-matrix --scaledmm-first-failure -x \
    --no-scaledmm-triage --scaledmm-report "$OUT/first_failure.json" 2>&1 | grep -E "new signature|passed|failed" | head -5
  echo "wall to exit: $(echo "$(date +%s.%N) - $start" | bc) s"
} >"$OUT/speed.txt" 2>&1
