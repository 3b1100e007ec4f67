#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a consumer through
# find_package(strata) and through pkg-config, as a downstream user would.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" > "$tmp/install.log"
cmake -S "$src_dir" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/cfg.log"
cmake --build "$tmp/build" > "$tmp/build.log"
run() { RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=0 STRATA_IGNORE_MPI=1 "$@"; }
LD_LIBRARY_PATH="$tmp/prefix/lib" run "$tmp/build/consumer"
# pkg-config route.
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
g++ "$src_dir/main.cpp" $(pkg-config --cflags --libs strata) -o "$tmp/consumer_pc"
LD_LIBRARY_PATH="$tmp/prefix/lib" run "$tmp/consumer_pc"
