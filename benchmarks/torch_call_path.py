"""What a torch.distributed call through `strata` costs beyond the collective: the same blocking,
in-place all_reduce of float32 on the same 2 ranks, timed three ways in one job, alternating
round by round so the machine's noise hits them alike:

  torch   dist.all_reduce(t) through the strata backend (Python wrapper, c10d dispatcher and
          hooks, the backend, its Work and future, the wait)
  module  strata.Communicator.all_reduce(a).wait() from Python on a numpy array (the binding and
          the wait, no torch)
  gloo    dist.all_reduce(t) through gloo, for scale

    PYTHONPATH=build/python build/bin/strata-run -n 2 ~/.cache/strata/venv/bin/python \\
        benchmarks/torch_call_path.py

strata-run sets STRATA_STORE_PORT, so the module's from_env() and torch's store coexist. Rank 0
prints a markdown table of medians of 5 rounds; compare with
`strata-run -n 2 build/bin/strata-perf all_reduce -b 8 -e 16M -f 4 -z 1` (blocking, in-place
columns), the same call from C++.
"""

import statistics

import numpy as np
import torch
import torch.distributed as dist

import strata
import strata.torch  # noqa: F401
from torch_backends import timed  # beside this file


def main():
    dist.init_process_group("strata")
    gloo = dist.new_group(backend="gloo")
    world = strata.Communicator.from_env(timeout=60)
    rows = []
    for nbytes in [8, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]:
        count = max(1, nbytes // 4)
        t, a = torch.ones(count), np.ones(count, np.float32)
        iters = max(40, min(2000, (256 << 20) // (nbytes * 8)))
        cases = {
            "torch": lambda: dist.all_reduce(t),
            "module": lambda: world.all_reduce(a).wait(),
            "gloo": lambda: dist.all_reduce(t, group=gloo),
        }
        for f in cases.values():
            timed(f, max(2, iters // 10))  # warm up
        rounds = {k: [] for k in cases}
        for _ in range(5):
            for k, f in cases.items():
                rounds[k].append(timed(f, iters if k != "gloo" else max(3, iters // 10)))
        rows.append((nbytes, {k: statistics.median(v) * 1e6 for k, v in rounds.items()}))
    if dist.get_rank() == 0:
        print(f"# torch {torch.__version__}, {dist.get_world_size()} ranks")
        print("| size | torch us | module us | torch/module | gloo us | gloo/torch |")
        print("|---:|---:|---:|---:|---:|---:|")
        for nbytes, r in rows:
            print(f"| {nbytes} | {r['torch']:.1f} | {r['module']:.1f} | "
                  f"{r['torch'] / r['module']:.2f} | {r['gloo']:.1f} | {r['gloo'] / r['torch']:.1f} |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
