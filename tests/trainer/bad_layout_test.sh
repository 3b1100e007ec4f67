#!/usr/bin/env bash
# A layout the world cannot hold is bad input: strata-gpt prints one line naming it and exits 2
# before training anything (no step line, no output). Usage: bad_layout_test.sh STRATA_RUN STRATA_GPT
set -uo pipefail
run=$1 gpt=$2 failed=0
check() {  # expected message, then the strata-gpt arguments
  local want=$1 out err rc
  shift
  out=$(mktemp) err=$(mktemp)
  "$run" -n 4 "$gpt" "$@" > "$out" 2> "$err"
  rc=$?
  local lines
  lines=$(grep -c '^strata-gpt: ' "$err")
  if [ "$rc" != 2 ] || [ -s "$out" ] || [ "$lines" != 1 ] || ! grep -qxF "strata-gpt: $want" "$err"; then
    echo "FAIL: strata-gpt $* -> exit $rc, stdout $(wc -c < "$out") bytes, stderr:"
    cat "$err"
    failed=1
  else
    echo "ok: strata-gpt $* -> $want"
  fi
  rm -f "$out" "$err"
}
check "layout tp=3 pp=1: tp*pp = 3 does not divide the 4 ranks" train --config tiny --tp 3
check "--tp 4 does not divide the 2 heads" train --config tiny --tp 4
check "4 pipeline stages (pp=4 x 1 virtual) but only 2 layers" train --config tiny --pp 4
check "--virtual-stages 2 needs --schedule interleaved" train --config tiny --layers 4 --pp 2 --virtual-stages 2
check "layout 'tp3': layout tp=3 pp=1: tp*pp = 3 does not divide the 4 ranks" validate --config tiny --layouts tp3
# Mixture of experts: a token takes k distinct experts; tp ranks route whole sequences.
check "--top-k 3 exceeds --experts 2 (a token takes k distinct experts, at most 64)" train --config tiny --experts 2 --top-k 3
check "--experts with --tp 2: micro-batches of size 1 do not divide over tp (each tp rank routes whole sequences)" train --config tiny --experts 4 --tp 2 --batch 4 --micro-batches 2
# Expert parallelism: experts to split, evenly, over ranks that divide the world.
check "--ep 2 needs --experts" train --config tiny --ep 2
check "--experts 3 does not divide over --ep 2 ranks" train --config tiny --experts 3 --ep 2
check "layout tp=1 ep=3 pp=1: tp*ep*pp = 3 does not divide the 4 ranks" train --config tiny --experts 3 --ep 3
check "layout 'ep2.dp3': tp*cp*ep*pp*dp = 6 but there are 4 ranks" validate --config tiny --experts 4 --layouts ep2.dp3
# Context parallelism: the heads split over cp (all-to-all), a sequence of 2 cp chunks at least.
check "--cp-comm a2a: the 2 heads do not divide over cp=4" train --config tiny --cp 4 --cp-comm a2a
check "--cp 4: the sequence of 4 positions does not split into 2 cp = 8 chunks" train --config tiny --cp 4 --ctx 4
check "layout 'cp2': --cp 2: the sequence of 18 positions does not split into 2 cp = 4 chunks" validate --config tiny --ctx 18 --layouts cp2
# Layout lists and files that would run nothing, or not what was asked.
check "--layouts ',' has an empty entry" validate --config tiny --layouts ,
check "--layouts 'tp2,,dp4' has an empty entry" validate --config tiny --layouts tp2,,dp4
check "layout 'tp1.tp2': 'tp2' repeats its tp" validate --config tiny --layouts tp1.tp2
check "layout 'zero1.zero3.dp4': 'zero3' repeats its zero" validate --config tiny --layouts zero1.zero3.dp4
check "layout 'tp0.dp2': 'tp0' has size 0" validate --config tiny --layouts tp0.dp2
dir=$(mktemp -d)
check "--data: gpt::CharCorpus: '$dir' is a directory, not a text file" train --config tiny --data "$dir"
check "--data: gpt::CharCorpus: cannot open '$dir/none'" validate --config tiny --data "$dir/none"
check "--json $dir/none/x.json: cannot write it" train --config tiny --json "$dir/none/x.json"
check "--report /proc/x: cannot make the directory (No such file or directory)" validate --config tiny --report /proc/x
# A checkpoint at or past --steps has nothing left to train.
"$run" -n 4 "$gpt" train --config tiny --steps 2 --eval-every 0 --sample 0 --quiet --save "$dir/ck" > /dev/null 2>&1
check "--resume $dir/ck is at step 2, at or past --steps 1: nothing to train" train --config tiny --steps 1 --sample 0 --resume "$dir/ck"
rm -rf "$dir"
exit $failed
