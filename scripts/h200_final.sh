#!/usr/bin/env bash
# The default profile on every GPU of the machine (-n <GPUs>, one worker per GPU), likely failures
# first, with triage and one repro script per signature; each repro rerun in a fresh process
# (four at a time); the fastest route to the first signature (no xdist, no isolation, -x); the
# bench profile against a bare loop.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
GPUS=$($PY -c "import torch; print(torch.cuda.device_count())")
start=$(date +%s)
timeout -s INT 300 $PY -m pytest -p no:cacheprovider -q -W ignore -rN --tb=no --scaledmm-matrix -n "$GPUS" \
  --scaledmm-first-failure --scaledmm-triage-budget 120 --scaledmm-repro-dir /tmp/repros \
  --scaledmm-report "$OUT/default.json" >"$OUT/default.log" 2>&1
echo "exit $? wall $(( $(date +%s) - start )) s with -n $GPUS" >>"$OUT/default.log"
run_repro() {  # one script in a fresh process: name, exit status, seconds
  local began=$(date +%s.%N) status
  (cd /tmp/repros && timeout 150 "$PY" "$1" >"/tmp/repros/$1.out" 2>&1); status=$?
  echo "$1 $status $(python3 -c "import time; print(round(time.time() - $began, 1))")"
}
export -f run_repro; export PY
{ echo "script exit seconds"; ls /tmp/repros | grep '^repro_.*\.py$' | xargs -P 4 -I{} bash -c 'run_repro {}' | sort; } >"$OUT/repros.txt"
tar czf "$OUT/repros.tgz" -C /tmp repros
start=$(date +%s.%N)
$PY -m pytest -p no:cacheprovider -q -W ignore --scaledmm-matrix --scaledmm-first-failure -x --scaledmm-isolate=no \
  --no-scaledmm-triage --scaledmm-report /tmp/ff.json 2>&1 | grep -m1 "new signature" | while read -r line; do
  echo "$line  [$(python3 -c "import time; print(round(time.time() - $start, 1))") s after the command started]"; done >"$OUT/first_failure.txt"
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "## bench, cap 4, -n 1, isolated, with bare loop" >"$OUT/bench.txt"
  timeout 200 $PY benchmarks/bench_matrix.py --profile bench --configs 4 --json "$OUT/bench.json" >>"$OUT/bench.txt" 2>&1
fi
cat "$OUT/repros.txt" "$OUT/first_failure.txt" "$OUT"/bench.txt 2>/dev/null; tail -3 "$OUT/default.log"
