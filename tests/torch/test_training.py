"""Training through the strata backend reaches the parameters that one process reaches on the
whole batch, and those that the same job reaches through gloo: DDP (unused parameters, static
graph, comm hooks), FSDP2 (both reshard settings) and a 2-D (dp x shard) device mesh.

    PYTHONPATH=build/python build/bin/strata-run -n 4 ~/.cache/strata/venv/bin/python -m pytest -q \
        tests/torch/test_training.py
"""

import copy
import math

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

WIDTH, BATCH, STEPS, LR = 16, 8, 3, 0.1


class Net(nn.Module):
    """Four linear layers and a branch that only some steps use (find_unused_parameters)."""

    def __init__(self, spare=False):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(4)])
        self.spare = nn.Linear(WIDTH, WIDTH) if spare else None

    def forward(self, x, use_spare=False):
        y = self.layers(torch.tanh(x))
        return self.spare(y) if use_spare else y


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(BATCH * dist.get_world_size(), WIDTH, generator=g)


def my_shard(x, ranks=None):
    ranks = ranks or dist.get_world_size()
    r = dist.get_rank() % ranks
    n = x.shape[0] // ranks
    return x[r * n:(r + 1) * n]


def train(model, shard, use_spare=lambda step: False, steps=STEPS):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(steps):
        x = shard(batch(step))
        loss = model(x, use_spare(step)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def reference(use_spare=None):
    """One process on the whole batch: what data parallelism must reproduce."""
    return train(fresh(use_spare is not None), lambda x: x, use_spare or (lambda step: False))


def params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def full_params(model):
    """FSDP2's sharded parameters, gathered."""
    return {k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().clone()
            for k, v in model.state_dict().items()}


def assert_same(got, want):
    """Per tensor, ||got - want|| / ||want|| within the bound of the batch's gradient sums added in
    another order over STEPS steps (tests/numerics.hpp's reorder_bound: 64 sqrt(terms) steps u)."""
    assert got.keys() == want.keys()
    bound = 64 * math.sqrt(BATCH * dist.get_world_size()) * STEPS * 2.0**-24
    for k in want:
        assert got[k].shape == want[k].shape, k
        rel = float((got[k].double() - want[k].double()).norm() / want[k].double().norm())
        assert rel <= bound, f"{k}: ||got - want|| / ||want|| = {rel:.3g} > {bound:.3g}"


def fresh(spare=False):
    torch.manual_seed(0)
    return Net(spare)


def ddp_run(group, **kwargs):
    hook = kwargs.pop("hook", None)
    use_spare = kwargs.pop("use_spare", None)
    model = DDP(fresh(use_spare is not None), process_group=group, **kwargs)
    if hook is not None:
        model.register_comm_hook(group, hook)
    return params(train(model, my_shard, use_spare or (lambda step: False)).module)


def chained_hook(group, bucket):
    """A comm hook whose future is chained with then(): the backend's future must complete
    without anyone waiting on the work."""
    t = bucket.buffer().div_(dist.get_world_size(group))
    fut = dist.all_reduce(t, group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


DDP_CASES = {
    "plain": {},
    "find_unused_parameters": {"find_unused_parameters": True,
                               "use_spare": lambda step: step % 2 == 1},
    "static_graph": {"static_graph": True},
    "allreduce_hook": {"hook": default_hooks.allreduce_hook},
    "chained_hook": {"hook": chained_hook},
    "small_buckets": {"bucket_cap_mb": 0.001},
}


@pytest.mark.parametrize("case", DDP_CASES)
def test_ddp_matches_one_process_and_gloo(case, gloo):
    use_spare = DDP_CASES[case].get("use_spare")
    want = params(reference(use_spare))
    strata = ddp_run(dist.group.WORLD, **dict(DDP_CASES[case]))
    assert_same(strata, want)
    assert_same(strata, ddp_run(gloo, **dict(DDP_CASES[case])))


def fsdp_run(mesh, reshard):
    model = fresh()
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    # Every rank is data parallel, also on a 2-D (replicate, shard) mesh: its own slice of the
    # batch, gradients averaged over all ranks.
    return full_params(train(model, my_shard))


@pytest.mark.parametrize("reshard", [True, False])
def test_fsdp2_matches_one_process_and_gloo(reshard, gloo):
    want = params(reference())
    strata = fsdp_run(init_device_mesh("cpu", (dist.get_world_size(),)), reshard)
    assert_same(strata, want)
    assert_same(strata, fsdp_run(DeviceMesh.from_group(gloo, "cpu"), reshard))


def test_2d_device_mesh_hsdp_matches_one_process():
    if dist.get_world_size() != 4:
        pytest.skip("a (2, 2) mesh needs 4 ranks")
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    assert dist.get_backend(mesh.get_group("shard")) == "strata"
    assert_same(fsdp_run(mesh, True), params(reference()))
    # And the mesh's groups are real strata groups over the right ranks.
    t = torch.full((4,), float(dist.get_rank()))
    dist.all_reduce(t, group=mesh.get_group("shard"))
    row = dist.get_rank() // 2 * 2
    assert torch.equal(t, torch.full((4,), float(row + row + 1)))
