"""The Python binding's communicator: buffer lifetimes, bad arguments, ordering, the GIL,
timeouts, split, mesh, topology, abort and threads; run after test_collectives.py by every rank of
the same mpirun job (conftest.py holds the communicators both use).
"""

import ast
import gc
import pathlib
import threading
import time
import weakref

import numpy as np
import pytest

import strata

N = 37


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


def test_type_stub_matches_the_module():
    # strata/_strata.pyi is written by hand: it must list every public name of the module's
    # classes, with the module's docstrings and ReduceOp's values (max is 2, as in NCCL).
    stub = pathlib.Path(__file__).parents[2] / "bindings/python/strata/_strata.pyi"
    classes = {c.name: c for c in ast.parse(stub.read_text()).body if isinstance(c, ast.ClassDef)}
    words = lambda s: " ".join((s or "").split())  # noqa: E731
    for name in ("Error", "ReduceOp", "Work", "Communicator", "Mesh"):
        members = {}
        for n in classes[name].body:
            if isinstance(n, ast.FunctionDef):
                members[n.name] = ast.get_docstring(n)
            elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                members[(n.targets[0] if isinstance(n, ast.Assign) else n.target).id] = None
        cls = getattr(strata, name)
        missing = sorted(k for k in vars(cls) if not k.startswith("_") and k not in members)
        assert not missing, f"_strata.pyi's {name} lacks {missing}"
        for k, doc in members.items():
            if doc:
                assert words(doc) in words(getattr(cls, k).__doc__), f"{name}.{k}'s docstring"
    values = {n.targets[0].id: n.value.value
              for n in classes["ReduceOp"].body if isinstance(n, ast.Assign)}
    assert values == {op.name: op.value for op in strata.ReduceOp}


def test_a_timeout_of_zero_or_less_is_refused(world):
    # CommOptions' 0 means "the default" (or the parent's deadline) while Work.wait(timeout=0)
    # polls: from_env, split and shrink take only a finite timeout > 0, refused before any message.
    for bad in (0, 0.0, -1.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"strata.split: timeout must be a finite .* > 0, not"):
            world.split(0, world.rank, timeout=bad)
        with pytest.raises(ValueError, match="strata.shrink: timeout must be"):
            world.shrink([], timeout=bad)
        with pytest.raises(ValueError, match="strata.from_env: timeout must be"):
            strata.Communicator.from_env(timeout=bad)


def test_abort(world):
    # On a group of its own, so that world goes on: rank 0 aborts, the others' pending all_reduce
    # fails naming it, and rank 0's own later calls fail with code "aborted", as the docstring says.
    assert "'peer_failure'" not in strata.Communicator.abort.__doc__
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
        assert e.value.code == "aborted", e.value
        assert e.value.peer == 0 and "rank 0 aborted the communicator" in str(e.value), e.value
    world.barrier().wait()


def test_shrink_after_an_abort(world):
    # The last rank aborts a group; the survivors' all_reduce fails naming it, and shrink gives
    # them a group of their own, in their order, that works. Bad lists are refused by name.
    for bad, why in (([world.size], "out of range"), ([world.rank], "this rank's own")):
        with pytest.raises(strata.Error, match=why) as e:
            world.shrink(bad)
        assert e.value.code == "invalid_argument"
    sub = world.split(0, world.rank, timeout=20)
    last = world.size - 1
    world.barrier().wait()
    if world.size > 1 and world.rank == last:
        sub.abort()
    elif world.size > 1:
        with pytest.raises(strata.Error) as e:
            sub.all_reduce(np.ones(4)).wait()
        assert e.value.peer == last, e.value
        survivors = sub.shrink([last], name="survivors")
        assert (survivors.name, survivors.size, survivors.rank) == ("survivors", last, world.rank)
        order = np.zeros(last, np.int32)
        survivors.all_gather(np.array([world.rank], np.int32), order).wait()
        np.testing.assert_array_equal(order, np.arange(last, dtype=np.int32))
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


def test_symmetric_buffer_is_read_by_peers_where_it_lies(world):
    # alloc_symmetric's array, viewed as int32: an all_gather from a slice of it and an
    # all_to_all of all of it, checked element by element; the array owns the memory.
    rank, size = world.rank, world.size
    raw = world.alloc_symmetric(4 * N * size)
    assert raw.dtype == np.uint8 and raw.nbytes == 4 * N * size and not raw.any()
    a = raw.view(np.int32)
    a[:] = [rank * 1000 + i for i in range(N * size)]
    out = np.zeros(N * size, np.int32)
    world.all_gather(a[:N], out).wait()
    np.testing.assert_array_equal(out, np.concatenate([j * 1000 + np.arange(N) for j in range(size)]))
    world.all_to_all(a, out).wait()
    np.testing.assert_array_equal(
        out, np.concatenate([j * 1000 + rank * N + np.arange(N) for j in range(size)]))
    ref = weakref.ref(raw)
    del a, raw
    gc.collect()
    assert ref() is None
    if size > 1:
        with pytest.raises(strata.Error, match="every rank allocates the same"):
            world.alloc_symmetric(64 + rank)
    world.barrier().wait()
