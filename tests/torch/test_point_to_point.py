"""torch.distributed's point-to-point calls on the strata backend: send/recv, tags, any
source, batch_isend_irecv and the coalescing manager; run after test_collectives.py by every rank
of the same job.
"""

import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from test_collectives import N, assert_equal, data, rank, reference, size


def test_send_recv_ring_and_batch_isend_irecv():
    nxt, prv = (rank() + 1) % size(), (rank() - 1) % size()
    got = torch.zeros(N)
    if rank() % 2 == 0:
        dist.send(data(rank(), N, torch.float32), nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(data(rank(), N, torch.float32), nxt)
    assert torch.equal(got, data(prv, N, torch.float32))
    got = torch.zeros(N)
    ops = [dist.P2POp(dist.isend, data(rank() + 5, N, torch.float32), nxt),
           dist.P2POp(dist.irecv, got, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got, data(prv + 5, N, torch.float32))


def test_coalescing_manager_waits_for_what_it_holds():
    """supports_coalescing: batch_isend_irecv's sends and receives go together at the end
    (one batch), and the end's work covers the collectives issued inside the manager."""
    from torch.distributed.distributed_c10d import _coalescing_manager
    assert dist.group.WORLD._get_backend(torch.device("cpu")).supports_coalescing
    big = [data(rank() + k, 1 << 18, torch.float32) for k in range(2)]
    with _coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        for t in big:
            dist.all_reduce(t)
    cm.wait()
    for k, t in enumerate(big):
        assert_equal(t, reference("SUM", [data(r + k, 1 << 18, torch.float32)
                                          for r in range(size())], torch.float32))
    nxt, prv = (rank() + 1) % size(), (rank() - 1) % size()
    got = [torch.zeros(1 << 18) for _ in range(2)]
    ops = [dist.P2POp(dist.isend, data(rank() + 9, 1 << 18, torch.float32), nxt),
           dist.P2POp(dist.isend, data(rank() + 10, 1 << 18, torch.float32), prv),
           dist.P2POp(dist.irecv, got[0], prv), dist.P2POp(dist.irecv, got[1], nxt)]
    works = dist.batch_isend_irecv(ops)
    assert len(works) == 1  # the end's work, as with nccl
    works[0].wait()
    assert torch.equal(got[0], data(prv + 9, 1 << 18, torch.float32))
    assert torch.equal(got[1], data(nxt + 10, 1 << 18, torch.float32))


def test_a_batchs_future_completes_without_a_wait():
    """The end's work completes its future when its operations finish, as every other work
    does: nobody calls wait(). Rank 0 issues first, so its batch is still running when issued."""
    if size() < 2:
        pytest.skip("needs 2 ranks")
    store = dist.distributed_c10d._get_default_store()
    nxt, prv = (rank() + 1) % size(), (rank() - 1) % size()
    got = torch.zeros(1 << 18)
    if rank() != 0:
        store.wait(["batch-future"], timedelta(seconds=20))
    sent = data(rank() + 3, 1 << 18, torch.float32)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, sent, nxt),
                                    dist.P2POp(dist.irecv, got, prv)])
    if rank() == 0:
        assert not works[0].is_completed()
        store.set("batch-future", "1")
    future = works[0].get_future()
    until = time.monotonic() + 20
    while not future.done() and time.monotonic() < until:
        time.sleep(0.01)
    assert future.done(), f"rank {rank()}: the batch's future never completed"
    assert torch.equal(got, data(prv + 3, 1 << 18, torch.float32))


def test_send_recv_tags_match_their_own_messages():
    if size() < 2:
        pytest.skip("needs 2 ranks")
    if rank() == 0:
        dist.send(torch.full((4,), 1.0), 1, tag=7)
        dist.send(torch.full((4,), 2.0), 1, tag=3)
    elif rank() == 1:
        a, b = torch.zeros(4), torch.zeros(4)
        wb = dist.irecv(b, 0, tag=3)
        wa = dist.irecv(a, 0, tag=7)
        wa.wait(), wb.wait()
        assert torch.equal(a, torch.full((4,), 1.0)) and torch.equal(b, torch.full((4,), 2.0))


def test_recv_from_any_source_names_the_sender():
    # Rank 0 takes one message from every other rank, blocking and not, in arrival order.
    if rank() == 0:
        senders = []
        for i in range(size() - 1):
            got = torch.zeros(N)
            if i % 2 == 0:
                sender = dist.recv(got, tag=4)
            else:
                w = dist.irecv(got, tag=4)
                w.wait()
                sender = w._source_rank()
            assert torch.equal(got, data(sender, N, torch.float32))
            senders.append(sender)
        assert sorted(senders) == list(range(1, size()))
    else:
        dist.send(data(rank(), N, torch.float32), 0, tag=4)
    dist.barrier()
