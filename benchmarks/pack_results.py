#!/usr/bin/env python3
"""Packs a folder of raw benchmark output into one compact file, with the commands that made it
(issue 32: benchmarks/results/ keeps one such file per section of RESULTS.md, not loose files).

    benchmarks/pack_results.py DIR OUT.csv|OUT.json --section TEXT --command CMD [--command ...]

OUT.csv, for strata-perf output: one row per size of every table in every strata-perf text
output under DIR (a file that several runs appended to holds several tables: `pass` 1, 2, ...),
in the columns COLUMNS; `run` is the file's folder under DIR (empty for DIR itself), `file` its
name less `.txt`. Where strata-perf's --json file lies beside it, the measured figures and the
round trips are taken from it, at its full precision (the text prints them rounded); the other
columns are the text's. Dropped: the lines naming each rank's process and host (`ranks` counts
them) and those that the rows or the command give again (average bus bandwidth, out-of-bounds
count, the sweep's bounds). The header, lines starting with `#`, gives the section, the commands
and, verbatim, any other text file under DIR.
OUT.json, for other programs' output: {"section", "commands", "files": {name under DIR: the
parsed JSON, or the text}}. Both leave plots (.svg) out: `strata-perf --plot` draws them.

read_csv(OUT.csv) gives the rows back as dicts of strings; read_dir(DIR) gives the same rows
straight from the raw folder (benchmarks/summarize_results.py reads either)."""
import argparse
import csv
import io
import json
import pathlib
import re
import sys

COLUMNS = ["run", "file", "pass", "collective", "ranks", "warmup", "iters", "bytes", "count",
           "type", "redop", "root", "time_us", "algbw", "busbw", "wrong", "in_place_time_us",
           "in_place_algbw", "in_place_busbw", "in_place_wrong", "vs_mpi", "mpi_busbw",
           "memcpy_1t_gbs", "memcpy_2t_gbs", "streaming_copy_gbs", "round_trip_start_ns",
           "round_trip_end_ns"]
MEASURE = ["time_us", "algbw", "busbw", "wrong"]
HEADER = [  # the header lines of a strata-perf table that carry figures
    (r"# strata-perf (\S+): .* warmup iters: (\d+) iters: (\d+)",
     ["collective", "warmup", "iters"]),
    (r"# memcpy reference: (\S+) GB/s \(1 thread\), (\S+) GB/s",
     ["memcpy_1t_gbs", "memcpy_2t_gbs"]),
    (r"# streaming copy: (\S+) GB/s", ["streaming_copy_gbs"]),
    (r"# core-to-core round trip: (\S+) ns", ["round_trip_start_ns"]),
    (r"# core-to-core round trip at end: (\S+) ns", ["round_trip_end_ns"]),
]


def num(v):
    """A JSON figure as text that reads back to the same float (None: empty)."""
    return "" if v is None else repr(v)


def perf_rows(text, js=None):
    """The rows of every table in one strata-perf text output; js: its --json, if any."""
    passes = re.split(r"^(?=# strata-perf )", text, flags=re.M)
    passes = [passes[0] + passes[1]] + passes[2:]  # a rank's line can come before the header
    if js and len(passes) != 1:
        raise ValueError("a --json file beside a text output with several tables")
    out = []
    for n, chunk in enumerate(passes, 1):
        head, rows = {"pass": str(n), "ranks": 0}, []
        for line in chunk.splitlines():
            p = line.split()
            if re.match(r"#\s+Rank\s+\d+ ", line):
                head["ranks"] += 1
            elif p and p[0].isdigit():
                p = [v if v != "N/A" else "" for v in p] + [""]  # vs_mpi: only with --compare
                rows.append({**dict(zip(["bytes", "count", "type", "redop", "root"], p)),
                             **dict(zip(MEASURE + ["in_place_" + k for k in MEASURE], p[5:13])),
                             "vs_mpi": p[13]})
            for pattern, keys in HEADER:
                if m := re.match(pattern, line):
                    head.update(zip(keys, m.groups()))
        if js:
            rt = js.get("core_round_trip_ns") or {}
            head.update(ranks=js["ranks"], round_trip_start_ns=num(rt.get("start")),
                        round_trip_end_ns=num(rt.get("end")))
            if [r["bytes"] for r in rows] != [str(r["bytes"]) for r in js["rows"]]:
                raise ValueError("the --json file's sizes differ from its text output's")
            for r, j in zip(rows, js["rows"]):
                for side in ("out_of_place", "in_place"):
                    prefix = "" if side == "out_of_place" else "in_place_"
                    r.update({prefix + k: num((j[side] or {}).get(k)) for k in MEASURE})
                r["mpi_busbw"] = num(j.get("mpi_busbw"))
        head["ranks"] = str(head["ranks"])
        out += [{**head, **r} for r in rows]
    return out


def read_dir(d, verbatim=None):
    """Every strata-perf row under d (COLUMNS); other text files' names and text to verbatim."""
    d, rows = pathlib.Path(d), []
    for f in sorted(d.rglob("*")):
        if not f.is_file() or f.suffix == ".svg" or (f.suffix == ".json"
                                                     and f.with_suffix(".txt").exists()):
            continue
        text = f.read_text()
        if f.suffix == ".txt" and re.search(r"^# strata-perf ", text, flags=re.M):
            js = f.with_suffix(".json")
            js = json.loads(js.read_text()) if js.exists() else None
            run = "" if f.parent == d else str(f.parent.relative_to(d))
            try:
                rows += [{"run": run, "file": f.stem, **r} for r in perf_rows(text, js)]
            except ValueError as e:
                sys.exit(f"{f}: {e}")
        elif verbatim is not None:
            verbatim[str(f.relative_to(d))] = text
    return rows


def read_csv(path):
    """The rows of a packed CSV, as dicts of strings."""
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--section", required=True, help="the RESULTS.md section it serves")
    ap.add_argument("--command", action="append", default=[], help="a command that made it")
    a = ap.parse_args()
    if a.out.endswith(".json"):
        files = {}
        for f in sorted(pathlib.Path(a.dir).rglob("*")):
            if f.is_file() and f.suffix != ".svg":
                text = f.read_text()
                files[str(f.relative_to(a.dir))] = json.loads(text) if f.suffix == ".json" else text
        body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in files.items())
        text = (f'{{"section": {json.dumps(a.section)},\n "commands": {json.dumps(a.command)},\n'
                f' "files": {{\n{body}\n }}}}\n')
    else:
        verbatim = {}
        rows = read_dir(a.dir, verbatim)
        out = io.StringIO()
        out.write(f"# section: {a.section}\n" + "".join(f"# command: {c}\n" for c in a.command))
        for name, t in verbatim.items():
            out.write(f"# verbatim {name}:\n" + "".join(f"#   {x}\n" if x else "#\n"
                                                          for x in t.splitlines()))
        w = csv.DictWriter(out, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        text = out.getvalue()
    pathlib.Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
