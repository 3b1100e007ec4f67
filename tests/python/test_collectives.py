"""The Python binding against numpy references, run by every rank of an mpirun job:

    PYTHONPATH=build-py/python mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 \
        ~/.cache/strata/venv/bin/python -m pytest -q -x tests/python

Every rank runs the same tests in the same order (they are collective). Inputs are functions of
(rank, index), so each rank computes every other rank's input and the expected result itself.
"""

import gc
import os
import threading
import time
import weakref

os.environ.setdefault("STRATA_TIMEOUT", "60")  # a hung test fails within a minute

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


@pytest.fixture(scope="module")
def world():
    return strata.Communicator.from_env()


@pytest.fixture(scope="module")
def side(world):
    """A second communicator over the same ranks, to signal while `world` has work pending."""
    return world.split(0, world.rank, name="side")


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


def test_work_keeps_buffers_alive(world):
    a = np.ones(1 << 16, np.float32)
    ref = weakref.ref(a)
    w = world.all_reduce(a)
    del a
    gc.collect()
    assert ref() is not None, "the Work must hold the buffer"
    w.wait()
    del w
    gc.collect()
    assert ref() is None, "the buffer is released with the Work"


def test_dropped_work_parks_its_buffer(world, side):
    # Rank 0 drops an unfinished recv: its buffer must stay alive until the recv completes, because
    # the transport still writes into it. Rank 1 sends only after rank 0 has looked.
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    if world.rank == 0:
        buf = np.zeros(N)
        ref = weakref.ref(buf)
        world.recv(buf, 1, tag=77)  # the Work is dropped at once
        del buf
        gc.collect()
        assert ref() is not None, "an unfinished operation's buffer was freed"
    side.barrier().wait()
    if world.rank == 1:
        world.send(np.arange(N, dtype=np.float64), 0, tag=77).wait()
    world.barrier().wait()  # issue order: the recv has completed when this has
    world.barrier().wait()  # issuing this one released the finished recv's buffer
    if world.rank == 0:
        gc.collect()
        assert ref() is None


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


# --- bad buffers: TypeError before anything moves ---------------------------------------------------

def test_bad_buffers_raise_before_communicating(world):
    # Only rank 0 makes the bad calls: had any of them issued anything, the all_reduce below would
    # be matched against it on rank 0 only and fail or give wrong values.
    if world.rank == 0:
        good = np.zeros(8, np.float32)
        with pytest.raises(TypeError, match="float128"):
            world.all_reduce(np.zeros(8, np.longdouble))
        with pytest.raises(TypeError, match="object"):
            world.all_reduce(np.array([object()] * 8))
        with pytest.raises(TypeError, match="uint16"):
            world.all_reduce(np.zeros(8, np.uint16))
        with pytest.raises(TypeError, match="not C-contiguous"):
            world.all_reduce(np.zeros(16, np.float32)[::2])
        with pytest.raises(TypeError, match="not C-contiguous"):
            world.all_gather(good, np.zeros((world.size * 8, 2), np.float32)[:, 0])
        ro = np.zeros(8, np.float32)
        ro.flags.writeable = False
        with pytest.raises(TypeError, match="read-only"):
            world.all_reduce(ro)
        with pytest.raises(TypeError, match="read-only"):
            world.all_reduce(good, ro)
        with pytest.raises(TypeError, match="read-only"):
            world.recv(bytes(8), 1 % world.size)
        with pytest.raises(TypeError, match="DLPack or the"):
            world.all_reduce([1.0, 2.0])
        with pytest.raises(ValueError, match="unknown reduction"):
            world.all_reduce(good, op="median")
        # The enum's values are the C ABI's (strata.h) and NCCL's.
        c_values = dict(sum=0, prod=1, max=2, min=3, avg=4, band=5, bor=6, bxor=7)
        assert {op.name: op.value for op in strata.ReduceOp} == c_values
        # Numbers are refused, not read as some enum's values (2 was min here, max in C).
        for bad in (2, True, 99, 1.0):
            with pytest.raises(TypeError, match="op must be a strata.ReduceOp or its name"):
                world.all_reduce(good, op=bad)
        with pytest.raises(ValueError, match="output is required on the root"):
            world.gather(good, None, root=0)
    # A read-only input is fine where it is only read.
    src = np.full(8, world.rank + 1, np.int32)
    src.flags.writeable = False
    out = np.zeros(8, np.int32)
    world.all_reduce(src, out).wait()
    np.testing.assert_array_equal(out, sum(range(1, world.size + 1)))


