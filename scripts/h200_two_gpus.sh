#!/usr/bin/env bash
# One worker per GPU: the bench profile with -n 1 and with -n 2 on a two-GPU machine.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
{
  nvidia-smi -L
  for n in 1 2; do
    echo "## -n $n"
    $PY benchmarks/bench_matrix.py --profile bench --configs 4 --no-bare -n "$n" --json "$OUT/two_gpus_n$n.json"
  done
} >"$OUT/two_gpus.txt" 2>&1
cat "$OUT/two_gpus.txt"
