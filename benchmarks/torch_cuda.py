"""torch.distributed on CUDA tensors through `strata` against torch's own backend, in one job, on
the same tensors: all_reduce latency and bus bandwidth from 8 B to 256 MiB, then the step time
of DDP on an 8 x Linear(4096) model (batch 64). The peer is `nccl` where every rank has its own
GPU (Strata goes by NCCL too), `gloo` where ranks share one (NCCL refuses them; Strata stages).

    PYTHONPATH=build/python build/bin/strata-run -n 1 python benchmarks/torch_cuda.py [--quick]

Rank 0 prints markdown tables. The backends alternate size by size and round by round, so the
machine's noise hits them alike; figures are medians of three rounds, each timed from a
synchronised GPU to a synchronised GPU.
"""

import argparse
import copy
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import strata.torch  # noqa: F401
from torch_backends import human


def timed(fn, iters):
    dist.barrier()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters


def all_reduce_rows(groups, quick):
    n = dist.get_world_size()
    rows = []
    for k in range(0, 26 if not quick else 13, 3 if not quick else 4):  # 8 B ... 256 MiB
        nbytes = 8 << k
        t = torch.ones(nbytes // 4, device="cuda")
        iters = max(5, min(2000, (1 << 30) // (nbytes * 4)))
        if quick:
            iters = max(2, iters // 20)
        rounds = {name: [] for name in groups}
        for name, g in groups.items():
            timed(lambda: dist.all_reduce(t, group=g), max(1, iters // 10))  # warm up
        for _ in range(3):
            for name, g in groups.items():
                rounds[name].append(timed(lambda: dist.all_reduce(t, group=g), iters))
        res = {}
        for name, secs in rounds.items():
            s = statistics.median(secs)
            res[name] = (s * 1e6, nbytes / s * 2 * (n - 1) / n / 1e9, nbytes / s / 1e9)
        rows.append((nbytes, res))
    return rows


def ddp_times(groups, quick):
    steps, rounds = (3, 1) if quick else (20, 3)
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(8)]).cuda()
    batch = torch.randn(64, 4096, device="cuda")
    times = {name: [] for name in groups}
    for r in range(rounds):
        order = list(groups.items())
        for name, g in order if r % 2 == 0 else order[::-1]:
            m = DDP(copy.deepcopy(net), process_group=g,
                    device_ids=[torch.cuda.current_device()])
            opt = torch.optim.SGD(m.parameters(), lr=1e-4)

            def step():
                opt.zero_grad()
                m(batch).pow(2).mean().backward()
                opt.step()

            step()
            times[name].append(timed(step, steps))
    return {name: statistics.median(v) * 1e3 for name, v in times.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="few sizes and iterations (a smoke test)")
    args = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("strata")
    peer = "nccl" if dist.get_world_size() <= torch.cuda.device_count() else "gloo"
    groups = {"strata": dist.group.WORLD, peer: dist.new_group(backend=peer)}
    rows = all_reduce_rows(groups, args.quick)
    ddp = ddp_times(groups, args.quick)
    if dist.get_rank() == 0:
        print(f"# torch {torch.__version__}, {dist.get_world_size()} ranks on "
              f"{torch.cuda.get_device_name()}, peer {peer}")
        print(f"\n| size | strata us | {peer} us | time {peer}/strata | strata busbw GB/s | "
              f"{peer} busbw GB/s | strata algbw GB/s |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for nbytes, r in rows:
            (su, sb, sa), (pu, pb, _) = r["strata"], r[peer]
            print(f"| {human(nbytes)} | {su:.1f} | {pu:.1f} | {pu / su:.2f} | {sb:.1f} | "
                  f"{pb:.1f} | {sa:.1f} |")
        print(f"\nDDP step, 8 x Linear(4096), batch 64: strata {ddp['strata']:.2f} ms, "
              f"{peer} {ddp[peer]:.2f} ms ({peer}/strata {ddp[peer] / ddp['strata']:.2f})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
