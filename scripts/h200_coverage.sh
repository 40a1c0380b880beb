#!/usr/bin/env bash
# Coverage on one H200: the default profile (-n 8) and the full profile (-n 14), with wall times,
# outcome and purpose counts, the coverage block and the failing root causes of each report.
# The caller puts jsonschema / allpairspy on PYTHONPATH where they are not installed.
set -u
: "${OUT:?set OUT to the output directory}"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
run() {  # profile workers timeout
  local start=$(date +%s)
  timeout -s INT "$3" $PY -m pytest -p no:cacheprovider -q -W ignore -rN --tb=no --scaledmm-matrix \
    --scaledmm-profile "$1" -n "$2" --scaledmm-report "$OUT/$1.json" >"$OUT/$1.log" 2>&1
  echo "exit $? wall $(( $(date +%s) - start )) s with -n $2" >>"$OUT/$1.log"
}
run default 8 280
run full 14 300
$PY - "$OUT/default.json" "$OUT/full.json" >"$OUT/summary.txt" 2>&1 <<'PYEOF'
import collections, json, sys
for path in sys.argv[1:]:
    report = json.load(open(path))
    cases = report["cases"]
    print("==", path)
    print("session", {k: v for k, v in report["session"].items() if k in ("wall_s", "complete", "generated", "recorded", "incomplete_reasons")})
    print("summary", report["summary"])
    print("purpose", collections.Counter(c["params"].get("purpose", "valid") for c in cases))
    print("purpose x outcome", sorted(collections.Counter((c["params"].get("purpose", "valid"), c["outcome"]) for c in cases).items()))
    print("coverage", json.dumps(report.get("coverage")))
    groups = collections.Counter((c["outcome"], c.get("root_cause") or c.get("signature")) for c in cases if c["outcome"] not in ("PASS", "UNSUPPORTED", "SKIPPED"))
    print("non-pass root causes:", len(groups))
    for (outcome, cause), n in groups.most_common():
        print(f"  {n:4d} {outcome} {str(cause)[:220]}")
PYEOF
