"""Every rank of a torchrun-style job (build/bin/strata-run -n N, or torchrun) runs the same
tests in the same order: they are collective. The job's default group uses the strata backend;
tests that compare against gloo make a gloo group over the same ranks."""

import os

os.environ.setdefault("STRATA_TIMEOUT", "60")  # a hung test fails within a minute

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

import strata.torch  # noqa: F401  registers "strata"


@pytest.fixture(scope="session", autouse=True)
def world():
    dist.init_process_group("strata", timeout=timedelta(seconds=60))
    yield dist.group.WORLD
    dist.destroy_process_group()


@pytest.fixture(scope="session")
def gloo():
    return dist.new_group(backend="gloo")


def pytest_collection_modifyitems(config, items):
    # A failure on one rank must not desynchronise the others' collectives: stop every rank at
    # its first failure (-x) and let the deadline end the rest.
    config.option.maxfail = 1


torch.manual_seed(0)
