#!/usr/bin/env bash
# fp8_linear vs fp8_linear_no_lift across compile modes on one CUDA GPU (matrices/fp8_linear_h200.yaml):
# which modes fail for a 0-D scale against a [1] scale, with and without the .view(1) lift.
# Writes to $OUT: report.json, pytest.log, modes.md (kernel x scale pair x mode outcome table).
# Budget: about 3 minutes (36 cases; autotune configs capped where the plugin supports it).
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-170}
MATRIX=${MATRIX:-matrices/fp8_linear_h200.yaml}
DEVICE=${DEVICE:-cuda}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"

# Load the plugin from this checkout unless it is installed (then its entry point loads it).
PLUGIN=(-p pytest_scaledmm.plugin.entry)
if $PY -c "import importlib.metadata as m, sys; sys.exit(0 if any(e.name == 'scaledmm' for e in m.entry_points(group='pytest11')) else 1)"; then
  PLUGIN=()
fi
# Options added by other parts of the plugin: used when this checkout has them.
HELP=$($PY -m pytest "${PLUGIN[@]}" --help 2>/dev/null)
EXTRA=()
grep -q -- "--scaledmm-triage" <<<"$HELP" && EXTRA+=(--no-scaledmm-triage)
grep -q -- "--scaledmm-max-autotune-configs" <<<"$HELP" && EXTRA+=(--scaledmm-max-autotune-configs 4)
grep -q -- "--scaledmm-timeout" <<<"$HELP" && EXTRA+=(--scaledmm-timeout 90)
WORKERS=()
$PY -c "import xdist" 2>/dev/null && WORKERS=(-n "${WORKERS_N:-4}")

start=$(date +%s)
# SIGINT at the budget: pytest still writes the report for the cases that ran.
timeout -s INT -k 20 "$BUDGET_S" $PY -m pytest "${PLUGIN[@]}" -p no:cacheprovider -W ignore -q -rN --tb=no \
  --scaledmm-matrix "$MATRIX" --scaledmm-device "$DEVICE" "${WORKERS[@]}" "${EXTRA[@]}" \
  --scaledmm-report "$OUT/report.json" >"$OUT/pytest.log" 2>&1
echo "pytest exit status $? after $(( $(date +%s) - start )) s (budget ${BUDGET_S} s)" >>"$OUT/pytest.log"

$PY - "$OUT/report.json" >"$OUT/modes.md" <<'PYEOF'
import json, sys
report = json.load(open(sys.argv[1]))
env = report["environment"]
modes = ["eager", "aot_eager", "inductor", "max-autotune-no-cudagraphs", "triton-gemm", "dynamic"]
short = {"tensor_0d": "0-D", "tensor_1d": "[1]"}
cells, signatures = {}, {}
for case in report["cases"]:
    p = case["params"]
    row = (p["kernel"], f"{short[p['scale_a']]} x {short[p['scale_b']]}")
    cells[row, p["mode"]] = case["outcome"]
    if case.get("signature"):
        signatures.setdefault((case["outcome"], case["signature"]), []).append(case["id"])
print(f"torch {env.get('torch')} on {env.get('device_name')} [{env.get('arch')}]; summary {report['summary']}\n")
print("| kernel | scales | " + " | ".join(modes) + " |")
print("|---|---|" + "---|" * len(modes))
for row in sorted({r for r, _ in cells}):
    print(f"| {row[0]} | {row[1]} | " + " | ".join(cells.get((row, m), "not run") for m in modes) + " |")
print()
for (outcome, signature), ids in sorted(signatures.items()):
    print(f"- {len(ids)} x {outcome}: {signature}\n  e.g. {ids[0]}")
PYEOF
cat "$OUT/modes.md"
