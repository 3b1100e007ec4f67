#!/usr/bin/env bash
# Makes the virtual environment the Python module and the torch backend build and test against,
# and prints its path last: $STRATA_VENV, by default ~/.cache/strata/venv (outside the checkout,
# so a clean clone reuses it instead of fetching torch's 5 GB again) with the pinned torch
# (2.15, CPU use of the PyPI wheel), numpy, nanobind, scikit-build-core, pytest and expecttest
# (PyTorch's own test suite imports it). Debian's Python refuses system-wide pip: hence a venv.
# Idempotent: seconds when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${STRATA_VENV:-$HOME/.cache/strata/venv}
requirements=("torch==2.15.*" numpy "nanobind>=2.0" "scikit-build-core>=0.10" pytest expecttest)
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
fi
if "$venv/bin/python" - "${requirements[@]}" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
from packaging.requirements import Requirement
sys.exit(0 if all(Requirement(r).specifier.contains(version(Requirement(r).name), prereleases=True)
                  for r in sys.argv[1:]) else 1)
PY
  echo "python-env: $venv has ${requirements[*]}" >&2
  echo "$venv"
  exit 0
fi
echo "python-env: installing ${requirements[*]} into $venv (torch pulls about 5 GB; 2-3 minutes)" >&2
"$venv/bin/pip" install -q --disable-pip-version-check "${requirements[@]}" packaging
echo "python-env: ok" >&2
echo "$venv"
