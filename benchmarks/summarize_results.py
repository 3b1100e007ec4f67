#!/usr/bin/env python3
"""Summarises benchmarks/results/*.json (from compare_mpi.sh) into the markdown tables of
RESULTS.md: Strata's out-of-place busbw per size (median of the three runs, one per Open MPI
configuration) against the best of Open MPI's three configurations at that size. With several
directories (several runs of compare_mpi.sh), it prints the first run's tables and then the
ratio of every target cell in every run, with where the vCPUs were in each of its three runs.
`--quick DIR` (compare_mpi.sh's quick mode) prints the ratio of every cell and, per collective,
the worst one."""
import glob
import json
import os
import re
import statistics
import sys

FAR_NS = 400  # round trips here are ~80-240 ns (near) or ~600 ns (far), see RESULTS.md


def placement(round_trips):
    """n: the vCPUs near at the run's start and end, f: far at both, m: moved, ?: not measured."""
    if not round_trips:
        return "?"
    far = [v > FAR_NS for v in round_trips]
    return "f" if all(far) else "m" if any(far) else "n"


def quick(d):
    """compare_mpi.sh's quick mode: Strata's median out-of-place busbw over its runs against the
    best Open MPI configuration's, per collective, world size and size (in-place in brackets for
    all-reduce), with each run's placement (one letter per Open MPI configuration, see
    placement()), then the worst cell of each collective."""
    sizes, grid, trips, where = set(), {}, [], {}
    for coll in ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]:
        for np in (2, 4):
            strata, inplace, mpi = {}, {}, {}
            for f in sorted(glob.glob(os.path.join(d, f"{coll}_np{np}_*.json"))):
                j = json.load(open(f))
                rt = [v for v in (j.get("core_round_trip_ns") or {}).values() if v]
                trips += rt
                where[coll, np] = where.get((coll, np), "") + placement(rt)
                for r in j["rows"]:
                    strata.setdefault(r["bytes"], []).append(r["out_of_place"]["busbw"])
                    if r["in_place"]:
                        inplace.setdefault(r["bytes"], []).append(r["in_place"]["busbw"])
                    if r["mpi_busbw"] is not None:
                        mpi.setdefault(r["bytes"], []).append(r["mpi_busbw"])
            for b in strata:
                if b in mpi:
                    sizes.add(b)
                    ip = statistics.median(inplace[b]) / max(mpi[b]) if b in inplace else None
                    grid[coll, np, b] = (statistics.median(strata[b]) / max(mpi[b]), ip)
    name = lambda b: f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
    print(f"Round trips seen: {min(trips):.0f}-{max(trips):.0f} ns" if trips else "")
    print()
    print("| collective | ranks | " + " | ".join(name(b) for b in sorted(sizes)) + " | placement |")
    print("|---|---|" + "---|" * len(sizes) + "---|")
    for coll, np in sorted({(c, n) for c, n, _ in grid}, key=lambda k: (k[0] != "all_reduce", k)):
        cells = []
        for b in sorted(sizes):
            oop, ip = grid.get((coll, np, b), (None, None))
            cells.append("?" if oop is None else f"{oop:.2f}x" + (f" ({ip:.2f}x)" if ip and coll == "all_reduce" else ""))
        print(f"| {coll} | {np} | " + " | ".join(cells) + f" | {where[coll, np]} |")
    print()
    print("| collective | worst Strata / best Open MPI (busbw) | at |")
    print("|---|---|---|")
    for coll in ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]:
        cells = [(v[0], np, b) for (c, np, b), v in grid.items() if c == coll]
        if cells:
            r, np, b = min(cells)
            print(f"| {coll} | {r:.2f}x | n = {np}, {name(b)} |")


if sys.argv[1:2] == ["--quick"]:
    quick(sys.argv[2])
    sys.exit(0)

dirs = sys.argv[1:] or [os.path.join(os.path.dirname(__file__), "results")]
d = dirs[0]
colls = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]


