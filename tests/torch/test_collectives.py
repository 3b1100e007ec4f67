"""torch.distributed on the strata backend: every operation, ReduceOp and dtype against a
reference each rank computes itself (inputs are functions of (rank, index)).

    PYTHONPATH=build/python build/bin/strata-run -n 3 ~/.cache/strata/venv/bin/python -m pytest -q tests/torch
"""

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

N = 37  # odd on purpose

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
COMPLEX = [torch.complex64, torch.complex128]
DTYPES = FLOATS + INTS + COMPLEX + [torch.bool]
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"]


def rank():
    return dist.get_rank()


def size():
    return dist.get_world_size()


def data(r, n, dtype, op="SUM"):
    """Rank r's input: small integers, so every reduction is exact in every dtype."""
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return ((i + r) % 3 == 0) | ((i * (r + 1)) % 5 == 1)
    if op == "PRODUCT":
        re, im = 1 + (i + r) % 2, (i * 3 + r) % 2
    else:
        re, im = (i * 3 + r * 7) % 11, (i + 2 * r) % 4
        if dtype.is_signed and not dtype.is_complex and op not in ("AVG",):
            re = re - 5
    if dtype.is_complex:
        return torch.complex(re.double(), im.double()).to(dtype)
    return re.to(dtype)


def defined(op, dtype):
    if dtype.is_complex:
        return op in ("SUM", "AVG", "PREMUL_SUM")  # torch itself refuses the rest
    if dtype.is_floating_point:
        return op not in ("BAND", "BOR", "BXOR")
    if dtype == torch.bool:
        return op not in ("AVG", "PREMUL_SUM")
    return op != "PREMUL_SUM"


FACTOR = 0.5


def reduce_op(op):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(FACTOR)
    return getattr(dist.ReduceOp, op)


def reference(op, inputs, dtype):
    """The reduction computed here, in a wide type, then cast to dtype as Strata's result is."""
    wide = torch.complex128 if dtype.is_complex else (
        torch.float64 if dtype.is_floating_point else torch.int64)
    a = torch.stack([t.to(wide) for t in inputs])
    if dtype == torch.bool:
        b = torch.stack(inputs)
        return {"SUM": b.any(0), "PRODUCT": b.all(0), "MIN": b.all(0), "MAX": b.any(0),
                "BAND": b.all(0), "BOR": b.any(0), "BXOR": b.sum(0) % 2 == 1}[op]
    if op == "SUM":
        out = a.sum(0)
    elif op == "PREMUL_SUM":
        out = (a * FACTOR).sum(0)
    elif op == "AVG":
        s = a.sum(0)
        if dtype.is_complex:  # each part divided, rounded once (torch's complex division is not)
            out = torch.complex(s.real / len(inputs), s.imag / len(inputs))
        elif dtype.is_floating_point:
            out = s / len(inputs)
        else:
            out = torch.div(s, len(inputs), rounding_mode="trunc")
    elif op == "PRODUCT":
        out = a.prod(0)
    elif op == "MIN":
        out = a.min(0).values
    elif op == "MAX":
        out = a.max(0).values
    else:
        fold = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or,
                "BXOR": torch.bitwise_xor}[op]
        out = a[0]
        for t in a[1:]:
            out = fold(out, t)
    return out.to(dtype)


def assert_equal(got, want, exact=True):
    """Bit for bit: the inputs are small integers, so every sum, product and premultiplication is
    exact in every dtype, and an average is one rounded division, as in the reference (computed
    wide, rounded once). `exact=False` (NCCL on a GPU, which may average and premultiply in the
    narrow type): within float16/bfloat16's rounding."""
    assert got.dtype == want.dtype
    if exact or not (want.is_floating_point() or want.is_complex()):
        assert torch.equal(got, want), (got, want)
    elif want.dtype in (torch.float16, torch.bfloat16):
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    else:
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_all_reduce_every_op_and_dtype(op, dtype):
    t = data(rank(), N, dtype, op)
    if not defined(op, dtype):
        refuser = "does not support" if dtype.is_complex else "strata"
        with pytest.raises(ValueError, match=refuser):
            dist.all_reduce(t, op=reduce_op(op))
        return
    dist.all_reduce(t, op=reduce_op(op))
    want = reference(op, [data(r, N, dtype, op) for r in range(size())], dtype)
    assert_equal(t, want)


