#!/usr/bin/env bash
# Fails when a C or C++ file of the tree differs from what clang-format makes of it (.clang-format
# at the root: Google style, 100 columns). CTest "format" runs it; "format_self_test" plants a
# line past the limit in a copy and checks that it is caught.
#   scripts/check_format.sh CLANG_FORMAT [REPO]
#   scripts/check_format.sh CLANG_FORMAT --self-test
set -euo pipefail
fmt=$1
if [[ ${2:-} == --self-test ]]; then
  repo=$(cd "$(dirname "$0")/.." && pwd)
  d=$(mktemp -d)
  trap 'rm -rf "$d"' EXIT
  mkdir -p "$d/src"
  cp "$repo/.clang-format" "$d/"
  printf 'int planted() { return 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11 + 12 + 13 + 14 + 15 + 16 + 17 + 18 + 19 + 20; }\n' > "$d/src/long.cpp"
  if "$0" "$fmt" "$d" > "$d/out" 2>&1; then
    echo "check_format self-test: FAILED, a 112-column line passed"; exit 1
  fi
  grep -q "src/long.cpp" "$d/out" || { echo "check_format self-test: FAILED, the file is not named"; cat "$d/out"; exit 1; }
  echo "check_format self-test: passed (the planted long line was reported)"
  exit 0
fi
repo=${2:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$repo"
mapfile -t files < <(find src include bindings trainer tools tests benchmarks fuzz \
  \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.c' \) 2>/dev/null | sort)
if ! "$fmt" --dry-run -Werror "${files[@]}"; then
  echo "check_format: run clang-format -i on the files above (.clang-format)" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files as clang-format makes them"
