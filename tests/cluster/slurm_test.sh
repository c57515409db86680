#!/usr/bin/env bash
# Workers as Slurm jobs, against a real Slurm (Debian's slurm-wlm and munge):
# a single-node cluster in a temporary directory — munged with a fresh key,
# slurmctld and slurmd in the foreground, a minimal slurm.conf with
# proctrack/linuxproc — and a real coordinator on 127.0.0.1. It proves:
#
#   1. `smallemctl slurm submit` writes a script sbatch accepts; the worker
#      job registers (with its Slurm job id and node, shown by `smallemctl
#      workers`), takes its token from the job's environment, and runs a tiny
#      grid to completion.
#   2. `scancel` of the worker job mid-run hands the run back at once: when
#      the job has left the queue, the run is queued again, its attempt ended
#      "released", nothing charged — with a ten-minute lease, so no reaper
#      did it. A second worker job (its token from a file) finishes the run,
#      which is recorded exactly once.
#
# Usage: slurm_test.sh BUILD_DIR. Exits 77 (skipped) when the cluster cannot
# start here: not root (slurmd runs jobs as their users), the packages
# missing (scripts/setup installs them), or a daemon that will not come up.
set -euo pipefail

build=${1:?usage: slurm_test.sh BUILD_DIR}
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; dump_logs; exit 1; }

[[ $EUID -eq 0 ]] || skip "a Slurm cluster needs root here (slurmd runs jobs as their users)"
for c in munged slurmctld slurmd sbatch squeue scancel sqlite3; do
  command -v "$c" >/dev/null || skip "$c is missing (scripts/setup installs slurm-wlm, munge, sqlite3)"
done
ctl=$build/cli/smallemctl
for b in "$ctl" "$build/worker/smallem-worker" "$build/server/smallem-coordinator"; do
  [[ -x $b ]] || fail "$b is not built"
done

t=$(mktemp -d /tmp/smallem-slurm.XXXXXX)
pids=()
dump_logs() {
  if [[ -f $t/smallem.db ]]; then
    echo "--- runs (id|status|attempt|progress_step|lease_worker), attempts (run|attempt|worker|outcome)"
    sqlite3 -readonly "$t/smallem.db" "SELECT id, status, attempt, progress_step, lease_worker FROM runs" \
      "SELECT run_id, attempt, worker_id, outcome FROM attempts" 2>&1 || true
  fi
  for f in "$t"/coordinator.log "$t"/worker-*.out "$t"/slurmctld.log "$t"/slurmd.log; do
    [[ -f $f ]] && { echo "--- $f (last 20 lines)"; tail -n 20 "$f"; }
  done
  return 0
}
cleanup() {
  if [[ -n ${SLURM_CONF:-} ]]; then
    squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
    # Let slurmd end the job steps (their workers) before it goes.
    for _ in $(seq 1 40); do [[ -z $(squeue -h 2>/dev/null) ]] && break; sleep 0.5; done
  fi
  # Only the processes this script started, newest first.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n ${SMALLEM_KEEP_TMP:-} ]] && echo "kept $t" || rm -rf "$t"
}
trap cleanup EXIT

# Waits up to $1 seconds for the command that follows to succeed.
wait_for() {
  local seconds=$1; shift
  for _ in $(seq 1 $((seconds * 4))); do "$@" && return 0; sleep 0.25; done
  return 1
}

# A port nothing listens on now (slurmctld and slurmd bind them by number).
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  return 1
}

# ---- munge, with a fresh key ----
mkdir -p "$t/munge" "$t/state" "$t/spool"
chmod 711 "$t" "$t/munge"
dd if=/dev/urandom of="$t/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$t/munge/munge.key"
munged -F --force --key-file="$t/munge/munge.key" --socket="$t/munge/socket" \
  --pid-file="$t/munge/munged.pid" --seed-file="$t/munge/seed" \
  --log-file="$t/munge/munged.log" >"$t/munged.out" 2>&1 &
pids+=($!)
wait_for 10 test -S "$t/munge/socket" || skip "munged did not start: $(tail -n 3 "$t/munged.out")"

# ---- slurmctld and slurmd ----
host=$(hostname -s)
export SLURM_CONF=$t/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=smallemtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$t/munge/socket
CredType=cred/munge
StateSaveLocation=$t/state
SlurmdSpoolDir=$t/spool
SlurmctldPidFile=$t/slurmctld.pid
SlurmdPidFile=$t/slurmd.pid
SlurmctldLogFile=$t/slurmctld.log
SlurmdLogFile=$t/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
MpiDefault=none
SwitchType=switch/none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -f "$SLURM_CONF" >"$t/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$t/slurmd.out" 2>&1 &
pids+=($!)
node_idle() { [[ $(sinfo -h -o %t 2>/dev/null) == idle ]]; }
wait_for 30 node_idle ||
  skip "the Slurm node did not come up: $(tail -n 3 "$t/slurmctld.out" "$t/slurmd.out" 2>/dev/null | tr '\n' ' ')"
echo "cluster up: slurmctld and slurmd on $host, munged with a fresh key"

# ---- a coordinator with a worker token, a dataset, the grids ----
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$t/worker.token"
chmod 600 "$t/worker.token"
"$build/server/smallem-coordinator" --listen 127.0.0.1:0 --db "$t/smallem.db" \
  --lease-ms 600000 --worker-token-file "$t/worker.token" --log-level info \
  >"$t/coordinator.log" 2>&1 &
