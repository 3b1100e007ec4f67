#!/bin/sh
# strata-run refuses a bad value for each of its flags by name, with exit code 2, and
# starts nothing: "-n 2.5" once started 2 ranks.
# Usage: strata_run_args_test.sh STRATA_RUN
run=$1
fail=0
check() {  # expected message, then strata-run's arguments before the program
  want=$1
  shift
  out=$("$run" "$@" sh -c 'echo STARTED' 2>&1)
  rc=$?
  if [ "$rc" -ne 2 ] || ! printf '%s\n' "$out" | grep -q -- "$want" ||
    printf '%s\n' "$out" | grep -q STARTED; then
    echo "FAIL: strata-run $*: exit $rc, output:"
    printf '%s\n' "$out" | head -3
    fail=1
  fi
}
check "\-n 2.5: expected a whole number from 1 to 1048576" -n 2.5
check "\-n 0: expected a whole number from 1 to 1048576" -n 0
check "\-n 1e9: expected a whole number from 1 to 1048576" -n 1e9
check "\-n x: expected a whole number" -n x
check "\-\-port 80.5: expected a whole number from 1 to 65535" -n 1 --port 80.5
check "\-\-port 70000: expected a whole number from 1 to 65535" -n 1 --port 70000
check "\-\-timeout -1: expected a number from 0 to" -n 1 --timeout -1
check "\-\-timeout nan: expected a number from 0 to" -n 1 --timeout nan
check "\-\-addr needs a value" -n 1 --addr ''
# A job store that fails at once is said to have ended, not to be late (--keep-going starts one).
out=$("$run" -n 2 --keep-going --addr 256.0.0.1 -- true 2>&1)
rc=$?
if [ "$rc" -ne 1 ] || ! printf '%s\n' "$out" | grep -q "strata-store exited (status 1) before serving"; then
  echo "FAIL: strata-run --keep-going with a store that cannot start: exit $rc, output:"
  printf '%s\n' "$out" | head -3
  fail=1
fi
# ...and the good values still run.
[ "$("$run" -n 2 --timeout 1.5 sh -c 'echo $RANK' | sort | tr '\n' ' ')" = "0 1 " ] ||
  { echo "FAIL: strata-run -n 2 --timeout 1.5 did not start ranks 0 and 1"; fail=1; }
[ $fail -eq 0 ] && echo "strata-run: every bad value refused"
exit $fail
