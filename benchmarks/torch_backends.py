"""torch.distributed through `strata` against `gloo`, in one job, on the same tensors:
all_reduce latency and bus bandwidth from 8 B to 64 MiB, then the step time of a 4 x
Linear(1024) model (batch 32) under DDP (also with gradient_as_bucket_view) and FSDP2 and without any data parallelism.

    PYTHONPATH=build/python build/bin/strata-run -n 2 ~/.cache/strata/venv/bin/python \
        benchmarks/torch_backends.py [--quick]

Rank 0 prints markdown tables. Both backends run in the same processes, alternating size by
size (and round by round for the models), so the machine's noise hits them alike; figures are
medians of rounds.
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import strata.torch  # noqa: F401


def timed(fn, iters):
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


def all_reduce_table(groups, quick):
    n = dist.get_world_size()
    rows = []
    sizes = [8 << (2 * k) for k in range(7)] + [64 << 10 << (2 * k) for k in range(6)]
    for nbytes in sizes:  # 8 B ... 32 KiB, then 64 KiB, 256 KiB, ... 64 MiB
        if quick and nbytes > 4 << 20:
            break
        t = torch.ones(nbytes // 4)
        iters = max(3, min(2000, (256 << 20) // (nbytes * 8)))
        if quick:
            iters = max(2, iters // 20)
        results = {}
        for name, g in groups.items():
            timed(lambda: dist.all_reduce(t, group=g), max(1, iters // 10))  # warm up
        rounds = {name: [] for name in groups}
        for _ in range(3):
            for name, g in groups.items():
                rounds[name].append(timed(lambda: dist.all_reduce(t, group=g), iters))
        for name in groups:
            secs = statistics.median(rounds[name])
            busbw = nbytes / secs * 2 * (n - 1) / n / 1e9
            results[name] = (secs * 1e6, busbw)
        rows.append((nbytes, results))
    return rows


def human(nbytes):
    for unit in ("B", "KiB", "MiB"):
        if nbytes < 1024:
            return f"{nbytes} {unit}"
        nbytes //= 1024
    return f"{nbytes} GiB"


def model():
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(4)])


def step_time(m, batch, steps):
    opt = torch.optim.SGD(m.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        m(batch).pow(2).mean().backward()
        opt.step()

    step()  # warm up: buckets, lazy init
    return timed(step, steps)


def model_table(gloo, quick):
    """Median step times (ms) per case and backend; "no data parallelism" (the model alone,
    which no backend touches) is measured in the same rounds, as the floor."""
    steps, rounds = (3, 1) if quick else (10, 5)
    batch = torch.randn(32, 1024)
    cases = {
        "DDP": lambda g: DDP(model(), process_group=g),
        "DDP, gradient_as_bucket_view": lambda g: DDP(model(), process_group=g,
                                                     gradient_as_bucket_view=True),
        "FSDP2": fsdp,
    }
    times = {case: {"strata": [], "gloo": []} for case in cases}
    alone = []
    for r in range(rounds):
        alone.append(step_time(model(), batch, steps))
        order = (("strata", dist.group.WORLD), ("gloo", gloo))
        for name, g in order if r % 2 == 0 else order[::-1]:  # neither always goes first
            for case, make in cases.items():
                times[case][name].append(step_time(make(g), batch, steps))
    out = {case: {k: statistics.median(v) * 1e3 for k, v in t.items()}
           for case, t in times.items()}
    return statistics.median(alone) * 1e3, out


def fsdp(group):
    m = model()
    mesh = DeviceMesh.from_group(group, "cpu")
    for layer in m:
        fully_shard(layer, mesh=mesh)
    return fully_shard(m, mesh=mesh)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="few sizes and iterations (a smoke test)")
    p.add_argument("--models-only", action="store_true", help="skip the all_reduce sweep")
    args = p.parse_args()
    dist.init_process_group("strata")
    gloo = dist.new_group(backend="gloo")
    groups = {"strata": dist.group.WORLD, "gloo": gloo}
    rows = [] if args.models_only else all_reduce_table(groups, args.quick)
    alone_ms, models = model_table(gloo, args.quick)
    if dist.get_rank() == 0:
        print(f"# torch {torch.__version__}, {dist.get_world_size()} ranks, "
              f"{torch.get_num_threads()} intra-op threads per rank")
        if rows:
            print("\n| size | strata us | gloo us | latency strata/gloo | strata GB/s | gloo GB/s "
                  "| busbw strata/gloo |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            for nbytes, r in rows:
                (su, sb), (gu, gb) = r["strata"], r["gloo"]
                print(f"| {human(nbytes)} | {su:.1f} | {gu:.1f} | {su / gu:.2f} | {sb:.2f} | "
                      f"{gb:.2f} | {sb / gb:.2f} |")
        print("\n| step (4 x Linear(1024), batch 32) | strata ms | gloo ms | strata/gloo |"
              " model alone / gloo |")
        print("|---|---:|---:|---:|---:|")
        for case, t in models.items():
            print(f"| {case} | {t['strata']:.1f} | {t['gloo']:.1f} | "
                  f"{t['strata'] / t['gloo']:.2f} | {alone_ms / t['gloo']:.2f} |")
        print(f"\nThe model alone (no data parallelism): {alone_ms:.1f} ms a step.")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
