"""CUDA tensors through DLPack (docs/device.md, docs/bindings.md), run by every rank of a job:

    PYTHONPATH=build/python strata-run -n 2 python -m pytest -q -x tests/python/test_cuda_tensors.py

Each rank uses GPU LOCAL_RANK % device_count: one rank per GPU goes by NCCL, ranks sharing a GPU
by the staged path. Expected values are computed on the host from every rank's input, which each
rank derives from (rank, index). Skipped with "no CUDA device" where torch sees none.
"""

import os

import numpy as np
import pytest

import strata

try:
    import torch
except ImportError:
    torch = None

# Skipped test by test (a module-level skip would make pytest exit 5, "no tests ran").
pytestmark = pytest.mark.skipif(torch is None or not torch.cuda.is_available(),
                                reason="no CUDA device" if torch else "no torch")

N = 1000


@pytest.fixture(scope="module")
def world():
    local = int(os.environ.get("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))
    torch.cuda.set_device(local % torch.cuda.device_count())
    return strata.Communicator.from_env()


def inputs(dtype, size):
    """Every rank's input (small integers: exact in every dtype, any summation order)."""
    return [(torch.arange(N) % 7 + r).to(dtype) for r in range(size)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64",
                                   "uint8"])
def test_all_reduce_in_place_against_the_host(world, dtype):
    dtype = getattr(torch, dtype)
    mine = inputs(dtype, world.size)
    for op, reduce in (("sum", lambda xs: sum(x.double() for x in xs)),
                       ("max", lambda xs: torch.stack([x.double() for x in xs]).amax(0))):
        t = mine[world.rank].cuda()
        ptr = t.data_ptr()
        world.all_reduce(t, op=op).wait()
        assert t.data_ptr() == ptr, "the collective wrote the caller's own tensor"
        got = t.cpu().double()
        assert torch.equal(got, reduce(mine).to(dtype).double()), (op, dtype)


def test_out_of_place_collectives_against_the_host(world):
    n, r = world.size, world.rank
    mine = inputs(torch.float32, n)
    x = mine[r].cuda()

    out = torch.full((N,), -1.0, device="cuda")
    world.all_reduce(x, out, op="sum").wait()
    assert torch.equal(out.cpu(), sum(mine))

    gathered = torch.full((n * N,), -1.0, device="cuda")
    world.all_gather(x, gathered).wait()
    assert torch.equal(gathered.cpu(), torch.cat(mine))

    block = N // n
    scattered = torch.full((block,), -1.0, device="cuda")
    world.reduce_scatter(x[: block * n], scattered, op="sum").wait()
    assert torch.equal(scattered.cpu(), sum(m[: block * n] for m in mine)[r * block:(r + 1) * block])

    b = x.clone() if r == 0 else torch.full((N,), -1.0, device="cuda")
    world.broadcast(b, root=0).wait()
    assert torch.equal(b.cpu(), mine[0])

    # all_to_all: rank r's block p holds (r, p); rank p receives them in rank order.
    send = torch.tensor([float(r * 100 + p) for p in range(n) for _ in range(3)], device="cuda")
    recv = torch.full((3 * n,), -1.0, device="cuda")
    world.all_to_all(send, recv).wait()
    assert torch.equal(recv.cpu(), torch.tensor([float(q * 100 + r) for q in range(n) for _ in range(3)]))


def test_calls_order_on_the_given_stream_without_a_synchronise(world):
    """Input written on a side stream 50 ms late, output read on it before anyone waits."""
    mine = inputs(torch.float32, world.size)
    side = torch.cuda.Stream()
    comm = world.on_stream(side)
    with torch.cuda.stream(side):
        x = torch.zeros(N, device="cuda")
        torch.cuda._sleep(50_000_000)  # about 50 ms of GPU time on the stream before the input
        x.copy_(mine[world.rank].cuda(non_blocking=True))
        comm.all_reduce(x, op="sum")  # the Work is not waited on
        doubled = x * 2  # queued on `side` after the all-reduce
    side.synchronize()
    assert torch.equal(doubled.cpu(), 2 * sum(mine))
    with pytest.raises(TypeError, match="cuda_stream"):
        world.on_stream("default")


def test_host_and_device_calls_alternate_on_one_communicator(world):
    n = world.size
    for i in range(3):
        h = np.full(8, world.rank + i, np.int64)
        world.all_reduce(h).wait()
        np.testing.assert_array_equal(h, sum(range(n)) + n * i)
        d = torch.full((8,), world.rank + i, dtype=torch.int64, device="cuda")
        world.all_reduce(d).wait()
        assert torch.equal(d.cpu(), torch.full((8,), sum(range(n)) + n * i, dtype=torch.int64))


def test_host_and_device_mixed_in_one_call_is_refused_before_anything_moves(world):
    # Only rank 0 makes the bad call: had it issued anything, the all-reduce below would be
    # matched against it there only.
    if world.rank == 0:
        with pytest.raises(strata.Error, match="CUDA device memory and output host memory"):
            world.all_reduce(torch.zeros(4, device="cuda"), torch.zeros(4))
    x = torch.ones(4, device="cuda")
    world.all_reduce(x).wait()
    assert torch.equal(x.cpu(), torch.full((4,), float(world.size)))
