"""Communicator.from_env() under torchrun, whose agent holds MASTER_PORT with a store of its own:
Strata's store takes the next port, and every rank's all_reduce sums every rank's values.

    PYTHONPATH=build/python python -m torch.distributed.run --nproc-per-node 2 \\
        tests/python/torchrun_from_env.py
"""

import os

import numpy as np

import strata

assert os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True", "run this under torchrun"
world = strata.Communicator.from_env()
v = np.full(1000, world.rank + 1.0)
world.all_reduce(v).wait()
want = world.size * (world.size + 1) / 2
assert np.array_equal(v, np.full(1000, want)), (world.rank, v[:4])
print(f"rank {world.rank} of {world.size}: from_env under torchrun ok", flush=True)
