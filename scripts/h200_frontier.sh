#!/usr/bin/env bash
# Profiles on one GPU: PROFILES (space-separated, e.g. "default full"), else the frontier
# profiles: the composite `frontier` where matrix.yaml defines it, else frontier-api,
# frontier-grouped and frontier-compile. WORKERS xdist workers (8). One repro script per failure signature,
# each rerun in a fresh process (four at a time) into $OUT/repros.txt; median seconds per case by
# mode into $OUT/mode_seconds.txt. The carried wheels (.whl/) are unpacked onto PYTHONPATH and the
# plugin is loaded from this checkout with -p, so nothing is installed.
set -u
: "${OUT:?set OUT to the output directory}"
REPO=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p /tmp/site && for w in "$REPO"/.whl/*.whl; do python3 -m zipfile -e "$w" /tmp/site; done
export PYTHONPATH=$REPO:/tmp/site
python3 -c "import pytest_scaledmm.plugin.entry, jsonschema, allpairspy" || exit 3
# -p only where no installed copy already registers the plugin (pytest refuses it twice).
LOAD="-p pytest_scaledmm.plugin.entry"
python3 -c "import importlib.metadata as m, sys; sys.exit(not any(e.value.startswith('pytest_scaledmm') for e in m.entry_points(group='pytest11')))" && LOAD=""
cd /tmp
if [ -z "${PROFILES:-}" ]; then
  PROFILES="frontier-api frontier-grouped frontier-compile"
  python3 -c "import sys; from pytest_scaledmm.matrix.spec import load_spec; load_spec(sys.argv[1]).profile('frontier')" \
    "$REPO/matrix.yaml" 2>/dev/null && PROFILES=frontier
fi
echo "profiles: $PROFILES"
REPROS=${REPROS:-/tmp/repros}
rm -rf "$REPROS"
for p in $PROFILES; do
  # The autotune cap for the profiles with max-autotune GEMM-backend modes.
  extra=""; case $p in frontier|frontier-compile) extra="--scaledmm-max-autotune-configs 4";; esac
  timeout -s INT "${RUN_TIMEOUT_S:-420}" python3 -m pytest $LOAD -p no:cacheprovider -q --tb=no -rN -W ignore \
    --scaledmm-matrix "$REPO/matrix.yaml" --scaledmm-profile $p --scaledmm-report "$OUT/$p.json" -n "${WORKERS:-8}" \
    --scaledmm-repro-dir "$REPROS/$p" $extra > "$OUT/$p.log" 2>&1
  echo "$p rc=$?"; tail -22 "$OUT/$p.log" | cut -c1-260
done

# Median seconds per case by mode: a case's own calls, or its wall when it crashed or hung
# (total_s); cases that never ran (no timing) are left out.
python3 - "$OUT" $PROFILES >"$OUT/mode_seconds.txt" <<'EOF'
import json, statistics, sys
from collections import defaultdict
out, profiles = sys.argv[1], sys.argv[2:]
print("profile mode cases median_s")
for p in profiles:
    try:
        cases = json.load(open(f"{out}/{p}.json"))["cases"]
    except (OSError, ValueError, KeyError) as exc:
        print(p, "no report:", exc)
        continue
    per_mode = defaultdict(list)
    for c in cases:
        t = c.get("timing") or {}
        if t:
            own = sum(t.get(k, 0.0) for k in ("eager_s", "compile_s", "run_s", "other_m_s", "opcheck_s"))
            per_mode[c["params"]["mode"]].append(t.get("total_s", own))
    for mode, seconds in sorted(per_mode.items()):
        print(p, mode, len(seconds), round(statistics.median(seconds), 2))
EOF
cat "$OUT/mode_seconds.txt"

# Each repro script in a fresh process: profile/script, exit status, seconds. No script starts
# after REPRO_BUDGET_S (listed with exit "budget"), so that many signatures cannot eat the
# machine's time.
run_repro() {
  if [ "$(date +%s)" -ge "$REPRO_DEADLINE" ]; then echo "$1 budget -"; return; fi
  local began=$(date +%s.%N) status
  (cd "$REPROS/$(dirname "$1")" && timeout 150 python3 "$(basename "$1")" >"$REPROS/$1.out" 2>&1); status=$?
  echo "$1 $status $(python3 -c "import time; print(round(time.time() - $began, 1))")"
}
export -f run_repro; export REPROS REPRO_DEADLINE=$(( $(date +%s) + ${REPRO_BUDGET_S:-600} ))
{ echo "script exit seconds"
  (cd "$REPROS" 2>/dev/null && ls -- */repro_*.py 2>/dev/null) | xargs -r -P 4 -I{} bash -c 'run_repro {}' | sort; } >"$OUT/repros.txt"
tar czf "$OUT/repros.tgz" -C "$(dirname "$REPROS")" "$(basename "$REPROS")" 2>/dev/null
cat "$OUT/repros.txt"
