#!/usr/bin/env bash
# Command start -> first failure signature printed, isolation on (the default), likely failures
# first, stop at the first failure: without xdist and with one worker per GPU.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
GPUS=$($PY -c "import torch; print(torch.cuda.device_count())")
for workers in 0 "$GPUS"; do
  start=$(date +%s.%N)
  $PY -m pytest -p no:cacheprovider -q -W ignore --scaledmm-matrix --scaledmm-first-failure -x -n "$workers" \
    --no-scaledmm-triage --scaledmm-report "/tmp/ff_$workers.json" 2>&1 | grep -m1 "new signature" | while read -r line; do
    echo "-n $workers: [$(python3 -c "import time; print(round(time.time() - $start, 1))") s after the command started] $line"; done
done | tee "$OUT/first_failure.txt"
