#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, compiles c_abi_test.c as C99 with gcc against
# the installed strata.h and libstrata_c only, and runs it on each world size given.
set -euo pipefail
build_dir=$1
shift
src_dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" > "$tmp/install.log"
lib=$(ls -d "$tmp"/prefix/lib*/ | head -1)
# Built with what pkg-config says of strata_c only, as a C user would.
export PKG_CONFIG_PATH="$lib/pkgconfig"
# shellcheck disable=SC2046
gcc -std=c99 -pedantic -Wall -Wextra -Werror -pthread "$src_dir/c_abi_test.c" \
  $(pkg-config --cflags --libs strata_c) -Wl,-rpath,"$lib" -o "$tmp/c_abi_test"
# Nothing of Strata's C++ side may be reachable: only strata* symbols are exported.
if nm -D --defined-only "$lib/libstrata_c.so" | awk '{print $3}' | grep -v '^strata[A-Z]\|^STRATA_0$' ; then
  echo "libstrata_c.so exports symbols other than the C API (above)"; exit 1
fi
for np in "$@"; do
  echo "== $np ranks"
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$tmp/c_abi_test"
done
