#!/usr/bin/env bash
# The GPU run, in stages that each fit one device call (under 600 s):
#   STAGE=matrix   matrix.yaml's default profile; matrices/torchao.yaml default with torchao 0.18
#                  and smoke with torchao 0.17 (carried wheels, .whl/torchao-0.18, .whl/torchao-0.17)
#   STAGE=peers    PyTorch's own fp8 suites (.gpu_in/pytorch_tests/), each to a full verdict or
#                  its time limit, with the same workers
#   STAGE=full     matrix.yaml's full profile
#   STAGE=rerun    the repro scripts of earlier stages (.gpu_in/repros/*.tgz), rerun
#   STAGE=same     PROFILE (default) under an earlier checkout (.gpu_in/base.tar, from
#                  `git archive REV`) and under this one, then `scaledmm compare` of the two
#                  reports (compare.txt): a change that should not change behaviour, checked here
# Every stage reruns each repro script it wrote in a fresh process (exit status per script) and
# writes under $OUT: results_<stage>.tgz (<name>.json and .log per run, repros_<stage>.txt,
# seconds.txt: wall per run, versions.txt) and summary_<stage>.txt. DRY=1 runs the same steps on this machine's device with the smoke profiles and
# few cases, to check the script without a GPU. Nothing is installed: the carried wheels are
# unpacked onto PYTHONPATH and the plugin is loaded from this checkout.
set -u
: "${OUT:?set OUT to the output directory}"
STAGE=${STAGE:-matrix}
# Everything goes to RES, packed at the end into $OUT/results_$STAGE.tgz (few files come back).
FINAL_OUT=$OUT
OUT=/tmp/scaledmm-results/$STAGE
rm -rf "$OUT" && mkdir -p "$OUT"
WORKERS=${WORKERS:-14}
REPO=$(cd "$(dirname "$0")/.." && pwd)
SITE=/tmp/scaledmm-site
# A dry run uses this machine's own packages (the carried wheels are for the GPU image's Python).
[ "${DRY:-0}" = 1 ] || { mkdir -p "$SITE" && for w in "$REPO"/.whl/*.whl; do [ -e "$w" ] && python3 -m zipfile -e "$w" "$SITE"; done; }
export PYTHONPATH=$REPO:$SITE
LOAD="-p pytest_scaledmm.plugin.entry"
python3 -c "import importlib.metadata as m, sys; sys.exit(not any(e.value.startswith('pytest_scaledmm') for e in m.entry_points(group='pytest11')))" && LOAD=""
python3 -c "import pytest_scaledmm.plugin.entry, jsonschema" || exit 3
python3 - >"$OUT/versions.txt" 2>&1 <<'EOF'
import subprocess, torch
print("torch", torch.__version__, "cuda", torch.version.cuda)
try:
    import triton
    print("triton", triton.__version__)
except ImportError:
    print("triton none")
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
    print(subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip())
EOF
cat "$OUT/versions.txt"
cd /tmp
REPROS=/tmp/scaledmm-repros/$STAGE
rm -rf "$REPROS"

# run NAME MATRIX PROFILE LIMIT_S [extra pytest args]: one matrix run, its wall seconds appended
# to seconds.txt.
run() {
  local name=$1 matrix=$2 profile=$3 limit=$4; shift 4
  local began=$(date +%s.%N)
  timeout -s INT "$limit" python3 -m pytest $LOAD -p no:cacheprovider -q --tb=no -rN -W ignore \
    --scaledmm-matrix "$matrix" --scaledmm-profile "$profile" --scaledmm-report "$OUT/$name.json" \
    -n "$WORKERS" --scaledmm-repro-dir "$REPROS/$name" "$@" >"$OUT/$name.log" 2>&1
  local status=$?
  echo "$name rc=$status $(python3 -c "import time; print(round(time.time() - $began, 1))") s" | tee -a "$OUT/seconds.txt"
  grep -E "^[0-9]+ cases|^tested:|reference-checked|failing root|^ +[0-9]+ x " "$OUT/$name.log" | cut -c1-240
}

# with_torchao VERSION: the carried torchao wheel of that version on PYTHONPATH (never both).
with_torchao() {
  local dir=/tmp/torchao-$1
  rm -rf "$dir" && mkdir -p "$dir"
  for w in "$REPO"/.whl/torchao-"$1"/*.whl; do [ -e "$w" ] && python3 -m zipfile -e "$w" "$dir"; done
  export PYTHONPATH=$dir:$REPO:$SITE
  python3 -c "import torchao, torch; print('torchao', torchao.__version__, 'on torch', torch.__version__)" 2>&1 | tail -1 \
    | tee -a "$OUT/versions.txt"
}

SMALL=""
[ "${DRY:-0}" = 1 ] && SMALL="--scaledmm-shard 1/10"

case $STAGE in
  matrix)
    run default "$REPO/matrix.yaml" "$([ "${DRY:-0}" = 1 ] && echo smoke || echo default)" 240
    with_torchao 0.18 && run torchao-0.18 "$REPO/matrices/torchao.yaml" "$([ "${DRY:-0}" = 1 ] && echo smoke || echo default)" 240 $SMALL
    with_torchao 0.17 && run torchao-0.17 "$REPO/matrices/torchao.yaml" smoke 120 $SMALL
    export PYTHONPATH=$REPO:$SITE
    ;;
  peers)
    # PyTorch's suites to a full verdict (or the limit), beside ours on `default` (STAGE=matrix).
    for suite in test/test_scaled_matmul_cuda.py test/inductor/test_fp8.py; do
      name=pytorch-$(basename "$suite" .py)
      began=$(date +%s.%N)
      (cd "$REPO/.gpu_in/pytorch_tests" && timeout -s INT "${SUITE_LIMIT_S:-240}" python3 -m pytest -p no:cacheprovider \
        -q --tb=line -rN -W ignore -n "$WORKERS" "$suite" >"$OUT/$name.log" 2>&1)
      status=$?
      echo "$name rc=$status $(python3 -c "import time; print(round(time.time() - $began, 1))") s" | tee -a "$OUT/seconds.txt"
      tail -3 "$OUT/$name.log" | cut -c1-240
    done
    ;;
  rerun)
    # The repro scripts an earlier stage wrote (its repros_<stage>.tgz, carried in .gpu_in/repros/),
    # rerun here, each torchao run's with its torchao.
    with_torchao 0.18 && with_torchao 0.17 && export PYTHONPATH=$REPO:$SITE
    mkdir -p "$REPROS" && for t in "$REPO"/.gpu_in/repros/*.tgz; do tar xzf "$t" -C "$REPROS" --strip-components=1; done
    ;;
  same)
    base=/tmp/scaledmm-base && rm -rf "$base" && mkdir -p "$base" && tar xf "$REPO/.gpu_in/base.tar" -C "$base"
    profile=$([ "${DRY:-0}" = 1 ] && echo smoke || echo "${PROFILE:-default}")
    export PYTHONPATH=$base:$SITE && run before "$base/matrix.yaml" "$profile" 280
    export PYTHONPATH=$REPO:$SITE && run after "$REPO/matrix.yaml" "$profile" 280
    python3 -m pytest_scaledmm compare "$OUT/before.json" "$OUT/after.json" --max-rows 200 >"$OUT/compare.txt" 2>&1
    echo "compare rc=$?" | tee -a "$OUT/seconds.txt"
    head -40 "$OUT/compare.txt" | cut -c1-240
    cp "$OUT/compare.txt" "$FINAL_OUT/compare_$STAGE.txt"
    ;;
  full)
    run full "$REPO/matrix.yaml" "$([ "${DRY:-0}" = 1 ] && echo smoke || echo full)" "${FULL_LIMIT_S:-450}"
    ;;
esac

# Each repro script in a fresh process (four at a time), no script started past REPRO_BUDGET_S.
run_repro() {
  if [ "$(date +%s)" -ge "$REPRO_DEADLINE" ]; then echo "$1 budget -"; return; fi
  local began=$(date +%s.%N) status run=$(dirname "$1")
  # A torchao run's scripts import the torchao that run had (with_torchao's directory).
  local path=$PYTHONPATH; case $run in torchao-*) path=/tmp/$run:$PYTHONPATH;; esac
  (cd "$REPROS/$run" && PYTHONPATH=$path timeout 150 python3 "$(basename "$1")" >"$REPROS/$1.out" 2>&1); status=$?
  echo "$1 $status $(python3 -c "import time; print(round(time.time() - $began, 1))")"
}
export -f run_repro; export REPROS REPRO_DEADLINE=$(( $(date +%s) + ${REPRO_BUDGET_S:-150} ))
{ echo "script exit seconds"
  (cd "$REPROS" 2>/dev/null && ls -- */repro_*.py 2>/dev/null) | xargs -r -P "${REPRO_JOBS:-4}" -I{} bash -c 'run_repro {}' | sort; } \
  >"$OUT/repros_$STAGE.txt"
tar czf "$OUT/repros_$STAGE.tgz" -C "$(dirname "$REPROS")" "$(basename "$REPROS")" 2>/dev/null
cat "$OUT/repros_$STAGE.txt"
cat "$OUT/versions.txt" "$OUT/seconds.txt" "$OUT/repros_$STAGE.txt" >"$FINAL_OUT/summary_$STAGE.txt" 2>/dev/null
tar czf "$FINAL_OUT/results_$STAGE.tgz" -C "$OUT" .
