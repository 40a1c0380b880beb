#!/usr/bin/env bash
# One worker per GPU: a profile (default: `default`) with -n 1 and with -n 2 on a two-GPU machine,
# likely failures first, so the -n 1 run also gives start -> first signature with isolation on.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PROFILE=${PROFILE:-default}
{
  nvidia-smi -L
  for n in 1 2; do
    echo "## $PROFILE, -n $n"
    timeout $(( n == 1 ? 300 : 200 )) $PY benchmarks/bench_matrix.py --profile "$PROFILE" --first-failure --configs 4 --no-bare -n "$n" --json "$OUT/two_gpus_n$n.json"
  done
} >"$OUT/two_gpus.txt" 2>&1
cat "$OUT/two_gpus.txt"
