#!/usr/bin/env bash
# Installs what Strata needs from Debian's packages. Idempotent: takes seconds when all is there.
set -euo pipefail

packages=(build-essential cmake pkg-config libhwloc-dev libxml2-dev hwloc libucx-dev ucx-utils
          libopenmpi-dev openmpi-bin libgtest-dev libopenblas-dev iproute2
          clang clang-format libclang-rt-14-dev python3-venv python3-dev
          slurmd slurmctld slurm-client munge)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