pids+=($!)
listening() { grep -q "listening on 127.0.0.1:" "$t/coordinator.log"; }
wait_for 30 listening || fail "the coordinator did not start"
address=$(grep -o "listening on 127.0.0.1:[0-9]*" "$t/coordinator.log" | head -n 1)
address=${address#listening on }
echo "coordinator on $address"

mkdir -p "$t/corpus"
words=(the model learns a small language of words and numbers while noise hides signal in
  every seed step loss falls)
for d in 0 1 2 3 4 5; do
  for _ in $(seq 1 200); do printf '%s ' "${words[RANDOM % 20]}"; done >"$t/corpus/doc$d.txt"
done
"$ctl" data prepare --vocab 300 --out "$t/data" "$t"/corpus/doc*.txt >"$t/prepare.log" 2>&1 ||
  fail "smallemctl data prepare failed: $(tail -n 3 "$t/prepare.log")"
grid() {  # name budget variants
  printf 'name: %s\ndata: %s\nbase: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4, eval_batches: 4}\nbudget: {%s}\nseeds: [1]\nbaseline: v0\nvariants:\n' \
    "$1" "$t/data" "$2"
  for ((v = 0; v < $3; v++)); do printf '  v%d: {lr: 0.00%d}\n' "$v" $((v + 1)); done
}
grid tiny "steps: 20" 2 >"$t/tiny.yaml"
# Fifteen seconds of training, however loaded the machine: long enough to be
# caught mid-run, short enough to run again.
grid long "minutes: 0.25" 1 >"$t/long.yaml"
db() { sqlite3 -readonly "$t/smallem.db" "$1"; }
runs_of() { db "SELECT r.id FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = '$1'"; }
succeeded() { [[ $(db "SELECT count(*) FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = '$1' AND r.status = 'succeeded'") == "$2" ]]; }
gone() { [[ -z $(squeue -h -j "$1" 2>/dev/null) ]]; }

# ---- 1. a worker job runs a tiny grid to completion ----
"$ctl" submit "$t/tiny.yaml" --coordinator "$address" >/dev/null || fail "submit tiny failed"
submit_args=(slurm submit --coordinator "$address" --nodes 1 --time 00:10 --threads 1
  --cache "$t/cache" --output "$t/worker-%j.out")
SMALLEM_WORKER_TOKEN=$(cat "$t/worker.token") "$ctl" "${submit_args[@]}" --dry-run >"$t/job1.sbatch"
grep -q -- "--signal=TERM@" "$t/job1.sbatch" || fail "the script sets no --signal"
! grep -q -f "$t/worker.token" "$t/job1.sbatch" || fail "the token is in the script"
job1=$(SMALLEM_WORKER_TOKEN=$(cat "$t/worker.token") "$ctl" "${submit_args[@]}" 2>/dev/null) ||
  fail "smallemctl slurm submit failed"
[[ $job1 =~ ^[0-9]+$ ]] || fail "smallemctl slurm submit printed \"$job1\", not a job id"
echo "worker job $job1 submitted"
wait_for 90 succeeded tiny 2 || fail "the tiny grid did not finish in job $job1"
workers=$("$ctl" workers --coordinator "$address")
grep -q "slurm job $job1 on node $host" <<<"$workers" ||
  fail "smallemctl workers does not show the Slurm job: $workers"
echo "tiny grid done in job $job1; smallemctl workers shows:"
echo "$workers"

# ---- 2. scancel mid-run: the run is requeued at once, then finishes once ----
"$ctl" submit "$t/long.yaml" --coordinator "$address" >/dev/null || fail "submit long failed"
run=$(runs_of long)
mid_run() { [[ $(db "SELECT status, progress_step > 0 FROM runs WHERE id = $run") == "leased|1" ]]; }
wait_for 60 mid_run || fail "run $run never made progress in job $job1"
scancel "$job1"
wait_for 60 gone "$job1" || fail "job $job1 did not end after scancel"
row=$(db "SELECT status, lease_losses, engine_failures FROM runs WHERE id = $run")
[[ $row == "queued|0|0" ]] ||
  fail "after scancel, run $run is (status|lease_losses|engine_failures) $row, not queued|0|0"
outcome=$(db "SELECT outcome FROM attempts WHERE run_id = $run AND attempt = 1")
[[ $outcome == released ]] || fail "attempt 1 of run $run ended \"$outcome\", not released"
echo "scancel $job1: run $run released and queued again before the job left the queue"

job2=$("$ctl" "${submit_args[@]}" --worker-token-file "$t/worker.token" 2>/dev/null) ||
  fail "the second smallemctl slurm submit failed"
wait_for 100 succeeded long 1 || fail "run $run did not finish in job $job2"
[[ $(db "SELECT count(*) FROM results WHERE run_id = $run") == 1 ]] || fail "not one result"
attempts=$(db "SELECT group_concat(outcome, ',') FROM (SELECT outcome FROM attempts WHERE run_id = $run ORDER BY attempt)")
[[ $attempts == "released,succeeded" ]] || fail "run $run's attempts ended $attempts"
[[ $(db "SELECT lease_losses + engine_failures FROM runs WHERE id = $run") == 0 ]] ||
  fail "run $run was charged a failure"
echo "run $run finished exactly once in job $job2 (attempts: $attempts)"
echo "PASSED"
