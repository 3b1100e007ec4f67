"""Ctrl-C (SIGINT) while a torch call waits on the strata backend: the group is aborted, the call
raises KeyboardInterrupt at once instead of at the group's timeout, and the peers' next call on
it fails naming this rank (bindings/torch/ctrl_c.hpp); run by every rank of one job."""

import os
import signal
import threading
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist


def test_ctrl_c_ends_a_wait_for_a_peer_that_never_comes():
    if dist.get_world_size() < 2:
        pytest.skip("needs 2 ranks")
    sub = dist.new_group(timeout=timedelta(seconds=20))
    dist.barrier()
    if dist.get_rank() == 0:
        # The others join this all_reduce only after rank 0 has given up on it.
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            dist.all_reduce(torch.ones(1 << 18), group=sub)
        assert time.monotonic() - began < 5
        with pytest.raises(dist.DistBackendError, match="abort"):
            dist.all_reduce(torch.ones(4), group=sub)
    dist.barrier()
    if dist.get_rank() != 0:
        with pytest.raises(dist.DistBackendError, match="rank 0 aborted the communicator"):
            dist.all_reduce(torch.ones(1 << 18), group=sub)
    dist.barrier()
