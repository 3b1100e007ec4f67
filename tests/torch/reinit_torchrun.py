"""Re-init under torchrun, whose agent store every init_process_group("strata") is handed again:
three rounds of init, all_reduce, new_group and destroy in each process (issue 34: the second
init used to fail with "rank 0 of 2 is claimed by two processes").

    PYTHONPATH=build/python python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        tests/torch/reinit_torchrun.py
"""

import torch
import torch.distributed as dist

import strata.torch  # noqa: F401

for round_ in range(1, 4):
    dist.init_process_group("strata")
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.full((1000,), float(round_ * (rank + 1)))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((1000,), float(round_ * size * (size + 1) // 2))), t[:4]
    group = dist.new_group(list(range(size)))
    dist.all_reduce(t, group=group)
    assert torch.equal(t, torch.full((1000,), float(round_ * size * size * (size + 1) // 2)))
    dist.destroy_process_group()
print(f"rank {rank} of {size}: 3 rounds of init under torchrun ok", flush=True)