def test_invalid_argument_is_a_strata_error(world):
    # Counts that do not fit: rejected by the library on this rank, before anything is queued.
    with pytest.raises(strata.Error) as e:
        world.all_reduce(np.zeros(4), np.zeros(5))
    assert isinstance(e.value, RuntimeError)
    assert e.value.code == "invalid_argument"
    assert e.value.rank == world.rank
    assert e.value.group == "world"
    assert e.value.op == "all_reduce"
    assert "expected 4" in str(e.value)
    a = np.ones(3, np.int64)
    world.all_reduce(a).wait()
    np.testing.assert_array_equal(a, world.size)


# --- asynchrony, the GIL, errors from the wire -------------------------------------------------------

def test_outstanding_works_complete_in_order(world):
    size = world.size
    a = np.full(1 << 14, world.rank, np.float64)
    b = np.full(3, world.rank, np.int32)
    gathered = np.zeros(3 * size, np.int32)
    w1 = world.all_reduce(a)
    w2 = world.all_gather(b, gathered)
    w2.wait()
    assert w1.test(), "operations on one communicator complete in issue order"
    w1.wait()
    assert w1.elapsed_seconds >= 0 and w2.elapsed_seconds >= 0
    np.testing.assert_array_equal(a, float(sum(range(size))))
    np.testing.assert_array_equal(gathered, np.repeat(np.arange(size), 3))


def test_wait_releases_the_gil(world):
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    world.barrier().wait()
    if world.rank == 0:
        ticks, stop = [], threading.Event()

        def ticker():
            while not stop.is_set():
                ticks.append(time.monotonic())
                time.sleep(0.001)

        buf = np.zeros(4)
        w = world.recv(buf, 1, tag=11)
        thread = threading.Thread(target=ticker)
        thread.start()
        t0 = time.monotonic()
        w.wait()  # rank 1 sends after 0.3 s
        t1 = time.monotonic()
        stop.set()
        thread.join()
        during = [t for t in ticks if t0 < t < t1]
        assert t1 - t0 > 0.1, "the recv did not wait for the delayed send"
        assert len(during) >= 5, f"only {len(during)} ticks in {t1 - t0:.3f} s: wait holds the GIL"
        np.testing.assert_array_equal(buf, [1, 2, 3, 4])
    elif world.rank == 1:
        time.sleep(0.3)
        world.send(np.array([1.0, 2, 3, 4]), 0, tag=11).wait()
    world.barrier().wait()


def test_timeout_error_then_completion(world, side):
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    buf = np.zeros(N, np.int16)
    if world.rank == 0:
        w = world.recv(buf, 1, tag=3)  # nobody sends yet
        with pytest.raises(strata.Error) as e:
            w.wait(timeout=0.05)
        assert e.value.code == "timeout"
        assert e.value.rank == 0
        assert e.value.peer == 1
        assert e.value.op == "recv"
        assert e.value.group == "world"
    side.barrier().wait()  # now rank 1 sends, and the same recv completes
    if world.rank == 1:
        world.send(np.arange(N, dtype=np.int16), 0, tag=3).wait()
    if world.rank == 0:
        w.wait()
        np.testing.assert_array_equal(buf, np.arange(N, dtype=np.int16))
    world.barrier().wait()


# --- groups, mesh, topology -------------------------------------------------------------------------

def test_split(world):
    rank, size = world.rank, world.size
    sub = world.split(rank % 2, key=-rank)  # reversed order inside each color
    members = sorted((r for r in range(size) if r % 2 == rank % 2), reverse=True)
    assert sub.size == len(members)
    assert sub.rank == members.index(rank)
    x = np.array([rank], np.int64)
    sub.all_reduce(x).wait()
    assert x[0] == sum(members)

    none_for_0 = world.split(-1 if rank == 0 else 0, key=rank)
    if rank == 0:
        assert none_for_0 is None
    else:
        assert none_for_0.size == size - 1 and none_for_0.rank == rank - 1
    world.barrier().wait()


