set -u
pip install -q --no-deps --no-index .whl/*.whl 2>&1 | grep -v "root user" | tail -2; pip install --no-build-isolation --no-deps -q . 2>&1 | grep -v "root" | tail -2
cd /tmp
for p in frontier-api frontier-grouped frontier-compile; do
  extra=""; [ $p = frontier-compile ] && extra="--scaledmm-max-autotune-configs 4"
  timeout 170 python -m pytest -p no:cacheprovider -q --tb=no -rN -W ignore --scaledmm-matrix $OLDPWD/matrix.yaml --scaledmm-profile $p --scaledmm-report $OUT/$p.json -n 8 $extra > $OUT/$p.log 2>&1; echo "$p rc=$?"
  tail -25 $OUT/$p.log | cut -c1-260
done
