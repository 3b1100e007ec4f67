#!/usr/bin/env bash
# Makes the virtual environment the Python module and the torch backend build and test against:
# build/venv with the pinned torch (2.15, CPU use of the PyPI wheel), numpy, nanobind,
# scikit-build-core and pytest. Debian's Python refuses system-wide pip, hence the venv.
# Idempotent: seconds when everything is there. Prints nothing on success but one line.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/venv
requirements=("torch==2.15.*" numpy "nanobind>=2.0" "scikit-build-core>=0.10" pytest)
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p build
  python3 -m venv "$venv"
fi
if "$venv/bin/python" - "${requirements[@]}" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
from packaging.requirements import Requirement
sys.exit(0 if all(Requirement(r).specifier.contains(version(Requirement(r).name), prereleases=True)
                  for r in sys.argv[1:]) else 1)
PY
  echo "python-env: $venv has ${requirements[*]}"
  exit 0
fi
echo "python-env: installing ${requirements[*]} into $venv (torch pulls about 5 GB; 2-3 minutes)"
"$venv/bin/pip" install -q --disable-pip-version-check "${requirements[@]}" packaging
echo "python-env: ok"
