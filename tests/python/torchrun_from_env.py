"""Communicator.from_env() beside a store that holds MASTER_PORT: under torchrun, its agent's
(Strata's store takes the next port); with --beside-torch (under strata-run), torch.distributed's
own TCPStore, made first by init_process_group (Strata's takes the STRATA_STORE_PORT strata-run
sets). Every rank's all_reduce sums every rank's values.

    PYTHONPATH=build/python python -m torch.distributed.run --nproc-per-node 2 \\
        tests/python/torchrun_from_env.py
    PYTHONPATH=build/python build/bin/strata-run -n 2 python tests/python/torchrun_from_env.py \\
        --beside-torch
"""

import os
import sys

import numpy as np

import strata

beside_torch = "--beside-torch" in sys.argv
if beside_torch:
    import torch.distributed as dist

    dist.init_process_group("gloo")  # torch's TCPStore on MASTER_PORT, served by rank 0
else:
    assert os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True", "run this under torchrun"
world = strata.Communicator.from_env()
v = np.full(1000, world.rank + 1.0)
world.all_reduce(v).wait()
want = world.size * (world.size + 1) / 2
assert np.array_equal(v, np.full(1000, want)), (world.rank, v[:4])
if beside_torch:
    dist.destroy_process_group()
where = "beside torch.distributed's store" if beside_torch else "under torchrun"
print(f"rank {world.rank} of {world.size}: from_env {where} ok", flush=True)
