#!/usr/bin/env bash
# Issue 4 on the GPU machine: the default profile with triage and one repro script per failure
# signature, then every repro script in a fresh process (exit codes recorded), then the doctor.
# Everything lands in $OUT as at most 7 files:
#   pytest.log  report.json  repro_results.txt  repros.tar.gz  doctor.txt  doctor.json  doctor.err
# Budget: about 8 minutes (matrix <= MATRIX_BUDGET_S, repros <= REPRO_BUDGET_S, doctor ~30 s).
# Assumes python3 has torch, pytest, hypothesis, xdist, pyyaml, jinja2, packaging, and that the
# caller put allpairspy / jsonschema on PYTHONPATH if they are not installed.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WORKERS=${WORKERS:-6}
MATRIX=${MATRIX:-matrix.yaml}
PROFILE=${PROFILE:-default}
MATRIX_BUDGET_S=${MATRIX_BUDGET_S:-300}
REPRO_BUDGET_S=${REPRO_BUDGET_S:-120}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"

# Load the plugin from this checkout unless it is installed (then its entry point loads it).
PLUGIN=(-p pytest_scaledmm.plugin.entry)
if $PY -c "import importlib.metadata as m, sys; sys.exit(0 if any(e.name == 'scaledmm' for e in m.entry_points(group='pytest11')) else 1)"; then
  PLUGIN=()
fi

start=$(date +%s)
# SIGINT at the budget: pytest still writes the report and the summary for what has run.
timeout -s INT -k 30 "$MATRIX_BUDGET_S" $PY -m pytest "${PLUGIN[@]}" -p no:cacheprovider -W ignore -q -rN --tb=no \
  --scaledmm-matrix "$MATRIX" --scaledmm-profile "$PROFILE" -n "$WORKERS" \
  --scaledmm-first-failure --scaledmm-timeout 120 --scaledmm-triage --scaledmm-triage-budget 150 \
  --scaledmm-repro-dir "$OUT/repros" --scaledmm-report "$OUT/report.json" \
  >"$OUT/pytest.log" 2>&1
echo "pytest exit status $? after $(( $(date +%s) - start )) s (budget ${MATRIX_BUDGET_S} s)" >>"$OUT/pytest.log"

# Each repro script in a fresh process: exit 1 = reproduces, 0 = no longer fails, 2 = fails
# differently, 3 = cannot run as recorded, 128+N = killed by signal N (a CRASH repro).
results="$OUT/repro_results.txt"
echo "script exit expected-outcome verdict | signature" >"$results"
deadline=$(( $(date +%s) + REPRO_BUDGET_S ))
for script in "$OUT"/repros/repro_*.py; do
  [ -e "$script" ] || { echo "no repro scripts were written" >>"$results"; break; }
  name=$(basename "$script" .py)
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -le 5 ]; then echo "$name - - not run (repro budget spent)" >>"$results"; continue; fi
  (cd "$OUT/repros" && timeout -k 10 "$(( left < 150 ? left : 150 ))" $PY "$name.py" >"$name.log" 2>&1)
  status=$?
  $PY - "$OUT/repros/index.json" "$name.py" "$status" "$OUT/repros/$name.log" >>"$results" <<'EOF'
import json, sys
index, name, status, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
entry = json.load(open(index)).get(name, {})
verdict = {0: "no longer fails", 1: "REPRODUCED", 2: "fails differently", 3: "cannot run as recorded",
           124: "timed out"}.get(status, f"killed by signal {status - 128}" if status > 128 else f"status {status}")
last = [l for l in open(log, errors="replace").read().splitlines() if l.strip()][-1:] or [""]
print(f"{name} {status} {entry.get('outcome')} {verdict} | {entry.get('signature')} | last line: {last[0][:160]}")
EOF
done
tar czf "$OUT/repros.tar.gz" -C "$OUT" repros && rm -rf "$OUT/repros"

$PY -m pytest_scaledmm.doctor >"$OUT/doctor.txt" 2>&1
$PY -m pytest_scaledmm.doctor --json --no-probe >"$OUT/doctor.json" 2>"$OUT/doctor.err"
echo "total $(( $(date +%s) - start )) s" >>"$results"
