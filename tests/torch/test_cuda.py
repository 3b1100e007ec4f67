"""torch.distributed on the strata backend with CUDA tensors (docs/device.md): every operation
against a reference each rank computes on the CPU, ordering on the caller's stream, CUDA-aware
futures, host and device calls on one group, DDP against gloo and FSDP2 against one process.

    PYTHONPATH=build/python build/bin/strata-run -n 2 ~/.cache/strata/venv/bin/python -m pytest -q \
        tests/torch/test_cuda.py

Each rank uses GPU LOCAL_RANK % device_count: one rank per GPU goes by NCCL, ranks sharing a GPU
by the staged path. Skipped with "no CUDA device" where torch sees none (the registration test
runs everywhere).
"""

import copy
import math
import os

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import strata.torch
from test_collectives import (DTYPES, OPS, assert_equal, data, defined, rank, reduce_op, reference,
                              size)
from test_training import assert_same, fresh, full_params, my_shard, params, train

N = 1031  # odd, and more than one CUDA block
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def test_the_backend_serves_cuda_where_strata_has_its_device_path():
    config = str(dist.get_backend_config())
    assert ("cuda:strata" in config) == strata.torch.CUDA, config
    assert "cpu:strata" in config


@pytest.fixture(scope="module")
def device():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    return torch.device("cuda", torch.cuda.current_device())


def on_nccl():
    """Whether this job's device calls go by NCCL (one GPU per rank) or are staged."""
    forced = os.environ.get("STRATA_DEVICE_PATH")
    return forced == "nccl" if forced else size() <= torch.cuda.device_count()


def nccl_lacks(op, dtype):
    """What NCCL has no type or reduction for (docs/device.md); the staged path takes it all.
    (torch itself passes complex tensors as real views, for the ops it allows on them.)"""
    if dtype == torch.int16:
        return True
    return op in ("BAND", "BOR", "BXOR") and dtype != torch.bool or (
        dtype == torch.bool and op == "BXOR")


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_all_reduce_every_op_and_dtype(device, op, dtype):
    if not defined(op, dtype):
        pytest.skip("not defined for the dtype")
    t = data(rank(), N, dtype, op).to(device)
    if on_nccl() and nccl_lacks(op, dtype):
        with pytest.raises(ValueError, match="NCCL"):
            dist.all_reduce(t, op=reduce_op(op))
        return
    ptr = t.data_ptr()
    dist.all_reduce(t, op=reduce_op(op))
    assert t.data_ptr() == ptr
    want = reference(op, [data(r, N, dtype, op) for r in range(size())], dtype)
    # NCCL may average and premultiply in the narrow type; the staged path reduces as the host.
    assert_equal(t.cpu(), want, exact=not on_nccl() or op not in ("AVG", "PREMUL_SUM"))


@gpu
def test_non_contiguous_all_reduce_writes_back_only_the_view(device):
    base = torch.full((N, 3), -1.0, device=device)
    col = base[:, 1]
    col.copy_(data(rank(), N, torch.float32).to(device))
    dist.all_reduce(col)
    want = reference("SUM", [data(r, N, torch.float32) for r in range(size())], torch.float32)
    assert_equal(base[:, 1].cpu(), want)
    assert torch.equal(base[:, 0].cpu(), torch.full((N,), -1.0))
    assert torch.equal(base[:, 2].cpu(), torch.full((N,), -1.0))


@gpu
def test_broadcast_reduce_and_the_list_collectives(device):
    n, r = size(), rank()
    mine = [data(q, N, torch.float32) for q in range(n)]
    x = mine[r].to(device)

    b = x.clone()
    dist.broadcast(b, src=n - 1)
    assert_equal(b.cpu(), mine[n - 1])

    red = x.clone()
    dist.reduce(red, dst=0)
    assert_equal(red.cpu(), sum(mine) if r == 0 else mine[r])

    outs = [torch.empty(N, device=device) for _ in range(n)]
    dist.all_gather(outs, x)
    for q in range(n):
        assert_equal(outs[q].cpu(), mine[q])
    flat = torch.empty(n * N, device=device)
    dist.all_gather_into_tensor(flat, x)
    assert_equal(flat.cpu(), torch.cat(mine))

    blocks = [data(r + 10 * q, N, torch.float32).to(device) for q in range(n)]
    got = torch.empty(N, device=device)
    dist.reduce_scatter(got, blocks)
    assert_equal(got.cpu(), sum(data(q + 10 * r, N, torch.float32) for q in range(n)))
    got.zero_()
    dist.reduce_scatter_tensor(got, torch.cat(blocks))
    assert_equal(got.cpu(), sum(data(q + 10 * r, N, torch.float32) for q in range(n)))

    gathered = [torch.empty(N, device=device) for _ in range(n)] if r == 0 else None
    dist.gather(x, gathered, dst=0)
    if r == 0:
        for q in range(n):
            assert_equal(gathered[q].cpu(), mine[q])
    part = torch.empty(N, device=device)
    dist.scatter(part, [m.to(device) for m in mine] if r == 0 else None, src=0)
    assert_equal(part.cpu(), mine[r])


