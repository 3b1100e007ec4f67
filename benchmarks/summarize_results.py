#!/usr/bin/env python3
"""Summarises benchmarks/results/*.json (from compare_mpi.sh) into the markdown tables of
RESULTS.md: Strata's out-of-place busbw per size (median of the three runs, one per Open MPI
configuration) against the best of Open MPI's three configurations at that size."""
import glob
import json
import os
import re
import sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results")
colls = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]
print("| collective | ranks | size | Strata busbw (GB/s) | best Open MPI busbw (GB/s, config) | ratio |")
print("|---|---|---|---|---|---|")
for coll in colls:
    for np in (2, 4):
        strata, mpi = {}, {}
        for cfg in ("default", "vader", "ucx"):
            f = os.path.join(d, f"{coll}_np{np}_{cfg}.json")
            if not os.path.exists(f):
                continue
            for r in json.load(open(f))["rows"]:
                strata.setdefault(r["bytes"], []).append(r["out_of_place"]["busbw"])
                if r["mpi_busbw"] is not None:
                    mpi.setdefault(r["bytes"], {})[cfg] = r["mpi_busbw"]
        for b in sorted(strata):
            s = sorted(strata[b])[len(strata[b]) // 2]
            best_cfg = max(mpi[b], key=mpi[b].get)
            best = mpi[b][best_cfg]
            size = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
            print(f"| {coll} | {np} | {size} | {s:.2f} | {best:.2f} ({best_cfg}) | {s / best:.2f}x |")
print()
# Where the host had put the two vCPUs: strata-perf's header measures a cache-line round trip
# between them at the start and the end of each run (about 140 ns near, 600 ns far apart here).
print("| collective | ranks | core round trip, start / end (ns): default | vader | ucx |")
print("|---|---|---|---|---|")
for coll in colls:
    for np in (2, 4):
        cells = []
        for cfg in ("default", "vader", "ucx"):
            f = os.path.join(d, f"{coll}_np{np}_{cfg}.json")
            rt = json.load(open(f)).get("core_round_trip_ns") if os.path.exists(f) else None
            fmt = lambda v: "?" if v is None else f"{v:.0f}"
            cells.append(f"{fmt(rt['start'])} / {fmt(rt['end'])}" if rt else "?")
        print(f"| {coll} | {np} | " + " | ".join(cells) + " |")
print()
print("| ranks | Open MPI config | Strata 8 B all-reduce (us) | Open MPI (us) | Strata / Open MPI |")
print("|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(d, "latency_np*_*.txt"))):
    m = re.search(r"latency_np(\d)_(\w+)\.txt", f)
    for line in open(f):
        cols = line.split()
        if cols and cols[0] == "8":
            t, ratio = float(cols[5]), float(cols[-1])
            mpi_t = t * ratio  # vs_mpi = strata busbw / mpi busbw = mpi time / strata time
            print(f"| {m.group(1)} | {m.group(2)} | {t:.2f} | {mpi_t:.2f} | {t / mpi_t:.1f}x |")
