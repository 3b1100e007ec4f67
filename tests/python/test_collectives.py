"""The Python binding's collectives against numpy references, run by every rank of an mpirun job:

    PYTHONPATH=build-py/python mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 \
        ~/.cache/strata/venv/bin/python -m pytest -q -x tests/python

Every rank runs the same tests in the same order (they are collective). Inputs are functions of
(rank, index), so each rank computes every other rank's input and the expected result itself.
"""

import numpy as np
import pytest

import strata

N = 37  # odd on purpose: no algorithm gets an evenly divisible size for free

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]
DTYPE_IDS = [np.dtype(d).name for d in DTYPES]


def ops_for(dtype):
    kind = np.dtype(dtype).kind
    if kind == "b":
        return ["sum", "prod", "min", "max", "band", "bor", "bxor"]
    if kind == "c":
        return ["sum", "prod", "avg"]
    if kind == "f":
        return ["sum", "prod", "min", "max", "avg"]
    return ["sum", "prod", "min", "max", "avg", "band", "bor", "bxor"]


def data(seed, n, dtype, op=None):
    """Rank `seed`'s input: small integers, so every reduction is exact in every dtype."""
    i = np.arange(n)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return ((i + seed) % 3 == 0) | ((i * (seed + 1)) % 5 == 1)
    if op == "prod":  # 1 or 2: a product over 4 ranks fits int8
        re, im = 1 + (i + seed) % 2, (i * 3 + seed) % 2
    else:
        re, im = (i * 3 + seed * 7) % 11, (i + 2 * seed) % 4
        if kind == "i" and op not in ("avg",):
            re = re - 5  # negatives for signed min/max/sum (avg stays >= 0: truncation is exact)
    if kind == "c":
        return (re + 1j * im).astype(dtype)
    return re.astype(dtype)


