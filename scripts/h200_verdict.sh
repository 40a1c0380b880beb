#!/usr/bin/env bash
# The default profile on one H200 after the verdict changes: outcome counts, MISMATCH cases per
# kernel (the calibrated bound must raise no false alarm on aten ops), the bound each record was
# held to, and the gate against itself and against a -k subset of itself (both must fail: a
# report gated against itself proves nothing, and a subset is incomplete).
# The caller puts jsonschema / allpairspy on PYTHONPATH where they are not installed.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
WORKERS=${WORKERS:-8}
start=$(date +%s)
timeout -s INT 420 $PY -m pytest -p no:cacheprovider -q -W ignore -rN --tb=no --scaledmm-matrix -n "$WORKERS" \
  --scaledmm-triage-budget 60 --scaledmm-report "$OUT/default.json" >"$OUT/default.log" 2>&1
echo "exit $? wall $(( $(date +%s) - start )) s with -n $WORKERS" >>"$OUT/default.log"
$PY - "$OUT/default.json" >"$OUT/summary.txt" 2>&1 <<'PYEOF'
import collections, json, sys
report = json.load(open(sys.argv[1]))
cases = report["cases"]
print("session", {k: v for k, v in report["session"].items() if k != "started"})
print("summary", report["summary"])
per_kernel = collections.Counter((c["params"]["kernel"], c["outcome"]) for c in cases)
for key in sorted(per_kernel):
    print("  ", key, per_kernel[key])
for c in cases:
    if c["outcome"] == "MISMATCH":
        print("MISMATCH", c["id"], c["signature"], c.get("detail", "")[:200])
worst = collections.defaultdict(float)
for c in cases:
    for side in ("eager", "compiled"):
        check = (c.get("errors") or {}).get(side) or {}
        ratio = check.get("ratio")
        if isinstance(ratio, (int, float)) and c["outcome"] == "PASS":
            key = (c["params"]["kernel"], c["params"]["out_dtype"], c["params"].get("use_fast_accum"), side)
            worst[key] = max(worst[key], ratio)
print("largest error/bound among PASS cases:")
for key in sorted(worst):
    print("  ", key, round(worst[key], 4))
PYEOF
# The gate refuses a report gated against itself ("baseline and candidate are the same report"):
# exit 1 with that reason is the expected result here, exit 0 would be a false pass.
$PY -m pytest_scaledmm gate --baseline "$OUT/default.json" --candidate "$OUT/default.json" >"$OUT/gate_self.txt" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q "baseline and candidate are the same report" "$OUT/gate_self.txt"; then
  echo "exit $rc (expected: the same report twice is refused)" >>"$OUT/gate_self.txt"
else
  echo "exit $rc UNEXPECTED: the gate should refuse the same report twice" >>"$OUT/gate_self.txt"
fi
timeout -s INT 120 $PY -m pytest -p no:cacheprovider -q -W ignore --tb=no --scaledmm-matrix -n "$WORKERS" \
  -k "w8a8" --scaledmm-baseline "$OUT/default.json" --scaledmm-report /tmp/subset.json >"$OUT/gate_subset.txt" 2>&1
echo "pytest exit $?" >>"$OUT/gate_subset.txt"
$PY -m pytest_scaledmm gate --baseline "$OUT/default.json" --candidate /tmp/subset.json >>"$OUT/gate_subset.txt" 2>&1
echo "gate exit $?" >>"$OUT/gate_subset.txt"
