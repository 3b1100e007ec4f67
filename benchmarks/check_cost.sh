#!/usr/bin/env bash
# What the always-on mismatch check costs (issue 22): two builds, before and after, interleaved
# (ABBA within each repetition, so drifts of the machine hit both alike), strata-perf on one node
# (the shared-memory path), 8 B latency and 64 KiB..4 MiB. Prints, per collective, world size and
# size, the median over repetitions of after/before of the out-of-place time.
# MODE sizes: 2 and 4 ranks, 8 B and 64 KiB..4 MiB, REPS repetitions (default 3); MODE latency:
# 2 ranks, 8 B only (16 B for reduce-scatter), 20,000 iterations, REPS repetitions (default 10).
# NET=1 runs the network path instead (UCX, STRATA_SHM=0).
#   [NET=1] benchmarks/check_cost.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR OUTDIR [MODE] [REPS]
# benchmarks/pack_results.py then packs OUTDIR into one CSV beside it, OUTDIR.csv.
set -euo pipefail
before=$1 after=$2 out=$3 mode=${4:-sizes}
reps=${5:-$([[ $mode == latency ]] && echo 10 || echo 3)}
mkdir -p "$out"
bind="--bind-to core:overload-allowed --map-by core"
[[ ${NET:-0} == 1 ]] && bind+=" -x STRATA_SHM=0"
run() {  # run BUILD NP COLL FILE ARGS...
  local dir=$1 np=$2 coll=$3 f=$4
  shift 4
  # shellcheck disable=SC2086
  mpirun --allow-run-as-root --oversubscribe $bind -np "$np" "$dir/bin/strata-perf" "$coll" "$@" \
    >> "$f" 2>&1 || echo "failed: $f"
}
nps="2 4"; [[ $mode == latency ]] && nps=2
for rep in $(seq "$reps"); do
  for np in $nps; do
    for coll in all_reduce broadcast all_gather reduce_scatter all_to_all; do
      for which in before after after before; do
        dir=$before; [[ $which == after ]] && dir=$after
        f="$out/${coll}_np${np}_${which}_${rep}.txt"
        if [[ $mode == latency ]]; then
          small=8; [[ $coll == reduce_scatter ]] && small=16
          run "$dir" "$np" "$coll" "$f" -b $small -e $small -n 20000 -w 1000
        else
          run "$dir" "$np" "$coll" "$f" -b 8 -e 8 -n 4000 -w 400
          run "$dir" "$np" "$coll" "$f" -b 64K -e 4M -f 4 -n 20 -w 5
        fi
      done
    done
  done
done
python3 - "$out" <<'PY'
import pathlib, statistics, sys, collections
out = pathlib.Path(sys.argv[1])
# (coll, np, size) -> build -> every out-of-place time (us) of every run
times = collections.defaultdict(lambda: collections.defaultdict(list))
for f in out.glob("*.txt"):
    coll_np, which, rep = f.stem.rsplit("_", 2)
    coll, np = coll_np.rsplit("_np", 1)
    for line in f.read_text().splitlines():
        p = line.split()
        if len(p) > 6 and p[0].isdigit():
            times[(coll, int(np), int(p[0]))][which].append(float(p[5]))
print("| collective | ranks | bytes | runs | median before / after (us) | ratio | min before / after (us) | ratio |")
print("|---|---|---|---|---|---|---|---|")
for (coll, np, size), t in sorted(times.items()):
    b, a = t["before"], t["after"]
    if not b or not a:
        continue
    mb, ma = statistics.median(b), statistics.median(a)
    print(f"| {coll} | {np} | {size} | {len(a)} | {mb:.2f} / {ma:.2f} | {ma / mb:.3f} | "
          f"{min(b):.2f} / {min(a):.2f} | {min(a) / min(b):.3f} |")
PY
"$(dirname "$0")/pack_results.py" "${out%/}" "${out%/}.csv" \
  --section "The mismatch check's cost (check_cost.sh)" \
  --command "${NET:+NET=$NET }benchmarks/check_cost.sh $*"