def reference(op, arrays, dtype):
    """The reduction of `arrays` (one per rank) by numpy, in `dtype`."""
    a = np.stack(arrays)
    size = len(arrays)
    if a.dtype == np.bool_ and op in ("sum", "max", "bor"):
        return np.logical_or.reduce(a)
    if a.dtype == np.bool_ and op in ("prod", "min", "band"):
        return np.logical_and.reduce(a)
    if op == "sum":
        return a.sum(axis=0, dtype=dtype)
    if op == "prod":
        return a.prod(axis=0, dtype=dtype)
    if op == "min":
        return a.min(axis=0)
    if op == "max":
        return a.max(axis=0)
    if op == "avg":
        if a.dtype.kind in "iu":  # integers truncate
            return (a.astype(np.int64).sum(axis=0) // size).astype(dtype)
        total = a.sum(axis=0, dtype=dtype)
        if a.dtype.kind == "c":  # each part divided by the size, not a complex division
            return (total.real / total.real.dtype.type(size)
                    + 1j * (total.imag / total.imag.dtype.type(size))).astype(dtype)
        return (total / dtype(size)).astype(dtype)
    if op == "band":
        return np.bitwise_and.reduce(a)
    if op == "bor":
        return np.bitwise_or.reduce(a)
    if op == "bxor":
        return np.bitwise_xor.reduce(a)
    raise AssertionError(op)


def addr(a):
    return a.__array_interface__["data"][0]


# --- every reduction of every dtype ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_all_reduce_every_op(world, dtype):
    for op in ops_for(dtype):
        inputs = [data(r, N, dtype, op) for r in range(world.size)]
        expected = reference(op, inputs, dtype)
        # out of place, op by name
        x = inputs[world.rank].copy()
        out = np.zeros(N, dtype)
        world.all_reduce(x, out, op=op).wait()
        np.testing.assert_array_equal(out, expected, err_msg=f"{op} out of place")
        np.testing.assert_array_equal(x, inputs[world.rank], err_msg=f"{op} changed its input")
        # in place, op as the enum
        world.all_reduce(x, op=getattr(strata.ReduceOp, op)).wait()
        np.testing.assert_array_equal(x, expected, err_msg=f"{op} in place")


# --- every other collective, every dtype ------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_collectives(world, dtype):
    rank, size = world.rank, world.size

    # reduce_scatter: rank r gets block r of the sum of everyone's size*N input
    inputs = [data(r, size * N, dtype) for r in range(size)]
    out = np.zeros(N, dtype)
    world.reduce_scatter(inputs[rank], out, op="sum").wait()
    np.testing.assert_array_equal(out, reference("sum", inputs, dtype)[rank * N:(rank + 1) * N])

    # all_gather: block r of the output is rank r's input
    gathered = np.zeros(size * N, dtype)
    world.all_gather(data(rank, N, dtype), gathered).wait()
    np.testing.assert_array_equal(gathered, np.concatenate([data(r, N, dtype) for r in range(size)]))

    # all_to_all: block j of rank i's input (seed i*size+j) lands in block i of rank j's output
    send = np.concatenate([data(rank * size + j, N, dtype) for j in range(size)])
    recv = np.zeros(size * N, dtype)
    world.all_to_all(send, recv).wait()
    np.testing.assert_array_equal(recv, np.concatenate([data(i * size + rank, N, dtype) for i in range(size)]))

    # all_to_allv: rank i sends (i + j) % 3 + 1 elements to rank j, packed (default displacements)
    def count(i, j):
        return (i + j) % 3 + 1
    send_counts = [count(rank, j) for j in range(size)]
    recv_counts = [count(i, rank) for i in range(size)]
    send = np.concatenate([data(100 + rank * size + j, count(rank, j), dtype) for j in range(size)])
    recv = np.zeros(sum(recv_counts), dtype)
    world.all_to_allv(send, send_counts, recv, recv_counts).wait()
    np.testing.assert_array_equal(
        recv, np.concatenate([data(100 + i * size + rank, count(i, rank), dtype) for i in range(size)]))

    # broadcast from the last rank, in place
    root = size - 1
    buf = data(rank, N, dtype)
    world.broadcast(buf, root=root).wait()
    np.testing.assert_array_equal(buf, data(root, N, dtype))

    # reduce to rank 0; the other ranks pass no output
    inputs = [data(r, N, dtype) for r in range(size)]
    out = np.zeros(N, dtype) if rank == 0 else None
    world.reduce(inputs[rank], out, "sum", 0).wait()
    if rank == 0:
        np.testing.assert_array_equal(out, reference("sum", inputs, dtype))

    # gather to rank 1 % size
    root = 1 % size
    out = np.zeros(size * N, dtype) if rank == root else None
    world.gather(data(rank, N, dtype), out, root=root).wait()
    if rank == root:
        np.testing.assert_array_equal(out, np.concatenate([data(r, N, dtype) for r in range(size)]))

    # scatter from rank 0: rank r receives block r
    src = np.concatenate([data(50 + r, N, dtype) for r in range(size)]) if rank == 0 else None
    out = np.zeros(N, dtype)
    world.scatter(src, out, root=0).wait()
    np.testing.assert_array_equal(out, data(50 + rank, N, dtype))

    # send/recv around the ring
    got = np.zeros(N, dtype)
    r = world.recv(got, (rank - 1) % size, tag=5)
    s = world.send(data(200 + rank, N, dtype), (rank + 1) % size, tag=5)
    s.wait()
    r.wait()
    np.testing.assert_array_equal(got, data(200 + (rank - 1) % size, N, dtype))
    assert r.source == (rank - 1) % size and s.source == -1

    world.barrier().wait()


def test_recv_from_any_source(world):
    # Rank 0 takes one message from each other rank, in whatever order they come.
    rank, size = world.rank, world.size
    if rank == 0:
        got = [np.zeros(N, np.int32) for _ in range(size - 1)]
        works = [world.recv(g, strata.ANY_SOURCE, tag=9) for g in got]
        sources = []
        for g, w in zip(got, works):
            w.wait()
            np.testing.assert_array_equal(g, np.full(N, 1000 + w.source, np.int32))
            sources.append(w.source)
        assert sorted(sources) == list(range(1, size))
    else:
        world.send(np.full(N, 1000 + rank, np.int32), 0, tag=9).wait()
    world.barrier().wait()


def test_send_recv_ring_sends_before_it_receives(world):
    # Every rank's send comes before its receive in one batch, as batch_isend_irecv's users write
    # a ring; then batches that fail their checks issue nothing, so the next batch on the same
    # tag still delivers its own data.
    rank, size = world.rank, world.size
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    got = np.zeros(N, np.float32)
    works = world.send_recv([("send", data(300 + rank, N, np.float32), nxt, 8),
                             ("recv", got, prv, 8)])
    assert len(works) == 2
    for w in works:
        w.wait()
    np.testing.assert_array_equal(got, data(300 + prv, N, np.float32))
    assert works[0].source == -1 and works[1].source == prv

    stray = ("send", data(400 + rank, N, np.float32), nxt, 8)  # valid, but its batch is not
    with pytest.raises(TypeError, match="op 1 is not a tuple"):
        world.send_recv([stray, ["recv", got, prv]])
    with pytest.raises(ValueError, match="op 1: kind 'sned'"):
        world.send_recv([stray, ("sned", got, prv)])
    with pytest.raises(TypeError, match="op 0 has 2 items"):
        world.send_recv([("recv", got)])
    with pytest.raises(TypeError, match="op 1: the peer is not an int"):
        world.send_recv([stray, ("recv", got, "left")])
    with pytest.raises(TypeError, match="op 1: the tag is not an int"):
        world.send_recv([stray, ("recv", got, prv, True)])
    for bad, what in ((("recv", got, 2**40), "the peer 1099511627776"),
                      (("recv", got, prv, -1), "the tag -1"),
                      (("recv", got, prv, 2**32), "the tag 4294967296")):
        with pytest.raises(OverflowError, match=f"op 1: {what} is out of range"):
            world.send_recv([stray, bad])
    with pytest.raises(strata.Error, match="peer"):
        world.send_recv([stray, ("recv", got, size)])
    with pytest.raises(TypeError, match="read-only"):
        ro = np.zeros(N, np.float32)
        ro.flags.writeable = False
        world.send_recv([stray, ("recv", ro, prv)])
    got[:] = 0  # numpy integers are taken as peer and tag, as send() takes them
    fresh = data(500 + rank, N, np.float32)
    for w in world.send_recv([("send", fresh, np.int64(nxt), np.uint32(8)),
                              ("recv", got, np.int32(prv), np.int64(8))]):
        w.wait()
    np.testing.assert_array_equal(got, data(500 + prv, N, np.float32))
    assert world.send_recv([]) == []
    world.barrier().wait()


def test_all_to_allv_explicit_displacements(world):
    rank, size = world.rank, world.size
    # Block j of the input starts at 4*j (a gap after each block); block i of the output at 5*i.
    send = np.full(4 * size, -1.0)
    for j in range(size):
        send[4 * j:4 * j + 2] = [rank * 10 + j, rank * 10 + j + 0.5]
    recv = np.full(5 * size, -7.0)
    world.all_to_allv(send, [2] * size, recv, [2] * size,
                      send_displs=[4 * j for j in range(size)],
                      recv_displs=[5 * i for i in range(size)]).wait()
    expected = np.full(5 * size, -7.0)  # the gaps are not written
    for i in range(size):
        expected[5 * i:5 * i + 2] = [i * 10 + rank, i * 10 + rank + 0.5]
    np.testing.assert_array_equal(recv, expected)


# --- no copies --------------------------------------------------------------------------------------

def test_results_land_in_the_callers_memory(world):
    size = world.size
    # A 2-D array: the element count is its size, the address never changes.
    a = np.arange(12, dtype=np.float64).reshape(3, 4) * (world.rank + 1)
    before = addr(a)
    world.all_reduce(a).wait()
    assert addr(a) == before
    np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4) * sum(range(1, size + 1)))

    # A contiguous slice of a larger array: written exactly there, its neighbours untouched.
    big = np.full(3 * N, -1, dtype=np.int32)
    view = big[N:2 * N]
    assert np.shares_memory(view, big)
    view[:] = np.arange(N)
    world.all_reduce(view, op="max").wait()
    np.testing.assert_array_equal(big[N:2 * N], np.arange(N))
    np.testing.assert_array_equal(big[:N], -1)
    np.testing.assert_array_equal(big[2 * N:], -1)

    # Out of place: the output object is the one written.
    out = np.zeros(size * 4, np.int64)
    out_addr = addr(out)
    world.all_gather(np.full(4, world.rank, np.int64), out).wait()
    assert addr(out) == out_addr
    np.testing.assert_array_equal(out, np.repeat(np.arange(size), 4))

    # The buffer protocol (no __dlpack__): a bytearray is reduced in place.
    raw = bytearray([world.rank + 1] * 8)
    world.all_reduce(raw).wait()
    assert raw == bytearray([sum(range(1, size + 1))] * 8)


