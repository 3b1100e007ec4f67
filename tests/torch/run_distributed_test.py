#!/usr/bin/env python3
"""Runs PyTorch's own distributed suite (torch/testing/_internal/distributed/distributed_test.py)
on the backend "strata", or on "gloo" to compare: upstream's test/distributed/test_distributed_spawn.py
with the backend registered and the suite told what strata supports.

    ~/.cache/strata/venv/bin/python tests/torch/run_distributed_test.py --backend strata --world-size 2 \
        [--ci] [--timeout S] [--test-timeout S] [pytest args, e.g. -k "all_reduce or broadcast"]

The command line (the launcher) makes a fresh temporary directory (TEMP_DIR, with barrier/, and
TMPDIR for the suite's own temporaries), sets BACKEND and WORLD_SIZE, and runs pytest on this
file in a child process group that is killed after --timeout seconds (the suite's per-test
timeout, DISTRIBUTED_TESTS_DEFAULT_TIMEOUT, is --test-timeout). The directory is removed at the
end. Everything else happens at import time, so that the ranks the suite spawns (which re-import
this module) register strata and see the same feature sets: importing this module with BACKEND
and WORLD_SIZE set is what pytest and the ranks do.

--ci runs the selection in ci_tests.txt beside this file (collectives and DDP, all passing on
strata, a few minutes at world sizes 2 and 3 together).
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))
_BUILD_PYTHON = os.path.join(_REPO, "build", "python")
if _BUILD_PYTHON not in sys.path:
    sys.path.insert(0, _BUILD_PYTHON)

BACKENDS = ("gloo", "strata")
# "strata-as-gloo": the suite runs with BACKEND=gloo (so the ~40 tests gated on the literal name
# "gloo" run too) while the name "gloo" creates strata process groups. A diagnostic mode: tests
# of gloo-only features (monitored_barrier, sparse all_reduce, ProcessGroupGloo) fail there.
AS_GLOO = "strata-as-gloo"
CI_FILE = os.path.join(_HERE, "ci_tests.txt")
_INNER = "STRATA_DIST_TEST_INNER"  # set in the pytest process the launcher starts


def read_selection(path, world_size):
    """The test names (test_...) in a selection file: one a line, '#' starts a comment; a name
    followed by "ws>=N" is run only at world sizes of N or more (it would skip below)."""
    names = []
    with open(path) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) > 1 and words[1].startswith("ws>="):
                if world_size < int(words[1][4:]):
                    continue
            names.append(words[0])
    return names


def _launch(argv):
    import argparse
    import shutil
    import signal
    import subprocess
    import tempfile
    import time

    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Other arguments go to pytest (e.g. -k PATTERN, -x, -q, --junitxml F).",
    )
    p.add_argument("--backend", default=os.environ.get("BACKEND", "strata"), choices=BACKENDS + (AS_GLOO,))
    p.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", "2")))
    p.add_argument("--ci", action="store_true", help="run only the tests in ci_tests.txt")
    p.add_argument("--select", metavar="FILE",
                   help="run only the tests named in FILE (one test_... name a line)")
    p.add_argument("--timeout", type=float, default=float(os.environ.get("STRATA_DT_TIMEOUT", 0)),
                   help="seconds for the whole run, then every process is killed "
                   "(default: 40 s per selected test, at least 600)")
    p.add_argument("--test-timeout", type=int,
                   default=int(os.environ.get("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120")),
                   help="seconds for one test (its ranks are killed then); default 120")
    args, rest = p.parse_known_args(argv)
    if args.world_size < 2:
        p.error("--world-size must be at least 2")

    tmp = tempfile.mkdtemp(prefix="strata-dt-")
    os.mkdir(os.path.join(tmp, "barrier"))
    env = dict(os.environ)
    env.update({
        _INNER: "1",
        "BACKEND": "gloo" if args.backend == AS_GLOO else args.backend,
        "STRATA_DT_AS_GLOO": "1" if args.backend == AS_GLOO else "",
        "WORLD_SIZE": str(args.world_size),
        "TEMP_DIR": tmp,
        "TMPDIR": tmp,  # the suite's per-test directories and init files go here too
        "DISTRIBUTED_TESTS_DEFAULT_TIMEOUT": str(args.test_timeout),
        "PYTHONPATH": os.pathsep.join(
            [_BUILD_PYTHON] + [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x]),
        "NO_COLOR": "1",
    })
    env.setdefault("STRATA_TIMEOUT", "60")
    select = CI_FILE if args.ci else args.select
    me = os.path.abspath(__file__)
    if select:
        cls = f"TestDistBackendWithSpawn{env['BACKEND'].upper()}"
        targets = [f"{me}::{cls}::{n}" for n in read_selection(select, args.world_size)]
    else:
        targets = [me]
    cmd = [sys.executable, "-m", "pytest", *targets, "--noconftest", "-p", "no:cacheprovider",
           "-rfEs", "--tb=short", *rest]
    n_tests = len(targets) if select else 300
    overall = args.timeout or max(600.0, 40.0 * n_tests)
    print(f"run_distributed_test: BACKEND={args.backend} WORLD_SIZE={args.world_size} "
          f"TEMP_DIR={tmp} timeout {overall:.0f}s, {n_tests if select else 'all'} tests", flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=_REPO, start_new_session=True)
    try:
        rc = proc.wait(timeout=overall)
    except subprocess.TimeoutExpired:
        print(f"run_distributed_test: TIMEOUT after {overall:.0f}s, killing the run", flush=True)
        rc = 124
    except KeyboardInterrupt:
        rc = 130
    finally:
        # The pytest process and the ranks it spawned share one process group (its session).
        try:
            os.killpg(proc.pid, signal.SIGKILL if proc.poll() is None else signal.SIGTERM)
        except ProcessLookupError:
            pass
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"run_distributed_test: {args.backend} world size {args.world_size}: "
          f"exit {rc} in {time.monotonic() - start:.0f}s", flush=True)
    return rc


if __name__ == "__main__" and not os.environ.get(_INNER):
    sys.exit(_launch(sys.argv[1:]))

# ---- Import time: the pytest process and every rank it spawns run this. ----
for _var in ("BACKEND", "WORLD_SIZE", "TEMP_DIR"):
    if _var not in os.environ:
        raise RuntimeError(f"{_var} is unset: run this file as a script (see its docstring)")
BACKEND = os.environ["BACKEND"]
if BACKEND not in BACKENDS:
    raise RuntimeError(f"BACKEND={BACKEND}: this runner takes one of {BACKENDS}")

import torch  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False

import strata.torch  # noqa: E402,F401  registers "strata" (here and in every spawned rank)
from torch.testing._internal import common_distributed  # noqa: E402

_AS_GLOO = BACKEND == "gloo" and os.environ.get("STRATA_DT_AS_GLOO") == "1"
if _AS_GLOO:
    import torch.distributed as _dist

    # Every "gloo" group (default and new_group) is a strata one from here on.
    _dist.Backend.register_backend("gloo", strata.torch._create, extended_api=True,
                                   devices=["cpu"])

if BACKEND == "strata":
    # Before distributed_test is imported: its skip decorators read these sets at import.
    _features = common_distributed.DistTestCases.backend_feature
    _features["ddp"].add("strata")       # DistributedDataParallel on CPU tensors
    _features["subgroup"].add("strata")  # new_group / new_subgroups
    _features["plugin"].add("strata")    # require_backend_is_available: a registered plugin
    # Not "gpu" / "cuda": strata takes CPU tensors only.

# The suite's longer per-test overrides (400-500 s) must not outlast the runner's budget.
_test_timeout = int(os.environ.get("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120"))
for _name in list(common_distributed.TIMEOUT_OVERRIDE):
    common_distributed.TIMEOUT_OVERRIDE[_name] = min(
        common_distributed.TIMEOUT_OVERRIDE[_name], 2 * _test_timeout)

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed import distributed_test as _dt  # noqa: E402

if _AS_GLOO:
    # Profiled events are named "strata:<op>", not "gloo:<op>": no event checks in this mode.
    for _l in (_dt.PROFILING_SUPPORTED_BACKENDS, _dt.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):
        _l.remove("gloo")
if BACKEND == "strata":
    # Read at run time: profiled collectives are expected to record "strata:<op>" events.
    _dt.PROFILING_SUPPORTED_BACKENDS.append("strata")
    _dt.SEND_RECV_PROFILING_SUPPORTED_BACKENDS.append("strata")


class TestDistBackendWithSpawn(_dt.TestDistBackend, _dt.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


# One name per backend, as upstream (TestDistBackendWithSpawnGLOO / ...STRATA); the ranks find
# the class by this name when they unpickle it.
TestDistBackendWithSpawn.__name__ = f"TestDistBackendWithSpawn{BACKEND.upper()}"
TestDistBackendWithSpawn.__qualname__ = TestDistBackendWithSpawn.__name__
globals()[TestDistBackendWithSpawn.__name__] = TestDistBackendWithSpawn
del TestDistBackendWithSpawn

if __name__ == "__main__":
    run_tests()
