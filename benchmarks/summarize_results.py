#!/usr/bin/env python3
"""Summarises compare_mpi.sh's output into the markdown tables of RESULTS.md: Strata's
out-of-place busbw per size (median of the three runs, one per Open MPI configuration) against
the best of Open MPI's three configurations at that size. With several runs of compare_mpi.sh,
it prints the first run's tables and then the ratio of every target cell in every run, with
where the vCPUs were in each of its three runs. `--quick RUN` (compare_mpi.sh's quick mode)
prints the ratio of every cell and, per collective, the worst one.

    benchmarks/summarize_results.py [RUN ...]     (default benchmarks/results/mpi.csv)
    benchmarks/summarize_results.py --quick RUN

A RUN is a file packed by benchmarks/pack_results.py (each of its `run` values is one run; so
benchmarks/results/mpi.csv gives RESULTS.md's two) or a folder of compare_mpi.sh's raw output."""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pack_results import read_csv, read_dir  # noqa: E402

FAR_NS = 400  # round trips here are ~80-240 ns (near) or ~600 ns (far), see RESULTS.md
COLLS = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]
CFGS = ("default", "vader", "ucx")


def load(paths):
    """Every run in paths, in order, as {file name (less .txt): its rows}."""
    runs = {}
    for p in paths:
        for r in read_dir(p) if os.path.isdir(p) else read_csv(p):
            runs.setdefault((p, r["run"]), {}).setdefault(r["file"], []).append(r)
    return list(runs.values())


def fig(r, key):
    """A row's figure as a float, None where there is none."""
    return float(r[key]) if r[key] else None


def trips(rows):
    """The round trips (ns) at the start and the end of a file's run, None where not measured."""
    return fig(rows[0], "round_trip_start_ns"), fig(rows[0], "round_trip_end_ns")


def placement(round_trips):
    """n: the vCPUs near at the run's start and end, f: far at both, m: moved, ?: not measured."""
    if not round_trips:
        return "?"
    far = [v > FAR_NS for v in round_trips]
    return "f" if all(far) else "m" if any(far) else "n"


