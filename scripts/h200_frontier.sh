#!/usr/bin/env bash
# The three frontier profiles on one GPU. The carried wheels (.whl/) are unpacked onto PYTHONPATH
# and the plugin is loaded from this checkout with -p, so nothing is installed.
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
for p in frontier-api frontier-grouped frontier-compile; do
  extra=""; [ $p = frontier-compile ] && extra="--scaledmm-max-autotune-configs 4"
  timeout -s INT 170 python3 -m pytest $LOAD -p no:cacheprovider -q --tb=no -rN -W ignore \
    --scaledmm-matrix "$REPO/matrix.yaml" --scaledmm-profile $p --scaledmm-report "$OUT/$p.json" -n 8 $extra > "$OUT/$p.log" 2>&1
  echo "$p rc=$?"; tail -22 "$OUT/$p.log" | cut -c1-260
done
