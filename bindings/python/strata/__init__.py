"""Strata collective communication for Python.

Every collective works in place on the caller's arrays (numpy, torch CPU tensors, anything
exposing DLPack or the buffer protocol: C-contiguous, CPU memory, never copied) and returns a
:class:`Work` at once; ``wait()`` releases the GIL. Run under ``mpirun`` or ``torchrun``::

    import numpy as np
    import strata

    world = strata.Communicator.from_env()          # collective over the job
    grads = np.full(1024, world.rank, dtype=np.float32)
    world.all_reduce(grads, op="sum").wait()        # grads now holds the sum, in place
    out = np.empty(world.size * 4, dtype=np.int64)
    work = world.all_gather(np.arange(4), out)      # async: returns at once
    work.wait(timeout=10.0)                         # raises strata.Error on failure
    mesh = strata.Mesh(world, tp=2)                 # tp x dp groups
    tp = mesh.group("tp")

Failures raise :class:`strata.Error` (a RuntimeError) with ``code``, ``rank``, ``peer``,
``group``, ``op`` and ``seq``; a buffer Strata cannot use as it is raises ``TypeError`` before
anything is sent.
"""

from ._strata import (
    ANY_SOURCE,
    Communicator,
    Error,
    Mesh,
    ReduceOp,
    Work,
    __version__,
    library_versions,
    node_topology,
)

__all__ = [
    "ANY_SOURCE",
    "Communicator",
    "Error",
    "Mesh",
    "ReduceOp",
    "Work",
    "__version__",
    "library_versions",
    "node_topology",
]
