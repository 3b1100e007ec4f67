"""The torch.distributed backend ``strata`` for CPU and CUDA tensors.

Importing this module registers it; then, under ``torchrun`` (or anything setting RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT)::

    import torch.distributed as dist
    import strata.torch  # noqa: F401  (registers "strata")

    dist.init_process_group("strata")
    t = torch.ones(1024)
    dist.all_reduce(t)                      # every torch.distributed operation on CPU tensors
    dist.destroy_process_group()

Where Strata was built with its device path (``strata.torch.CUDA``), CUDA tensors go by it:
NCCL between distinct GPUs, staged through host memory where ranks share one, each call ordered
on the tensors' current CUDA stream. ``init_process_group("cpu:strata,cuda:nccl")`` keeps
torch's own NCCL backend for GPU tensors instead. The extension is
built against one torch minor version (``strata.torch.BUILT_AGAINST``); importing it under
another raises ImportError saying which.
"""

import torch
import torch.distributed as dist

try:
    from . import _strata_torch
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        f"strata.torch: the torch backend extension could not be loaded under torch "
        f"{torch.__version__} ({e}). It is built only where torch is importable while Strata "
        f"builds, and against that torch: `pip install --no-build-isolation .` in an "
        f"environment that has torch 2.15 (plain `pip install .` builds in an isolated "
        f"environment without torch, and leaves the backend out), or scripts/python-env.sh "
        f"then scripts/build.sh"
    ) from e

BUILT_AGAINST = _strata_torch.torch_version
if ".".join(torch.__version__.split(".")[:2]) != BUILT_AGAINST:
    raise ImportError(
        f"strata.torch was built against torch {BUILT_AGAINST} but torch {torch.__version__} "
        f"is imported; rebuild strata in this environment"
    )

ProcessGroupStrata = _strata_torch.ProcessGroupStrata
CUDA = bool(_strata_torch.cuda)


def _create(opts, backend_options):
    """torch.distributed's extended creator: one Strata communicator per process group."""
    timeout_ms = int(opts.timeout.total_seconds() * 1000)
    return _strata_torch.create(
        opts.store, opts.group_rank, opts.group_size, timeout_ms, opts.group_id or "default"
    )


if "STRATA" not in dist.Backend._plugins:
    dist.Backend.register_backend(
        "strata", _create, extended_api=True, devices=["cpu", "cuda"] if CUDA else ["cpu"]
    )

__all__ = ["BUILT_AGAINST", "CUDA", "ProcessGroupStrata"]
