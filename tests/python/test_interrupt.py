"""Ctrl-C (SIGINT) during Work.wait(), split(), from_env() or shrink(): it aborts the
communicators waited on (or cancels the setup) and raises KeyboardInterrupt, unless the program
handles SIGINT itself (bindings/python/interrupt.hpp); run after test_communicator.py by every
rank of the same mpirun job.
"""

import os
import signal
import threading
import time

import numpy as np
import pytest

import strata


def interrupt_rank_0(world, call):
    """Rank 0 enters call(group) on a new group alone and gets a SIGINT 0.5 s in: it raises
    KeyboardInterrupt far inside the group's 20 s deadline (it waited the whole deadline before),
    the group is aborted, and the others' call(group), made after, fails at once naming rank 0.
    Returns the group."""
    group = world.split(0, world.rank, timeout=20)
    world.barrier().wait()
    if world.rank == 0:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            call(group)
        assert time.monotonic() - began < 5
    world.barrier().wait()
    if world.rank != 0:
        began = time.monotonic()
        with pytest.raises(strata.Error) as e:
            call(group)
        assert time.monotonic() - began < 5
        assert e.value.peer == 0 and "rank 0 aborted the communicator" in str(e.value), e.value
    world.barrier().wait()
    return group


def test_ctrl_c_ends_a_wait_for_a_peer_that_never_comes(world):
    # Rank 0 waits in an all_reduce that the others join only after it; later calls fail there.
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    group = interrupt_rank_0(world, lambda g: g.all_reduce(np.ones(1 << 18)).wait())
    if world.rank == 0:
        with pytest.raises(strata.Error) as e:
            group.all_reduce(np.ones(4)).wait()
        assert e.value.code == "aborted", e.value


def test_ctrl_c_ends_a_split_that_a_peer_never_joins(world):
    # split, a collective that waits inside the call: the others may complete its all-gather
    # from rank 0's part and then wait in the new group's setup, which learns of the abort too.
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    interrupt_rank_0(world, lambda g: g.split(0, 0))


def test_ctrl_c_leaves_a_program_with_its_own_handler_alone(world):
    # A program that handles SIGINT itself (to stop after the step, say) keeps its operations: the
    # wait completes with the right sum once the peers come, and the program's handler runs.
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    seen = []
    world.barrier().wait()
    if world.rank == 0:
        previous = signal.signal(signal.SIGINT, lambda *_: seen.append(1))
        try:
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            x = np.ones(1 << 18)
            world.all_reduce(x).wait()
        finally:
            signal.signal(signal.SIGINT, previous)
        np.testing.assert_array_equal(x, np.full(1 << 18, world.size))
        assert seen == [1]
    else:
        time.sleep(1.0)
        x = np.ones(1 << 18)
        world.all_reduce(x).wait()
        np.testing.assert_array_equal(x, np.full(1 << 18, world.size))
    world.barrier().wait()


# A lone process of a two-rank torchrun-style job: Ctrl-C 0.5 s in, from_env must raise
# KeyboardInterrupt (it waited the whole STRATA_TIMEOUT before). It prints how long it took.
LONE_RANK = """
import os, signal, threading, time, strata
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
began = time.monotonic()
try:
    strata.Communicator.from_env(timeout=30)
except KeyboardInterrupt:
    print("interrupted after", time.monotonic() - began)
"""


@pytest.mark.parametrize("rank", [0, 1])
def test_ctrl_c_ends_a_from_env_that_the_other_rank_never_joins(world, rank):
    # rank 1 waits for the store rank 0 never serves; rank 0 serves it and waits for rank 1.
    import socket
    import subprocess
    import sys

    if world.rank != 0:
        pytest.skip("one rank runs the lone processes")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "STRATA_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    env.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               STRATA_TIMEOUT="30")
    out = subprocess.run([sys.executable, "-c", LONE_RANK], env=env, capture_output=True,
                         text=True, timeout=60)
    assert "interrupted after" in out.stdout, (out.stdout, out.stderr)
    assert float(out.stdout.split()[-1]) < 5, out.stdout


def test_ctrl_c_ends_a_shrink_that_the_survivors_never_join(world):
    # Rank 0 alone shrinks a group of its own (excluding nobody): it waits for the others' parts.
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    group = world.split(0, world.rank, timeout=20)
    world.barrier().wait()
    if world.rank == 0:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            group.shrink([])
        assert time.monotonic() - began < 5
    world.barrier().wait()
