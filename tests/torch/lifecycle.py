"""The strata backend's lifecycle, each scenario in its own processes (spawned here, so that a
rank can die without a launcher stopping the rest):

  reinit  init, use and destroy the default group 4 times in one process: no thread, file
          descriptor or listening port is left behind after the first round;
  reinit_one_store  the same, 3 times over one file:// store, a new_group each round: torch
          hands Strata the store it used before (issue 34);
  kill    rank 2 of 3 dies by SIGKILL mid-job: the others' next collective raises
          DistBackendError naming rank 2, well within the timeout;
  exit    ranks leave without destroy_process_group, one with an operation in flight: every
          process exits 0, within seconds.
  late    over a file:// store (FileStore says "Wait timeout" in its own way), a rank that
          starts a second after the other still joins;
  quiet   over tcp://, a rank 3 s late at init_process_group and again at new_group: the waiting
          rank's stderr holds no c10d timeout line (it held 24 per such wait: issue 34).

    PYTHONPATH=build/python ~/.cache/strata/venv/bin/python tests/torch/lifecycle.py [scenario...]
"""

import multiprocessing as mp
import os
import signal
import socket
import sys
import time
import traceback
from datetime import timedelta

TIMEOUT_S = 60  # every scenario must finish well inside this


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init(rank, size, port, init_method=None):
    import torch.distributed as dist

    import strata.torch  # noqa: F401

    dist.init_process_group("strata", init_method=init_method or f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=size, timeout=timedelta(seconds=TIMEOUT_S))
    return dist


def resources():
    """(threads, open fds, listening TCP ports) of this process."""
    threads = len(os.listdir("/proc/self/task"))
    fds = len(os.listdir("/proc/self/fd"))
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    listening = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                listening += cols[3] == "0A" and cols[9] in inodes
    return threads, fds, listening


def reinit(rank, size, ports):
    import torch

    seen = []
    for port in ports:
        dist = init(rank, size, port)
        t = torch.ones(1000)
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((1000,), float(size)))
        dist.destroy_process_group()
        time.sleep(0.2)  # let exiting threads finish
        seen.append(resources())
    assert len(set(seen[1:])) == 1, f"rank {rank}: threads/fds/listening per round {seen}"
    return f"rank {rank}: rounds left {seen[-1]} (threads, fds, listening ports)"


def reinit_one_store(rank, size, path):
    import torch

    for round_ in range(1, 4):
        dist = init(rank, size, None, init_method=f"file://{path}")
        t = torch.full((1000,), float(round_ * (rank + 1)))
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((1000,), float(round_ * size * (size + 1) // 2)))
        group = dist.new_group(list(range(size)))
        dist.all_reduce(t, group=group)
        assert torch.equal(t, torch.full((1000,), float(round_ * size * size * (size + 1) // 2)))
        dist.destroy_process_group()
    return f"rank {rank}: 3 rounds over one store"


def kill(rank, size, port):
    import torch

    dist = init(rank, size, port)
    t = torch.ones(10)
    dist.all_reduce(t)
    if rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)  # rank 2 is surely gone
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1 << 16))
    except dist.DistBackendError as e:
        took = time.monotonic() - start
        assert "rank 2" in str(e) or "peer 2" in str(e), f"rank {rank}: {e}"
        assert took < TIMEOUT_S / 2, f"rank {rank}: noticed after {took:.1f} s"
        os._exit(0)  # the group is broken: leave without a collective teardown
    raise AssertionError(f"rank {rank}: all_reduce with a dead peer did not raise")


def leave(rank, size, port):
    import torch

    dist = init(rank, size, port)
    t = torch.ones(10)
    dist.all_reduce(t)
    dist.barrier()
    if rank == 0:
        dist.all_reduce(torch.ones(100), async_op=True)  # in flight, never waited for
    return f"rank {rank}: leaving without destroy_process_group"


def late(rank, size, path):
    import torch

    import torch.distributed  # noqa: F401  (imported before the wait, as by a real trainer)

    import strata.torch  # noqa: F401

    if rank == 1:
        time.sleep(1.0)
    dist = init(rank, size, None, init_method=f"file://{path}")
    t = torch.ones(10)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((10,), float(size)))
    dist.destroy_process_group()
    return f"rank {rank}: joined" + (" a second late" if rank == 1 else "")


def quiet(rank, size, port):
    import tempfile

    import torch

    # This process's stderr (fd 2, where c10d logs) into a file, read back at the end.
    log = tempfile.TemporaryFile()
    os.dup2(log.fileno(), 2)
    if rank == 1:
        time.sleep(3)
    dist = init(rank, size, port)
    if rank == 1:
        time.sleep(3)
    group = dist.new_group(list(range(size)))
    t = torch.ones(10)
    dist.all_reduce(t, group=group)
    assert torch.equal(t, torch.full((10,), float(size)))
    dist.destroy_process_group()
    log.seek(0)
    lines = [ln for ln in log.read().decode(errors="replace").splitlines()
             if "waitForInput" in ln or "likely a timeout" in ln]
    assert not lines, f"rank {rank}: {len(lines)} c10d timeout lines, the first: {lines[0]}"
    return f"rank {rank}: no c10d timeout line" + (" (3 s late twice)" if rank == 1 else "")


def child(target, rank, size, args, results):
    try:
        results.put((rank, "ok", target(rank, size, *args)))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))
        os._exit(1)


def run(name, target, size, args, expect_exit):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=child, args=(target, r, size, args, results))
             for r in range(size)]
    start = time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join(max(1.0, TIMEOUT_S - (time.monotonic() - start)))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
    reports = {}
    while not results.empty():
        rank, status, text = results.get()
        reports[rank] = (status, text)
    codes = [p.exitcode for p in procs]
    ok = not hung and all(expect_exit(r, c) for r, c in enumerate(codes)) and \
        all(s == "ok" for s, _ in reports.values())
    print(f"{name}: {'ok' if ok else 'FAILED'} in {time.monotonic() - start:.1f} s, "
          f"exit codes {codes}{', hung ranks ' + str(hung) if hung else ''}")
    for rank in sorted(reports):
        print(f"  {reports[rank][1]}" if reports[rank][1] else "")
    return ok


SCENARIOS = {
    "reinit": lambda: run("reinit", reinit, 2, ([free_port() for _ in range(4)],),
                          lambda r, c: c == 0),
    "reinit_one_store": lambda: with_file_store(
        lambda path: run("reinit_one_store", reinit_one_store, 2, (path,), lambda r, c: c == 0)),
    "kill": lambda: run("kill", kill, 3, (free_port(),),
                        lambda r, c: c == (-signal.SIGKILL if r == 2 else 0)),
    "exit": lambda: run("exit", leave, 2, (free_port(),), lambda r, c: c == 0),
    "late": lambda: with_file_store(lambda path: run("late", late, 2, (path,),
                                                     lambda r, c: c == 0)),
    "quiet": lambda: run("quiet", quiet, 2, (free_port(),), lambda r, c: c == 0),
}


def with_file_store(f):
    import tempfile

    with tempfile.TemporaryDirectory(prefix="strata-lifecycle-") as d:
        return f(os.path.join(d, "store"))

if __name__ == "__main__":
    names = sys.argv[1:] or list(SCENARIOS)
    results = [SCENARIOS[n]() for n in names]
    sys.exit(0 if all(results) else 1)
