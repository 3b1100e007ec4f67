"""The communicators every test file of this folder shares: one job, one world."""

import os

os.environ.setdefault("STRATA_TIMEOUT", "60")  # a hung test fails within a minute

import pytest

import strata


@pytest.fixture(scope="session")
def world():
    return strata.Communicator.from_env()


@pytest.fixture(scope="session")
def side(world):
    """A second communicator over the same ranks, to signal while `world` has work pending."""
    return world.split(0, world.rank, name="side")
