"""A root's own arguments (reduce's and gather's output, scatter's input): ignored off the root,
and refused on it, by the library or by the module's conversion, so that every other rank fails
at once naming the root instead of waiting for it; run after test_collectives.py by every rank of
the same job.
"""

import time

import numpy as np
import pytest

import strata
from test_collectives import N, data, reference


def test_buffers_ignored_on_non_roots_are_not_checked(world):
    # reduce's and gather's output and scatter's input are ignored off the root: a read-only
    # or non-contiguous array there is neither refused nor written.
    rank, size = world.rank, world.size
    ignored = np.full(size * N, -3, np.int32)
    ignored.flags.writeable = False
    strided = np.zeros(2 * size * N, np.int32)[::2]
    inputs = [data(r, N, np.int32) for r in range(size)]

    out = np.zeros(N, np.int32) if rank == 0 else ignored
    world.reduce(inputs[rank], out, "sum", 0).wait()
    if rank == 0:
        np.testing.assert_array_equal(out, reference("sum", inputs, np.int32))

    root = size - 1
    out = np.zeros(size * N, np.int32) if rank == root else ignored
    world.gather(inputs[rank], out, root=root).wait()
    if rank == root:
        np.testing.assert_array_equal(out, np.concatenate(inputs))

    src = np.concatenate(inputs) if rank == 0 else strided
    out = np.zeros(N, np.int32)
    world.scatter(src, out, root=0).wait()
    np.testing.assert_array_equal(out, inputs[rank])
    np.testing.assert_array_equal(ignored, -3)
    np.testing.assert_array_equal(strided, 0)


def test_a_root_without_its_buffer_fails_every_rank_at_once(world):
    # None for scatter's input or gather's output on the root goes to the library as an empty
    # buffer, which it refuses there and tells the others of: they fail naming the root in the
    # call (a gather's senders, who may finish first, at their next), not at the deadline.
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    rank, size = world.rank, world.size
    for op in ("scatter", "gather"):
        sub = world.split(0, rank, name=op)
        block, blocks = np.zeros(N, np.float32), np.zeros(size * N, np.float32)
        t0 = time.monotonic()
        with pytest.raises(strata.Error) as e:
            if op == "scatter":
                sub.scatter(None if rank == 0 else blocks, block, root=0).wait()
            else:
                sub.gather(block, None if rank == 0 else blocks, root=0).wait()
                sub.barrier().wait()
        assert time.monotonic() - t0 < 10, "STRATA_TIMEOUT is 60 s here"
        assert e.value.code == "invalid_argument", e.value
        if rank == 0:
            assert f"has 0 elements, expected {size * N}" in str(e.value), e.value
        else:
            assert f"rank 0 refused its own arguments to {op}(f32)" in str(e.value), e.value
            assert e.value.peer == 0, e.value
    world.barrier().wait()


def test_a_root_whose_buffer_will_not_convert_fails_every_rank_at_once(world):
    # The root's own buffer refused by the module (strided, read-only): the root raises the
    # conversion's TypeError, and the others fail naming the root and why, not at the deadline.
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    rank, size = world.rank, world.size
    readonly = np.zeros(size * N, np.float32)
    readonly.flags.writeable = False
    strided = np.zeros((size * N, 2), np.float32)[:, 0]
    for op in ("scatter", "reduce", "gather"):
        sub = world.split(0, rank, name=op)
        block, blocks = np.zeros(N, np.float32), np.zeros(size * N, np.float32)
        t0 = time.monotonic()
        with pytest.raises(TypeError if rank == 0 else strata.Error) as e:
            if op == "scatter":
                sub.scatter(strided if rank == 0 else None, block, root=0).wait()
            else:
                if op == "reduce":
                    sub.reduce(block, readonly[:N] if rank == 0 else None, op="max", root=0).wait()
                else:
                    sub.gather(block, readonly if rank == 0 else None, root=0).wait()
                sub.barrier().wait()  # their senders may finish first
        assert time.monotonic() - t0 < 10, "STRATA_TIMEOUT is 60 s here"
        why = "not C-contiguous" if op == "scatter" else "is read-only"
        assert why in str(e.value), e.value
        if rank != 0:
            call = "reduce(f32, max)" if op == "reduce" else f"{op}(f32)"
            assert f"rank 0 refused its own arguments to {call}" in str(e.value), e.value
            assert e.value.code == "invalid_argument" and e.value.peer == 0, e.value
    world.barrier().wait()
