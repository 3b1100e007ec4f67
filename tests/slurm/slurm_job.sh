#!/usr/bin/env bash
# Runs COMMAND as one `srun -n NTASKS` step under real Slurm daemons (munged, slurmctld, slurmd)
# that this script starts privately on this machine and always stops again:
#   tests/slurm/slurm_job.sh NTASKS -- COMMAND...
# Exit status: srun's (the tasks' highest), 124 if srun timed out, 2 for bad usage, 3 if Slurm or
# munge is missing, 4 if the daemons never came up. Needs root (slurmd starts the tasks).
# Nothing of the system's Slurm is used: no /etc/slurm, no services; all state lives in a temp dir.
# MASTER_ADDR/MASTER_PORT are deliberately not set: Strata must find its store from SLURM_*.
# shellcheck disable=SC2317  # cleanup and alive run from the EXIT trap
set -euo pipefail

usage() { echo "usage: $0 NTASKS -- COMMAND..." >&2; exit 2; }
[[ $# -ge 3 && $1 =~ ^[1-9][0-9]*$ && $2 == -- ]] || usage
ntasks=$1; shift 2
up_timeout=${STRATA_SLURM_UP_TIMEOUT:-30}      # seconds for the daemons to come up
run_timeout=${STRATA_SLURM_RUN_TIMEOUT:-300}   # seconds for the srun step

# Debian bookworm packages: slurmd slurmctld slurm-client munge (Slurm 22.05).
for tool in munged slurmctld slurmd srun sinfo squeue scancel; do
  command -v "$tool" >/dev/null || {
    echo "slurm: '$tool' not found; install: apt-get install slurmd slurmctld slurm-client munge" >&2
    exit 3; }
done
[[ $(id -u) == 0 ]] || { echo "slurm: must run as root (slurmd starts the tasks)" >&2; exit 3; }

start_us=${EPOCHREALTIME//[!0-9]/}  # "s.us" without the locale's separator
elapsed() { local us=$(( ${EPOCHREALTIME//[!0-9]/} - start_us )); echo "$((us / 1000000)).$((us / 100000 % 10))"; }
alive() { local p; for p; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }

dir=$(mktemp -d /tmp/strata-slurm.XXXXXX)
chmod 755 "$dir"   # munged insists that everyone may traverse its socket's directory
pids=()            # daemons we started, in start order
srun_pid=

cleanup() {
  local rc=$? i k p
  trap - EXIT INT TERM
  set +e   # best effort from here: a process that is already gone must not stop the cleanup
  # Interrupted during the step: TERM to `timeout` reaches srun, which cancels the step
  # (timeout's -k 10 turns it into SIGKILL if srun lingers).
  if [[ -n $srun_pid ]] && alive "$srun_pid"; then kill -TERM "$srun_pid"; wait "$srun_pid"; fi
  # Cancel any job left so no slurmstepd outlives slurmd, and give it 5 s to go.
  if [[ -s $dir/slurm.conf ]] && alive "${pids[@]}"; then
    export SLURM_CONF=$dir/slurm.conf
    scancel --quiet --full -u root 2>/dev/null
    for ((i = 0; i < 50; i++)); do [[ -z $(squeue -h 2>/dev/null) ]] && break; sleep 0.1; done
  fi
  # Stop the daemons one at a time, newest first: slurmd and slurmctld linger (retrying) once
  # munged is gone. SIGKILL after 10 s.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    p=${pids[i]}
    kill -TERM "$p" 2>/dev/null || continue
    for ((k = 0; k < 100; k++)); do alive "$p" || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  wait
  # slurmstepd detaches from slurmd but inherits its environment: catch stragglers by our marker.
  for p in /proc/[0-9]*; do
    grep -qzx "STRATA_SLURM_DIR=$dir" "$p/environ" 2>/dev/null && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# True if nothing listens on TCP port $1 of this machine.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Daemon ports from 10000-19999: below the ephemeral range and below Strata's 20000-39999.
ctld_port=$((10000 + RANDOM % 5000)); until port_free $ctld_port; do ctld_port=$((10000 + RANDOM % 5000)); done
slurmd_port=$((15000 + RANDOM % 5000)); until port_free $slurmd_port; do slurmd_port=$((15000 + RANDOM % 5000)); done
# The job id fixes Strata's store port, 20000 + (jobid*131 + step) % 20000. Start job ids at a
# random point so concurrent runs of this script differ, at one whose port is free and below the
# ephemeral range (32768+), where no outgoing connection can take it meanwhile.
while :; do
  first_job=$((1000 + RANDOM * 10 + RANDOM % 10))
  strata_port=$((20000 + first_job * 131 % 20000))
  (( strata_port < 32768 )) && port_free $strata_port && break
done

node=$(hostname -s)
getent hosts "$node" >/dev/null ||
  echo "slurm: warning: '$node' does not resolve; Strata looks up the nodelist's first host" >&2
cpus=$(( ntasks > $(nproc) ? ntasks : $(nproc) ))
mkdir "$dir/state" "$dir/spool"
: > "$dir/plugstack.conf"   # keep the system's /etc/slurm/plugstack.conf out
cat > "$dir/slurm.conf" <<EOF
ClusterName=strata-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
PlugStackConfig=$dir/plugstack.conf
MailProg=/bin/true
FirstJobId=$first_job
# No cgroups (containers, CI runners): track tasks by process tree, no CPU binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
# Trust the CPU count below rather than the hardware, so NTASKS fits on a 2-core runner.
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$dir/slurm.conf STRATA_SLURM_DIR=$dir

dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge.key"
munged -F --socket="$dir/munge.sock" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
  --seed-file="$dir/munged.seed" >"$dir/munged.out" 2>&1 &
pids+=($!)
slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" >"$dir/slurmd.out" 2>&1 &
pids+=($!)

# Up means: slurmctld answers and slurmd has registered the node as idle.
until [[ $(sinfo -h -N -n "$node" -o %t 2>/dev/null) == idle ]]; do
  if (( ${EPOCHREALTIME//[!0-9]/} - start_us >= up_timeout * 1000000 )) || ! kill -0 "${pids[@]}" 2>/dev/null; then
    echo "slurm: daemons not up after $(elapsed) s; sinfo: $(sinfo -h -N 2>&1 || true)" >&2
    for f in "$dir"/*.out; do echo "---- ${f##*/}"; tail -n 30 "$f"; done >&2
    exit 4
  fi
  sleep 0.2
done
echo "slurm: daemons up in $(elapsed) s (node $node, $cpus CPUs, job ids from $first_job)"

# In the background so that a signal to this script runs cleanup at once, not after srun.
timeout -k 10 "$run_timeout" srun -N1 -n "$ntasks" --time=5 --kill-on-bad-exit=1 "$@" &
srun_pid=$!
rc=0; wait "$srun_pid" || rc=$?
srun_pid=
echo "slurm: srun -n $ntasks $* exit $rc after $(elapsed) s"
exit "$rc"
