#!/usr/bin/env bash
# `pip install .` as a PyTorch user does it, checked end to end (CTest pip_install, labelled
# slow: it builds the whole library again, about 4 minutes on 2 vCPUs):
#   a fresh venv, whose torch 2.15, numpy, nanobind and scikit-build-core are the project venv's
#   (one .pth line: the same packages without a 5 GB download per run), then
#   pip install --no-build-isolation --no-index <source>   (the command docs/bindings.md gives),
#   then the installed strata-run starts 2 ranks (--keep-going: the store served by the installed
#   strata-store) that import strata.torch from that venv and all_reduce through
#   torch.distributed, each element checked.
# Usage: pip_install_test.sh SOURCE_DIR WORK_DIR PROJECT_PYTHON
set -euo pipefail
src=$1 work=$2 project_py=$3
unset PYTHONPATH  # nothing from the build tree may be imported
rm -rf "$work"
mkdir -p "$work"
base_py=$("$project_py" -c 'import sys; print(sys._base_executable)')
"$base_py" -m venv "$work/venv"
venv_site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$project_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
  > "$venv_site/project-packages.pth"

"$work/venv/bin/pip" install --no-build-isolation --no-index --no-deps \
  -Cbuild-dir="$work/build" "$src" > "$work/pip.log" 2>&1 || {
  tail -40 "$work/pip.log"
  echo "FAIL: pip install of $src (log: $work/pip.log)"
  exit 1
}
for tool in strata-run strata-store; do
  [ -x "$work/venv/bin/$tool" ] || { echo "FAIL: the wheel installed no $tool"; exit 1; }
done

cd "$work"  # not the source tree: `import strata` must find the installed package
# --keep-going: the job's store served by the wheel's strata-store, not rank 0 (which says so
# when it finds none).
timeout 120 "$work/venv/bin/strata-run" -n 2 --keep-going --timeout 100 \
  "$work/venv/bin/python" -c '
import sys, torch, torch.distributed as dist
import strata, strata.torch
venv = sys.argv[1]
assert strata.__file__.startswith(venv), f"strata imported from {strata.__file__}, not {venv}"
dist.init_process_group("strata")
rank, n = dist.get_rank(), dist.get_world_size()
t = torch.arange(1000, dtype=torch.float32) * (rank + 1)
dist.all_reduce(t)
want = torch.arange(1000, dtype=torch.float32) * sum(range(1, n + 1))
bad = (t != want).nonzero().flatten().tolist()
assert not bad, f"rank {rank}: elements {bad[:5]} differ: {t[bad[:5]].tolist()} != {want[bad[:5]].tolist()}"
dist.destroy_process_group()
print(f"rank {rank}: all_reduce through the installed strata.torch matches", flush=True)
' "$work/venv" 2>&1 | tee "$work/run.log"
if grep -q "no strata-store beside strata-run" "$work/run.log"; then
  echo "FAIL: strata-run --keep-going found no strata-store in the wheel"
  exit 1
fi
echo "ok: pip install, strata-run, strata-store and strata.torch from the wheel"