def test_torch_tensor_through_dlpack(world):
    torch = pytest.importorskip("torch")
    size = world.size
    t = torch.arange(N, dtype=torch.float32) + world.rank
    ptr = t.data_ptr()
    world.all_reduce(t).wait()
    assert t.data_ptr() == ptr
    np.testing.assert_array_equal(
        t.numpy(), sum(np.arange(N, dtype=np.float32) + r for r in range(size)))

    # bfloat16 (no numpy dtype): small integers are exact
    b = torch.arange(N, dtype=torch.bfloat16) + world.rank
    ptr = b.data_ptr()
    world.all_reduce(b, op="max").wait()
    assert b.data_ptr() == ptr
    np.testing.assert_array_equal(b.float().numpy(), np.arange(N, dtype=np.float32) + size - 1)

    # torch output, numpy input
    out = torch.zeros(size * 3, dtype=torch.int64)
    world.all_gather(np.full(3, world.rank, np.int64), out).wait()
    np.testing.assert_array_equal(out.numpy(), np.repeat(np.arange(size), 3))

    with pytest.raises(TypeError, match="not C-contiguous"):
        world.all_reduce(torch.zeros(4, 6).t())
    world.barrier().wait()


def test_torch_lazy_conj_and_neg_views_are_refused(world):
    # Their memory holds the unconjugated, unnegated values: refused, as torch's __dlpack__ does.
    torch = pytest.importorskip("torch")
    rank, size = world.rank, world.size
    z = torch.tensor([1 + (2 + rank) * 1j, rank - 1j], dtype=torch.complex64)
    out = torch.zeros(2, dtype=torch.complex64)
    with pytest.raises(TypeError, match=r"input is a lazy conjugate.*resolve_conj\(\)"):
        world.all_reduce(z.conj(), out)
    with pytest.raises(TypeError, match="all_reduce: output is a lazy conjugate"):
        world.all_reduce(z, torch.zeros(2, dtype=torch.complex64).conj())
    neg = z.conj().imag  # a float32 view of the imaginary parts, negated lazily
    assert neg.is_neg()
    with pytest.raises(TypeError, match=r"input \(in place\) is a lazy negative.*resolve_neg\(\)"):
        world.all_reduce(neg, op="max")
    with pytest.raises(TypeError, match="send: buffer is a lazy conjugate"):
        world.send(z.conj(), (rank + 1) % size)
    world.all_reduce(z.conj().resolve_conj(), out).wait()
    np.testing.assert_array_equal(
        out.numpy(), sum(np.array([1 - (2 + r) * 1j, r + 1j], np.complex64) for r in range(size)))
    m = neg.resolve_neg()
    world.all_reduce(m, op="max").wait()
    np.testing.assert_array_equal(m.numpy(), np.array([-2, 1], np.float32))