def test_all_reduce_non_contiguous_writes_back_only_the_view():
    base = torch.arange(4 * N, dtype=torch.float32).reshape(4, N) + rank()
    before = base.clone()
    view = base[:, ::2]
    assert not view.is_contiguous()
    dist.all_reduce(view)
    want = sum(torch.arange(4 * N, dtype=torch.float32).reshape(4, N)[:, ::2] + r
               for r in range(size()))
    assert torch.equal(base[:, ::2], want)
    assert torch.equal(base[:, 1::2], before[:, 1::2])


def test_all_reduce_in_place_keeps_the_storage():
    t = torch.ones(1000)
    ptr = t.data_ptr()
    dist.all_reduce(t)
    assert t.data_ptr() == ptr and torch.equal(t, torch.full((1000,), float(size())))


def test_async_work_future_holds_the_outputs():
    t = torch.full((N,), float(rank() + 1))
    work = dist.all_reduce(t, async_op=True)
    value = work.get_future().wait()
    assert work.is_completed() and work.is_success()
    assert len(value) == 1 and value[0] is not None
    assert torch.equal(value[0], torch.full((N,), float(sum(range(1, size() + 1)))))
    assert torch.equal(work.result()[0], value[0])


def test_future_then_runs_without_a_waiter():
    t = torch.full((N,), 2.0)
    fut = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 10)
    assert torch.equal(fut.wait(), torch.full((N,), 20.0 * size()))


@pytest.mark.parametrize("n", [2, 1 << 20])  # the immediate path's size, and a staged one
def test_async_work_returns_before_the_peers_issue_it(n):
    # As gloo's and NCCL's: rank 0's async all_reduce returns at once, and only then (told through
    # the store) do the others call theirs. Run on the issuing thread, it would wait for them.
    store = dist.distributed_c10d._get_default_store()
    key = f"async-issued-{n}"
    t = torch.full((n,), float(rank() + 1))
    if rank() == 0:
        work = dist.all_reduce(t, async_op=True)
        assert not work.is_completed()
        store.set(key, "1")
    else:
        store.wait([key], timedelta(seconds=20))
        work = dist.all_reduce(t, async_op=True)
    work.wait()
    assert torch.equal(t, torch.full((n,), float(sum(range(1, size() + 1)))))


