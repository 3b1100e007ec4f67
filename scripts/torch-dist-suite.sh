#!/usr/bin/env bash
# Runs PyTorch's own distributed suite (distributed_test.py, via tests/torch/run_distributed_test.py)
# on the backends gloo and strata at world sizes 2 and 3, and prints a table of passed / failed /
# skipped per backend and world size (the table in docs/bindings.md). Needs the build's
# extension (build/python/strata/_strata_torch*.so) and the venv of scripts/python-env.sh.
#
#   scripts/torch-dist-suite.sh                       # everything: about 25 min a run with gloo here
#   BACKENDS=strata WORLD_SIZES=2 scripts/torch-dist-suite.sh --ci
#   TAG=coll scripts/torch-dist-suite.sh --select build/dist-chunks/coll.txt
#
# Environment: BACKENDS (default "gloo strata"), WORLD_SIZES ("2 3"), PYTHON (the venv's),
# LOGDIR (build/), TAG (added to the log names). Other arguments go to the runner (--ci,
# --select FILE, --test-timeout S, --timeout S, pytest's -k ...). Each run writes
# $LOGDIR/dist-test-<backend>-ws<N>[-TAG].log and .xml (JUnit). Exits non-zero if a run failed.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=${PYTHON:-$("$repo/scripts/python-env.sh")/bin/python}
backends=${BACKENDS:-gloo strata}
sizes=${WORLD_SIZES:-2 3}
logdir=${LOGDIR:-$repo/build}
tag=${TAG:+-$TAG}
mkdir -p "$logdir"

if ! "$py" -c 'import expecttest' 2>/dev/null; then
  echo "torch-dist-suite: $py lacks expecttest (torch.testing._internal needs it):" \
       "$py -m pip install expecttest" >&2
  exit 2
fi

status=0
rows=()
for ws in $sizes; do
  for b in $backends; do
    log=$logdir/dist-test-$b-ws$ws$tag.log
    xml=${log%.log}.xml
    rm -f "$xml"
    echo "torch-dist-suite: $b, world size $ws -> $log"
    start=$SECONDS
    "$py" "$repo/tests/torch/run_distributed_test.py" --backend "$b" --world-size "$ws" \
      -v --junitxml "$xml" "$@" >"$log" 2>&1
    rc=$?
    secs=$((SECONDS - start))
    [ $rc -eq 0 ] || status=1
    # Counts from the JUnit file; from the log's per-test lines if the run was killed before.
    counts=$("$py" - "$xml" "$log" <<'EOF'
import os, re, sys
import xml.etree.ElementTree as ET
xml, log = sys.argv[1:]
if os.path.exists(xml):
    p = f = s = 0
    for case in ET.parse(xml).getroot().iter("testcase"):
        kinds = {c.tag for c in case}
        if kinds & {"failure", "error"}:
            f += 1
        elif "skipped" in kinds:
            s += 1
        else:
            p += 1
    print(p, f, s)
else:
    text = open(log, errors="replace").read()
    n = lambda w: len(re.findall(rf"::test_\S+ {w}", text))
    print(n("PASSED"), n("FAILED") + n("ERROR"), n("SKIPPED"), "(killed)")
EOF
)
    rows+=("$b $ws $counts $secs $rc")
  done
done

echo
echo "| backend | world size | passed | failed | skipped | wall s | exit |"
echo "|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
  set -- $r
  echo "| $1 | $2 | $3 | $4 | $5 | ${@: -2:1} | ${@: -1} |"
done
exit $status
