"""torch.distributed's gather and scatter on the strata backend: the results, and a root's
wrong tensor list refused on every rank at once; run after test_collectives.py by every rank of
the same job.
"""

import time

import pytest
import torch
import torch.distributed as dist

from test_collectives import N, data, rank, size


def test_gather_and_scatter():
    root = 1 % size()
    outs = [torch.zeros(N, dtype=torch.int64) for _ in range(size())] if rank() == root else None
    dist.gather(data(rank(), N, torch.int64), outs, dst=root)
    if rank() == root:
        for r in range(size()):
            assert torch.equal(outs[r], data(r, N, torch.int64))
    out = torch.zeros(N, dtype=torch.int64)
    ins = [data(r + 10, N, torch.int64) for r in range(size())] if rank() == root else None
    dist.scatter(out, ins, src=root)
    assert torch.equal(out, data(rank() + 10, N, torch.int64))


def test_a_root_with_a_wrong_list_fails_every_rank_at_once():
    # The root's own check (its list of size() tensors) fails its call with ValueError, and the
    # others' too (invalid arguments, the root's) at once, not at the deadline. A group of its
    # own: a refused call leaves the group unusable.
    if size() < 2:
        pytest.skip("needs 2 ranks")
    group = dist.new_group(backend="strata")
    out = torch.zeros(N)
    t0 = time.monotonic()
    with pytest.raises(ValueError) as e:
        dist.scatter(out, [torch.zeros(N)] * (size() - 1) if rank() == 0 else None, src=0,
                     group=group)
    assert time.monotonic() - t0 < 10, "the group's timeout is 20 s here"
    assert f"the root needs one list of {size()} input tensors" in str(e.value), e.value
    if rank() != 0:
        assert "rank 0 refused its own arguments to scatter(f32)" in str(e.value), e.value
    dist.destroy_process_group(group)