def size_name(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def quick(run):
    """compare_mpi.sh's quick mode: Strata's median out-of-place busbw over its runs against the
    best Open MPI configuration's, per collective, world size and size (in-place in brackets for
    all-reduce), with each run's placement (one letter per Open MPI configuration, see
    placement()), then the worst cell of each collective."""
    sizes, grid, seen, where = set(), {}, [], {}
    for coll in COLLS:
        for np in (2, 4):
            strata, inplace, mpi = {}, {}, {}
            for name in sorted(n for n in run if n.startswith(f"{coll}_np{np}_")):
                rt = [v for v in trips(run[name]) if v]
                seen += rt
                where[coll, np] = where.get((coll, np), "") + placement(rt)
                for r in run[name]:
                    b = int(r["bytes"])
                    strata.setdefault(b, []).append(fig(r, "busbw"))
                    if r["in_place_busbw"]:
                        inplace.setdefault(b, []).append(fig(r, "in_place_busbw"))
                    if r["mpi_busbw"]:
                        mpi.setdefault(b, []).append(fig(r, "mpi_busbw"))
            for b in strata:
                if b in mpi:
                    sizes.add(b)
                    ip = statistics.median(inplace[b]) / max(mpi[b]) if b in inplace else None
                    grid[coll, np, b] = (statistics.median(strata[b]) / max(mpi[b]), ip)
    print(f"Round trips seen: {min(seen):.0f}-{max(seen):.0f} ns" if seen else "")
    print()
    print("| collective | ranks | " + " | ".join(size_name(b) for b in sorted(sizes))
          + " | placement |")
    print("|---|---|" + "---|" * len(sizes) + "---|")
    for coll, np in sorted({(c, n) for c, n, _ in grid}, key=lambda k: (k[0] != "all_reduce", k)):
        cells = []
        for b in sorted(sizes):
            oop, ip = grid.get((coll, np, b), (None, None))
            cells.append("?" if oop is None else f"{oop:.2f}x"
                         + (f" ({ip:.2f}x)" if ip and coll == "all_reduce" else ""))
        print(f"| {coll} | {np} | " + " | ".join(cells) + f" | {where[coll, np]} |")
    print()
    print("| collective | worst Strata / best Open MPI (busbw) | at |")
    print("|---|---|---|")
    for coll in COLLS:
        cells = [(v[0], np, b) for (c, np, b), v in grid.items() if c == coll]
        if cells:
            r, np, b = min(cells)
            print(f"| {coll} | {r:.2f}x | n = {np}, {size_name(b)} |")


def cell(run, coll, np, size):
    """Strata's median busbw over the three runs / the best Open MPI one, and each run's
    placement: n (near at start and end), f (far at both) or m (moved during the run)."""
    strata, mpi, where = [], [], ""
    for cfg in CFGS:
        rows = run.get(f"{coll}_np{np}_{cfg}")
        if not rows:
            continue
        rt = trips(rows)
        far = [v is not None and v > FAR_NS for v in rt]
        where += "?" if rt == (None, None) else "f" if all(far) else "m" if any(far) else "n"
        for r in rows:
            if int(r["bytes"]) == size:
                strata.append(fig(r, "busbw"))
                if r["mpi_busbw"]:
                    mpi.append(fig(r, "mpi_busbw"))
    if not strata or not mpi:
        return "?"
    return f"{sorted(strata)[len(strata) // 2] / max(mpi):.2f}x ({where})"


def tables(d):
    """The first run's tables: busbw, round trips, small all-reduces, against memory's rate."""
    print("| collective | ranks | size | Strata busbw (GB/s) | best Open MPI busbw (GB/s, config)"
          " | ratio |")
    print("|---|---|---|---|---|---|")
    for coll in COLLS:
        for np in (2, 4):
            strata, mpi = {}, {}
            for cfg in CFGS:
                for r in d.get(f"{coll}_np{np}_{cfg}", []):
                    strata.setdefault(int(r["bytes"]), []).append(fig(r, "busbw"))
                    if r["mpi_busbw"]:
                        mpi.setdefault(int(r["bytes"]), {})[cfg] = fig(r, "mpi_busbw")
            for b in sorted(strata):
                s = sorted(strata[b])[len(strata[b]) // 2]
                best_cfg = max(mpi[b], key=mpi[b].get)
                best = mpi[b][best_cfg]
                print(f"| {coll} | {np} | {size_name(b)} | {s:.2f} | {best:.2f} ({best_cfg}) | "
                      f"{s / best:.2f}x |")
    print()
    # Where the host had put the two vCPUs: strata-perf's header measures a cache-line round trip
    # between them at the start and the end of each run (about 140 ns near, 600 ns far here).
    print("| collective | ranks | core round trip, start / end (ns): default | vader | ucx |")
    print("|---|---|---|---|---|")
    for coll in COLLS:
        for np in (2, 4):
            cells = []
            for cfg in CFGS:
                rt = trips(d[f"{coll}_np{np}_{cfg}"]) if f"{coll}_np{np}_{cfg}" in d else None
                fmt = lambda v: "?" if v is None else f"{v:.0f}"
                cells.append(f"{fmt(rt[0])} / {fmt(rt[1])}" if rt and rt != (None, None) else "?")
            print(f"| {coll} | {np} | " + " | ".join(cells) + " |")
    print()
    # Small all-reduces (latency_*): Strata's median time over the three runs against the
    # fastest Open MPI configuration, per size.
    print("| ranks | size (B) | Strata (us) | best Open MPI (us, config) | Strata / Open MPI |")
    print("|---|---|---|---|---|")
    for np in (2, 4):
        strata, mpi = {}, {}
        for cfg in CFGS:
            for r in d.get(f"latency_np{np}_{cfg}", []):
                if r["vs_mpi"]:
                    t, ratio = fig(r, "time_us"), fig(r, "vs_mpi")
                    strata.setdefault(int(r["bytes"]), []).append(t)
                    # vs_mpi = Strata busbw / Open MPI busbw = Open MPI time / Strata time
                    mpi.setdefault(int(r["bytes"]), {})[cfg] = t * ratio
        for b in sorted(strata):
            t = sorted(strata[b])[len(strata[b]) // 2]
            best_cfg = min(mpi[b], key=mpi[b].get)
            print(f"| {np} | {b} | {t:.2f} | {mpi[b][best_cfg]:.2f} ({best_cfg}) | "
                  f"{t / mpi[b][best_cfg]:.2f}x |")
    print()
    # Large all-reduce and all-to-all against memory's rate. Each rank must read its B bytes from
    # memory and write B to it at least once: n ranks move as much as a copy of n B at the
    # header's streaming rate R, so busbw can reach at most 2(n-1)/n^2 R (all-reduce) or
    # (n-1)/n^2 R (all-to-all). Per file, since R moves with where the vCPUs are.
    print("| collective | ranks | size | Strata, % of memory's rate: default / vader / ucx"
          " | Open MPI, same |")
    print("|---|---|---|---|---|")
    for coll, factor in (("all_reduce", 2), ("all_to_all", 1)):
        for np in (2, 4):
            for size in (16 << 20, 64 << 20, 256 << 20):
                ours, theirs = [], []
                for cfg in CFGS:
                    rows = d.get(f"{coll}_np{np}_{cfg}", [])
                    rate = fig(rows[0], "streaming_copy_gbs") if rows else None
                    row = next((r for r in rows if int(r["bytes"]) == size), None) if rate else None
                    if row is None:
                        ours.append("?")
                        theirs.append("?")
                        continue
                    ceiling = factor * (np - 1) / np ** 2 * rate
                    ours.append(f"{100 * fig(row, 'busbw') / ceiling:.0f}")
                    theirs.append(f"{100 * fig(row, 'mpi_busbw') / ceiling:.0f}")
                print(f"| {coll} | {np} | {size_name(size)} | {' / '.join(ours)} | "
                      f"{' / '.join(theirs)} |")


def main():
    if sys.argv[1:2] == ["--quick"]:
        for run in load(sys.argv[2:3]):
            quick(run)
        return
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "mpi.csv")
    runs = load(sys.argv[1:] or [default])
    tables(runs[0])
    if len(runs) > 1:
        print()
        print("| collective | ranks | size | "
              + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |")
        print("|---|---|---|" + "---|" * len(runs))
        for coll in COLLS:
            for np in (2, 4):
                for size in (64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20):
                    print(f"| {coll} | {np} | {size_name(size)} | "
                          + " | ".join(cell(run, coll, np, size) for run in runs) + " |")


if __name__ == "__main__":
    main()