@gpu
def test_all_to_all_single_uneven_and_list(device):
    n, r = size(), rank()
    # Rank r sends q + r + 1 rows of 3 to rank q, each row holding (sender, receiver, index).
    def rows(frm, to):
        k = to + frm + 1
        return torch.stack([torch.full((k,), float(frm)), torch.full((k,), float(to)),
                            torch.arange(k, dtype=torch.float32)], 1)
    send = torch.cat([rows(r, q) for q in range(n)]).to(device)
    want = torch.cat([rows(q, r) for q in range(n)])
    out = torch.empty_like(want, device=device)
    dist.all_to_all_single(out, send, [r + q + 1 for q in range(n)], [q + r + 1 for q in range(n)])
    assert torch.equal(out.cpu(), want)

    outs = [torch.empty(q + 1, device=device) for q in range(n)]
    ins = [torch.full((r + 1,), float(10 * r + q), device=device) for q in range(n)]
    dist.all_to_all(outs, ins)
    for q in range(n):
        assert torch.equal(outs[q].cpu(), torch.full((q + 1,), float(10 * q + r)))


@gpu
def test_send_recv_ring(device):
    n, r = size(), rank()
    if n == 1:
        pytest.skip("a ring needs two ranks")
    got = torch.empty(N, device=device)
    reqs = [dist.isend(data(r, N, torch.float32).to(device), (r + 1) % n),
            dist.irecv(got, (r - 1) % n)]
    for q in reqs:
        q.wait()
    assert_equal(got.cpu(), data((r - 1) % n, N, torch.float32))


@gpu
def test_batch_isend_irecv_ring_of_sends_before_receives(device):
    """One batch (startCoalescing ... endCoalescing): on NCCL one ncclGroupStart/End, so the
    ring cannot deadlock however large the messages."""
    n, r = size(), rank()
    if n == 1:
        pytest.skip("torch refuses a send to this rank itself")
    got = torch.empty(1 << 22, device=device)
    ops = [dist.P2POp(dist.isend, torch.full((1 << 22,), float(r), device=device), (r + 1) % n),
           dist.P2POp(dist.irecv, got, (r - 1) % n)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got.cpu(), torch.full((1 << 22,), float((r - 1) % n)))


@gpu
def test_calls_order_on_the_current_stream_without_a_synchronise(device):
    """Input written late on a side stream, the output read on it: both in order, no host wait."""
    side = torch.cuda.Stream()
    x = torch.zeros(N, device=device)
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # ~25 ms: the host runs far ahead of the stream
        x.fill_(rank() + 1.0)
        work = dist.all_reduce(x, async_op=True)
        y = x * 2  # queued on the side stream after the collective
    work.wait()
    side.synchronize()
    total = float(sum(q + 1 for q in range(size())))
    assert torch.equal(y.cpu(), torch.full((N,), 2 * total))


@gpu
def test_wait_orders_another_stream_after_a_list_output(device):
    """all_gather's outputs are copied from a staging tensor on the call's stream; wait() on
    another stream orders that stream after the copies."""
    side = torch.cuda.Stream()
    n = size()
    outs = [torch.empty(N, device=device) for _ in range(n)]
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        x = torch.full((N,), float(rank()), device=device)
        work = dist.all_gather(outs, x, async_op=True)
    work.wait()  # on the default stream
    got = torch.stack(outs).sum(1)  # the default stream reads the outputs
    assert torch.equal(got.cpu(), torch.tensor([float(q) * N for q in range(n)]))


@gpu
def test_the_future_is_cuda_aware(device):
    x = torch.full((N,), rank() + 1.0, device=device)
    fut = dist.all_reduce(x, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2).wait()
    total = float(sum(q + 1 for q in range(size())))
    assert torch.equal(doubled.cpu(), torch.full((N,), 2 * total))


@gpu
def test_host_and_device_calls_alternate_on_one_group(device):
    total = float(sum(q + 1 for q in range(size())))
    for i in range(4):
        t = torch.full((N,), rank() + 1.0, device=device if i % 2 else "cpu")
        dist.all_reduce(t)
        assert t.device.type == ("cuda" if i % 2 else "cpu")
        assert torch.equal(t.cpu(), torch.full((N,), total))


@gpu
def test_one_call_on_two_devices_is_refused_by_name(device):
    outs = [torch.empty(N) for _ in range(size())]
    with pytest.raises(ValueError, match="one device per call"):
        dist.all_gather(outs, torch.ones(N, device=device))


@gpu
def test_ddp_on_cuda_reaches_gloos_parameters(device, gloo):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 8)).to(device)
    models = {"strata": DDP(copy.deepcopy(net), device_ids=[device.index]),
              "gloo": DDP(copy.deepcopy(net), device_ids=[device.index], process_group=gloo)}
    for name, model in models.items():
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            g = torch.Generator().manual_seed(100 * step + rank())
            x = torch.randn(16, 64, generator=g).to(device)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    got, want = (dict(models[k].module.named_parameters()) for k in ("strata", "gloo"))
    # The ranks' gradients summed in another order over 3 steps: per tensor, within the bound of
    # tests/numerics.hpp (64 sqrt(terms) steps u; 16 rows a rank), not element by element.
    bound = 64 * math.sqrt(16 * size()) * 3 * 2.0**-24
    for k in want:
        a, b = got[k].detach().cpu().double(), want[k].detach().cpu().double()
        rel = float((a - b).norm() / b.norm())
        assert rel <= bound, f"{k}: ||strata - gloo|| / ||gloo|| = {rel:.3g} > {bound:.3g}"


@gpu
@pytest.mark.parametrize("reshard", [True, False])
def test_fsdp2_on_cuda_matches_one_process(device, reshard):
    """FSDP2 on a CUDA device mesh (all_gather_into_tensor, reduce_scatter_tensor on the GPU)
    reaches the parameters of one process training the whole batch (test_training's model)."""
    want = params(train(fresh().to(device), lambda x: x.to(device)))
    model = fresh().to(device)
    mesh = init_device_mesh("cuda", (size(),))
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    assert_same(full_params(train(model, lambda x: my_shard(x).to(device))), want)