def test_mesh(world):
    rank, size = world.rank, world.size
    if size % 2:
        pytest.skip("tp=2 needs an even world")
    mesh = strata.Mesh(world, tp=2)
    assert mesh.shape == {"tp": 2, "cp": 1, "ep": 1, "dp": size // 2, "pp": 1}
    assert mesh.coord("tp") == rank % 2
    assert mesh.coord("dp") == rank // 2
    tp = mesh.group("tp")
    assert (tp.size, tp.rank) == (2, rank % 2)
    assert mesh.group_ranks("tp") == [rank - rank % 2, rank - rank % 2 + 1]
    x = np.array([rank], np.int64)
    tp.all_reduce(x).wait()
    assert x[0] == 2 * (rank - rank % 2) + 1
    dpcp = mesh.group(("dp", "cp"))
    assert (dpcp.size, dpcp.rank) == (size // 2, rank // 2)
    y = np.array([rank], np.int64)
    dpcp.all_reduce(y).wait()
    assert y[0] == sum(r for r in range(size) if r % 2 == rank % 2)
    with pytest.raises(ValueError, match="unknown dimension"):
        mesh.coord("xx")


def test_topology(world):
    node = strata.node_topology()
    for key in ("id", "hostname", "source", "numa", "devices", "links"):
        assert key in node
    assert node["devices"], "a node has at least one cpu device"
    for d in node["devices"]:
        assert {"kind", "name", "index"} <= d.keys()
        assert d["kind"] in ("cpu", "gpu", "nic", "nvswitch")
    for link in node["links"]:
        assert {"a", "b", "class", "bandwidth_gbs", "latency_us"} <= link.keys()
    job = world.job_topology()
    assert set(job) == {"nodes", "ranks", "node_of_rank"}
    assert [r["rank"] for r in job["ranks"]] == list(range(world.size))
    assert len(job["node_of_rank"]) == world.size
    assert all(0 <= n < len(job["nodes"]) for n in job["node_of_rank"])


def test_module_surface(world):
    assert strata.__version__ == "0.1.0"
    names = [name for name, _ in strata.library_versions()]
    assert names == ["Strata", "MPI", "UCX", "hwloc", "libxml2"]
    assert strata.library_versions()[0] == ("Strata", strata.__version__)
    assert issubclass(strata.Error, RuntimeError)
    assert world.name == "world" and 0 <= world.rank < world.size
    world.all_reduce(np.zeros(2, np.int8)).wait()
    assert "all_reduce" in world.flight_record()


def test_abort(world):
    # On a group of its own, so that world goes on: rank 0 aborts, the others' pending all_reduce
    # fails naming it, and rank 0's own later calls fail with code "aborted".
    sub = world.split(0, world.rank, timeout=20)
    world.barrier().wait()
    if world.rank == 0:
        sub.abort()
        with pytest.raises(strata.Error) as e:
            sub.all_reduce(np.ones(4)).wait()
        assert e.value.code == "aborted"
    elif world.size > 1:
        with pytest.raises(strata.Error) as e:
            sub.all_reduce(np.ones(4)).wait()
        assert e.value.code in ("peer_failure", "aborted"), e.value
        assert e.value.peer == 0 and "rank 0" in str(e.value), e.value
    world.barrier().wait()


def test_check_health_learns_of_an_abort_without_an_operation(world):
    # Rank 0 aborts a group of its own; the others learn it from check_health alone (a failure
    # notice, no operation of theirs), within 10 s, naming rank 0.
    sub = world.split(0, world.rank, timeout=20)
    assert sub.check_health() is None  # healthy
    world.barrier().wait()
    if world.rank == 0:
        sub.abort()
    elif world.size > 1:
        give_up = time.monotonic() + 10
        with pytest.raises(strata.Error) as e:
            while time.monotonic() < give_up:
                sub.check_health()
        assert e.value.code in ("peer_failure", "aborted"), e.value
        assert e.value.peer == 0 and "rank 0" in str(e.value), e.value
    world.barrier().wait()


def test_another_threads_collective_is_refused_until_handed_over(world):
    # The world was made by the main thread: another thread's all_reduce is refused before it
    # moves anything; handed the issuing on every rank, that thread runs them; then back.
    sub = world.split(0, world.rank)
    seen = {}

    def other():
        try:
            sub.all_reduce(np.ones(4)).wait()
        except strata.Error as e:
            seen["error"] = e
        sub.issue_from_this_thread()
        v = np.ones(4)
        sub.all_reduce(v).wait()
        seen["sum"] = v

    t = threading.Thread(target=other)
    t.start()
    t.join()
    e = seen["error"]
    assert e.code == "invalid_argument" and "one thread issues" in str(e), e
    np.testing.assert_array_equal(seen["sum"], np.full(4, float(world.size)))
    sub.issue_from_this_thread()
    sub.barrier().wait()