def cell(d, coll, np, size):
    """Strata's median busbw over the three runs / the best Open MPI one, and each run's
    placement: n (near at start and end), f (far at both) or m (moved during the run)."""
    strata, mpi, where = [], [], ""
    for cfg in ("default", "vader", "ucx"):
        f = os.path.join(d, f"{coll}_np{np}_{cfg}.json")
        if not os.path.exists(f):
            continue
        j = json.load(open(f))
        rt = j.get("core_round_trip_ns") or {}
        far = [v is not None and v > FAR_NS for v in (rt.get("start"), rt.get("end"))]
        where += "?" if not rt else "f" if all(far) else "m" if any(far) else "n"
        for r in j["rows"]:
            if r["bytes"] == size:
                strata.append(r["out_of_place"]["busbw"])
                if r["mpi_busbw"] is not None:
                    mpi.append(r["mpi_busbw"])
    if not strata or not mpi:
        return "?"
    return f"{sorted(strata)[len(strata) // 2] / max(mpi):.2f}x ({where})"


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
        print(f"| {coll} | {np} | " + " | ".join(cells) + f" | {where[coll, np]} |")
print()
# Small all-reduces (latency_*.txt): Strata's median time over the three runs against the
# fastest Open MPI configuration, per size.
print("| ranks | size (B) | Strata (us) | best Open MPI (us, config) | Strata / Open MPI |")
print("|---|---|---|---|---|")
for np in (2, 4):
    strata, mpi = {}, {}
    for cfg in ("default", "vader", "ucx"):
        f = os.path.join(d, f"latency_np{np}_{cfg}.txt")
        if not os.path.exists(f):
            continue
        for line in open(f):
            cols = line.split()
            if cols and cols[0].isdigit() and len(cols) == 14:
                t, ratio = float(cols[5]), float(cols[-1])
                strata.setdefault(int(cols[0]), []).append(t)
                # vs_mpi = Strata busbw / Open MPI busbw = Open MPI time / Strata time
                mpi.setdefault(int(cols[0]), {})[cfg] = t * ratio
    for b in sorted(strata):
        t = sorted(strata[b])[len(strata[b]) // 2]
        best_cfg = min(mpi[b], key=mpi[b].get)
        print(f"| {np} | {b} | {t:.2f} | {mpi[b][best_cfg]:.2f} ({best_cfg}) | {t / mpi[b][best_cfg]:.2f}x |")
print()


def streaming_copy_rate(txt):
    """The header's streaming copy rate (GB/s of payload): what memory moves for a copy."""
    for line in open(txt):
        m = re.match(r"# streaming copy: ([0-9.]+) GB/s", line)
        if m:
            return float(m.group(1))
    return None


# Large all-reduce and all-to-all against memory's rate. Each rank must read its B bytes from
# memory and write B to it at least once: n ranks move as much as a copy of n B at the header's
# streaming rate R, so busbw can reach at most 2(n-1)/n^2 R (all-reduce) or (n-1)/n^2 R
# (all-to-all). Per file, since R moves with where the vCPUs are.
print("| collective | ranks | size | Strata, % of memory's rate: default / vader / ucx | Open MPI, same |")
print("|---|---|---|---|---|")
for coll, factor in (("all_reduce", 2), ("all_to_all", 1)):
    for np in (2, 4):
        for size, name in ((16 << 20, "16 MiB"), (64 << 20, "64 MiB"), (256 << 20, "256 MiB")):
            ours, theirs = [], []
            for cfg in ("default", "vader", "ucx"):
                f = os.path.join(d, f"{coll}_np{np}_{cfg}.json")
                rate = streaming_copy_rate(f[:-5] + ".txt") if os.path.exists(f) else None
                row = next((r for r in json.load(open(f))["rows"] if r["bytes"] == size), None) if rate else None
                if row is None:
                    ours.append("?")
                    theirs.append("?")
                    continue
                ceiling = factor * (np - 1) / np ** 2 * rate
                ours.append(f"{100 * row['out_of_place']['busbw'] / ceiling:.0f}")
                theirs.append(f"{100 * row['mpi_busbw'] / ceiling:.0f}")
            print(f"| {coll} | {np} | {name} | {' / '.join(ours)} | {' / '.join(theirs)} |")

if len(dirs) > 1:
    print()
    print("| collective | ranks | size | " + " | ".join(f"run {i + 1}" for i in range(len(dirs))) + " |")
    print("|---|---|---|" + "---|" * len(dirs))
    for coll in colls:
        for np in (2, 4):
            for size, name in ((64 << 10, "64 KiB"), (1 << 20, "1 MiB"), (16 << 20, "16 MiB"),
                               (64 << 20, "64 MiB"), (256 << 20, "256 MiB")):
                print(f"| {coll} | {np} | {name} | " + " | ".join(cell(x, coll, np, size) for x in dirs) + " |")