def test_many_outstanding_operations_complete_in_order():
    ts = [torch.full((N,), float(i + rank())) for i in range(50)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for i, (w, t) in enumerate(zip(works, ts)):
        w.wait()
        assert torch.equal(t, torch.full((N,), float(i * size() + sum(range(size())))))


@pytest.mark.parametrize("root", [0, -1])
def test_broadcast(root):
    root = root % size()
    t = data(rank(), N, torch.float64) if rank() == root else torch.zeros(N, dtype=torch.float64)
    dist.broadcast(t, src=root)
    assert torch.equal(t, data(root, N, torch.float64))


@pytest.mark.parametrize("op", ["SUM", "MAX", "PREMUL_SUM"])
def test_reduce_to_root_leaves_the_others_unchanged(op):
    root = size() - 1
    t = data(rank(), N, torch.float32)
    dist.reduce(t, dst=root, op=reduce_op(op))
    want = reference(op, [data(r, N, torch.float32) for r in range(size())], torch.float32)
    assert_equal(t, want if rank() == root else data(rank(), N, torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.complex64],
                         ids=str)
def test_all_gather_list_and_into_tensor(dtype):
    outs = [torch.zeros(N, dtype=dtype) for _ in range(size())]
    dist.all_gather(outs, data(rank(), N, dtype))
    for r in range(size()):
        assert torch.equal(outs[r], data(r, N, dtype))
    flat = torch.zeros(size() * N, dtype=dtype)
    dist.all_gather_into_tensor(flat, data(rank(), N, dtype))
    assert torch.equal(flat, torch.cat([data(r, N, dtype) for r in range(size())]))


def test_all_gather_into_a_non_contiguous_output():
    out = torch.zeros(N, size() * 2)[:, ::2].t()  # (size, N), not contiguous
    dist.all_gather_into_tensor(out, data(rank(), N, torch.float32))
    assert torch.equal(out, torch.stack([data(r, N, torch.float32) for r in range(size())]))


def test_coalesced_all_gather_and_reduce_scatter():
    ins = [data(rank(), N, torch.float32), data(rank(), 5, torch.float32)]
    outs = [torch.zeros(size() * N), torch.zeros(size() * 5)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    assert torch.equal(outs[0], torch.cat([data(r, N, torch.float32) for r in range(size())]))
    assert torch.equal(outs[1], torch.cat([data(r, 5, torch.float32) for r in range(size())]))
    big = [data(rank(), size() * 4, torch.float64), data(rank(), size() * 3, torch.float64)]
    res = [torch.zeros(4, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(res, big):
            dist.reduce_scatter_tensor(o, i)
    cm.wait()
    for o, n in zip(res, (4, 3)):
        full = reference("SUM", [data(r, size() * n, torch.float64) for r in range(size())],
                         torch.float64)
        assert torch.equal(o, full[rank() * n:(rank() + 1) * n])


def test_all_reduce_coalesced():
    ts = [data(rank(), N, torch.float32), data(rank(), 3, torch.float32)[::2]]
    dist.all_reduce_coalesced(ts)
    for t, n in zip(ts, (N, 3)):
        full = reference("SUM", [data(r, n, torch.float32) for r in range(size())],
                         torch.float32)
        assert torch.equal(t, full if n == N else full[::2])


@pytest.mark.parametrize("op", ["SUM", "AVG", "MIN", "PREMUL_SUM"])
def test_reduce_scatter_list_and_tensor(op):
    n = 6
    full = [data(r, size() * n, torch.float64) for r in range(size())]
    want = reference(op, full, torch.float64)[rank() * n:(rank() + 1) * n]
    mine = data(rank(), size() * n, torch.float64)
    before = mine.clone()
    out = torch.zeros(n, dtype=torch.float64)
    dist.reduce_scatter_tensor(out, mine, op=reduce_op(op))
    assert_equal(out, want)
    assert torch.equal(mine, before), "the input must stay as it was"
    out = torch.zeros(n, dtype=torch.float64)
    dist.reduce_scatter(out, list(mine.chunk(size())), op=reduce_op(op))
    assert_equal(out, want)


def test_all_to_all_single_even_and_uneven():
    n = 3
    inp = torch.arange(size() * n, dtype=torch.float32) + 100 * rank()
    out = torch.zeros(size() * n)
    dist.all_to_all_single(out, inp)
    want = torch.cat([torch.arange(rank() * n, (rank() + 1) * n, dtype=torch.float32) + 100 * r
                      for r in range(size())])
    assert torch.equal(out, want)
    # rank r sends (r + j + 1) rows of 2 to rank j
    send = [rank() + j + 1 for j in range(size())]
    recv = [r + rank() + 1 for r in range(size())]
    inp = torch.cat([torch.full((c, 2), float(rank() * 10 + j)) for j, c in enumerate(send)])
    out = torch.zeros(sum(recv), 2)
    dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send)
    want = torch.cat([torch.full((c, 2), float(r * 10 + rank())) for r, c in enumerate(recv)])
    assert torch.equal(out, want)


def test_all_to_all_list_with_different_sizes():
    ins = [torch.full((rank() + j + 1,), float(rank() * 10 + j)) for j in range(size())]
    outs = [torch.zeros(r + rank() + 1) for r in range(size())]
    dist.all_to_all(outs, ins)
    for r in range(size()):
        assert torch.equal(outs[r], torch.full((r + rank() + 1,), float(r * 10 + rank())))


def sparse_input(r, shape):
    """Rank r's sparse tensor: uncoalesced (row r twice), one dense dim; rank 1 has no entries."""
    if r == 1:
        return torch.sparse_coo_tensor(torch.zeros((1, 0), dtype=torch.int64),
                                       torch.zeros((0, shape[1])), shape)
    idx = torch.tensor([[r, (r + 2) % shape[0], r]])
    val = torch.arange(3 * shape[1], dtype=torch.float32).reshape(3, shape[1]) + 10 * r
    return torch.sparse_coo_tensor(idx, val, shape)


def test_sparse_all_reduce_sums_every_ranks_entries():
    shape = (size() + 3, 2)
    t = sparse_input(rank(), shape)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    want = sum(sparse_input(r, shape).to_dense() for r in range(size()))
    assert t.is_sparse and t.is_coalesced()
    assert torch.equal(t.to_dense(), want)
    assert torch.equal(work.get_future().value()[0].to_dense(), want)


def test_sparse_all_reduce_of_different_shapes_or_dtypes_fails_on_every_rank():
    if size() < 2:
        pytest.skip("needs 2 ranks")
    shape = (5, 2) if rank() == 1 else (4, 2)
    with pytest.raises(ValueError, match=r"rank 1 passed a Float tensor of shape \[5, 2\].*"
                                         r"rank 0 a Float tensor of shape \[4, 2\]"):
        dist.all_reduce(sparse_input(rank(), shape))
    t = sparse_input(rank(), (4, 2))
    if rank() == 1:
        t = t.double()
    with pytest.raises(ValueError, match=r"rank 1 passed a Double tensor .* rank 0 a Float tensor"):
        dist.all_reduce(t)
    t = torch.ones(4)  # and the group goes on
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(size())))


def test_barrier_and_subgroups():
    dist.barrier()
    evens = [r for r in range(size()) if r % 2 == 0]
    odds = [r for r in range(size()) if r % 2 == 1]
    groups = [dist.new_group(evens), dist.new_group(odds)]  # every rank creates both
    mine = groups[rank() % 2]
    members = evens if rank() % 2 == 0 else odds
    t = torch.full((N,), float(rank()))
    dist.all_reduce(t, group=mine)
    assert torch.equal(t, torch.full((N,), float(sum(members))))
    assert dist.get_backend(mine) == "strata"
    for g in groups:
        dist.destroy_process_group(g)


def test_monitored_barrier_names_the_missing_rank():
    dist.monitored_barrier(timeout=timedelta(seconds=20))
    dist.monitored_barrier(timeout=timedelta(seconds=20), wait_all_ranks=True)
    g = dist.new_group()  # its own group: the failed barrier leaves receives behind
    if rank() == 0:
        with pytest.raises(dist.DistBackendError,
                           match="Rank 1 failed to pass monitoredBarrier in 1000 ms"):
            dist.monitored_barrier(g, timeout=timedelta(seconds=1))
    elif rank() > 1:
        with pytest.raises(dist.DistBackendError,
                           match=f"Rank {rank()} successfully reached monitoredBarrier"):
            dist.monitored_barrier(g, timeout=timedelta(seconds=3))
    dist.barrier()
    dist.destroy_process_group(g)


def test_profiler_names_every_operation():
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        dist.all_reduce(torch.ones(8))
        dist.broadcast(torch.ones(8), 0)
        dist.all_gather_into_tensor(torch.zeros(8 * size()), torch.ones(8))
        dist.barrier()
    names = {e.name for e in prof.events()}
    for op in ("strata:all_reduce", "strata:broadcast", "strata:all_gather_into_tensor",
               "strata:barrier"):
        assert op in names, sorted(n for n in names if "strata" in n)


def test_bad_input_is_refused_before_anything_moves():
    with pytest.raises(TypeError, match="strata all_reduce: dtype UInt16 is not supported"):
        dist.all_reduce(torch.zeros(4, dtype=torch.uint16))
    with pytest.raises(ValueError, match="sparse tensors are summed only"):
        dist.all_reduce(torch.zeros(4).to_sparse(), op=dist.ReduceOp.MAX)
    with pytest.raises(ValueError, match="needs one list of"):
        dist.all_gather([torch.zeros(4)] * (size() + 1), torch.zeros(4))
    with pytest.raises(ValueError, match="splits sum to"):
        dist.all_to_all_single(torch.zeros(size()), torch.zeros(size()),
                               input_split_sizes=[size() + 1] + [0] * (size() - 1))
    with pytest.raises(ValueError, match="PREMUL_SUM takes floating-point"):
        dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist._make_nccl_premul_sum(2.0))
    # The group still works after every refusal.
    t = torch.ones(4)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(size())))
