#!/usr/bin/env bash
# The default profile on every GPU of the machine (-n <GPUs>, one worker per GPU), likely failures
# first, with triage and one repro script per signature; each repro rerun in a fresh process;
# then the fastest route to the first signature: no xdist, no isolation, stop at the first failure.
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
echo "script exit verdict" >"$OUT/repros.txt"
for s in /tmp/repros/repro_*.py; do
  (cd /tmp/repros && timeout 60 $PY "$(basename "$s")" >/dev/null 2>&1); status=$?; echo "$(basename "$s") $status" >>"$OUT/repros.txt"
done
tar czf "$OUT/repros.tgz" -C /tmp repros
start=$(date +%s.%N)
$PY -m pytest -p no:cacheprovider -q -W ignore --scaledmm-matrix --scaledmm-first-failure -x --scaledmm-isolate=no \
  --no-scaledmm-triage --scaledmm-report /tmp/ff.json 2>&1 | grep -m1 "new signature" | while read -r line; do
  echo "$line  [$(python3 -c "import time; print(round(time.time() - $start, 1))") s after the command started]"; done >"$OUT/first_failure.txt"
