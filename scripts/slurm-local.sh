#!/usr/bin/env bash
# A one-node Slurm cluster on localhost, to check that ZCode trains as one
# 2-rank job inside a real Slurm allocation (issue #20, item 11):
#   1. installs Debian's slurm-wlm and munge if they are missing (apt-get);
#   2. starts munged, slurmctld and slurmd as root, in the foreground of
#      background jobs of this script, with every file in a private state
#      folder (no systemd, nothing under /etc or /var);
#   3. submits examples/slurm/train.sbatch with sbatch twice: with mpirun inside
#      the allocation, then with `srun --mpi=pmix` (only when this Slurm has the
#      pmix plugin; otherwise it says so and skips that variant);
#   4. checks from each run folder that the ranks formed one world of 2
#      ("Training on 2 processes (...)" from rank 0, logs/rank_1.log), not two
#      one-process runs;
#   5. stops every daemon it started, on success and on failure (EXIT trap).
# Every wait has a deadline; a failure ends with one line
# "slurm-local: FAILED: <what>" and exit status 1 (2 for a usage error).
#
# usage: scripts/slurm-local.sh [--zcode-host PATH] [--state-dir DIR]
#                               [--port N] [--job-timeout S] [--keep]
#   --zcode-host PATH  default $ZCODE_HOST, else build/release/bin/zcode-host
#   --state-dir DIR    where the cluster's files, job output and run folders go
#                      (created; must be empty or from an earlier run of this
#                      script). Default: a new /tmp/zcode-slurm.XXXXXX, removed
#                      after a successful run unless --keep.
#   --port N           slurmctld listens on N, slurmd on N+1 (default 16817,
#                      away from a system Slurm's 6817/6818)
#   --job-timeout S    deadline of each training job (default 600)
#   --keep             keep the state folder after a successful run
# Needs root (apt-get, and slurmd runs jobs as root here), Open MPI
# (scripts/install-deps.sh), the corpus (scripts/make-corpus.sh) and the
# tokenizer assets (scripts/fetch-assets.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# munged, slurmctld and slurmd live in /usr/sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

host_bin=${ZCODE_HOST:-$ROOT/build/release/bin/zcode-host}
state=""
port=16817
job_timeout=600
keep=0

usage() { sed -n '18,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --zcode-host) host_bin=${2:?--zcode-host needs a path}; shift 2 ;;
    --state-dir) state=${2:?--state-dir needs a folder}; shift 2 ;;
    --port) port=${2:?--port needs a number}; shift 2 ;;
    --job-timeout) job_timeout=${2:?--job-timeout needs seconds}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "slurm-local: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $port =~ ^[0-9]+$ && $port -ge 1024 && $port -lt 65535 ]] || { echo "slurm-local: --port must be 1024..65534" >&2; exit 2; }
[[ $job_timeout =~ ^[0-9]+$ && $job_timeout -gt 0 ]] || { echo "slurm-local: --job-timeout must be a positive number of seconds" >&2; exit 2; }

log() { echo "slurm-local: $*"; }
# fail REASON: exits 1; the EXIT trap stops the cluster and then prints the
# reason as the very last line.
failure=""
verdict=""
fail() {
  failure=$*
  exit 1
}
# Prints the last lines of a log file to stderr, as context for a failure.
show_tail() {
  [ -s "$1" ] || return 0
  echo "---- last lines of $1" >&2
  tail -n "${2:-15}" "$1" >&2
  echo "----" >&2
}

# The verdict is the very last line: OK, or FAILED with the reason. A command
# that stops the script through `set -e` is named by the ERR trap (-E: also
# inside functions).
set -E
last_error=""
trap 'last_error="line $LINENO: $BASH_COMMAND"' ERR
print_verdict() {
  if [ "$1" -ne 0 ]; then
    echo "slurm-local: FAILED: ${failure:-unexpected error (exit status $1) at ${last_error:-an unknown place}}" >&2
  elif [ -n "$verdict" ]; then
    log "$verdict"
  fi
}
# Until the cluster part exists, the exit trap only has to print the verdict.
trap 'print_verdict $?' EXIT
trap 'fail "interrupted by a signal"' INT TERM HUP

[ "$(id -u)" -eq 0 ] || fail "needs root (apt-get, and slurmd must run as root to start jobs)"

# ---- what the job needs -----------------------------------------------------
[ -x "$host_bin" ] || fail "zcode-host not found at $host_bin (build it, or pass --zcode-host PATH / ZCODE_HOST)"
host_bin=$(cd "$(dirname "$host_bin")" && pwd)/$(basename "$host_bin")
command -v mpirun >/dev/null || fail "mpirun is missing (scripts/install-deps.sh installs openmpi-bin)"
[ -s "$ROOT/data/fortunes/train.jsonl" ] || fail "data/fortunes/train.jsonl is missing (run scripts/make-corpus.sh)"
sbatch_script=$ROOT/examples/slurm/train.sbatch
[ -r "$sbatch_script" ] || fail "$sbatch_script is missing"

# ---- the state folder -------------------------------------------------------
# The path goes into sbatch --export (comma-separated) and slurm.conf, and
# munge's socket path must fit in 107 bytes.
check_state_path() {
  [[ $state =~ ^[A-Za-z0-9_./+-]+$ ]] || fail "state folder path may only hold letters, digits and _./+-: $state"
  [ ${#state} -le 80 ] || fail "state folder path is longer than 80 characters (munge's socket path would not fit): $state"
}
made_state=0
if [ -z "$state" ]; then
  state=$(mktemp -d /tmp/zcode-slurm.XXXXXX) || fail "cannot create a state folder under /tmp"
  made_state=1
else
  mkdir -p "$state" || fail "cannot create the state folder $state"
  state=$(cd "$state" && pwd)
  check_state_path
  # Never clear a folder this script did not make: only an empty one or one
  # that carries the marker of an earlier run.
  if [ -n "$(ls -A "$state")" ] && [ ! -e "$state/.zcode-slurm-local" ]; then
    fail "state folder $state is not empty and was not made by this script"
  fi
  rm -rf "${state:?}"/{etc,munge,ctld,spool,tmp,log,job,outputs}
fi
# munged wants every folder above its socket searchable by all and writable
# by root only.
chmod 0755 "$state"
touch "$state/.zcode-slurm-local"
mkdir -p "$state"/{etc,munge,ctld,spool,tmp,log,job,outputs}
chmod 0755 "$state/munge"
conf=$state/etc/slurm.conf
socket=$state/munge/munge.socket.2
# Marks every process started here (the daemons through `env`, the job tasks
# through sbatch --export): the final sweep kills exactly those, by pid.
marker="ZCODE_SLURM_LOCAL=$state"

# ---- stopping everything, whatever happened ---------------------------------
declare -A daemon_pid=()
jobs_submitted=()
made_policy=0

# pid alive (and not a zombie we have not reaped yet).
# The state is the field after the ")" that closes the command name.
alive() { kill -0 "$1" 2>/dev/null && [ "$(sed 's/.*) \([A-Za-z]\).*/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# Sends TERM to pid $2 (named $1), waits up to 10 s, then KILLs it.
stop_pid() {
  local name=$1 pid=$2 deadline=$((SECONDS + 10))
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  if alive "$pid"; then
    log "$name (pid $pid) ignored SIGTERM for 10 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  # Stopping has its own deadlines; a second Ctrl-C must not leave daemons behind.
  trap - EXIT
  trap '' INT TERM HUP
  set +e
  if [ ${#daemon_pid[@]} -gt 0 ]; then
    log "stopping the cluster"
    # Jobs first, while slurmctld and slurmd can still end them in order
    # (slurmd leaves running jobs alone when it stops).
    if [ ${#jobs_submitted[@]} -gt 0 ] && [ -n "${daemon_pid[slurmctld]:-}" ] && alive "${daemon_pid[slurmctld]}"; then
      timeout 20 scancel "${jobs_submitted[@]}" 2>/dev/null
      local deadline=$((SECONDS + 20))
      while [ -n "$(timeout 10 squeue -h -o %i 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 1; done
    fi
    local d stopped=()
    for d in slurmd slurmctld munged; do
      [ -n "${daemon_pid[$d]:-}" ] || continue
      stop_pid "$d" "${daemon_pid[$d]}"
      stopped+=("$d")
    done
    # Anything left that carries the marker (a slurmstepd, a rank, mpirun):
    # started by this cluster, so ours to end.
    local p left=()
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      [ "$p" = $$ ] && continue
      grep -qzxF "$marker" "/proc/$p/environ" 2>/dev/null && left+=("$p")
    done
    if [ ${#left[@]} -gt 0 ]; then
      log "killing ${#left[@]} leftover process(es) of this cluster: ${left[*]}"
      kill -KILL "${left[@]}" 2>/dev/null
    fi
    log "cluster stopped: ${stopped[*]}"
  fi
  [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  if [ $rc -eq 0 ] && [ $made_state = 1 ] && [ $keep = 0 ]; then
    rm -rf "$state"
  else
    log "state folder kept: $state"
  fi
  print_verdict "$rc"
  exit "$rc"
}
trap cleanup EXIT

# ---- packages ---------------------------------------------------------------
need=(munged mungekey munge unmunge slurmctld slurmd sbatch srun scontrol sinfo squeue scancel)
missing=()
for c in "${need[@]}"; do command -v "$c" >/dev/null || missing+=("$c"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian's slurm-wlm and munge (missing: ${missing[*]}); log: $state/log/apt.log"
  # Their postinst scripts would start the system munge and Slurm services;
  # policy-rc.d exiting 101 is Debian's switch that forbids it. Made only for
  # the install, and only when the machine has none.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# made by zcode scripts/slurm-local.sh for one apt-get install\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  apt_install() {
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q --no-install-recommends slurm-wlm munge \
      >>"$state/log/apt.log" 2>&1
  }
  # A machine whose package lists are old or missing needs an update first.
  if ! apt_install; then
    if ! { timeout 600 apt-get update -q >>"$state/log/apt.log" 2>&1 && apt_install; }; then
      show_tail "$state/log/apt.log"
      fail "apt-get install slurm-wlm munge failed (log above)"
    fi
  fi
  if [ $made_policy = 1 ]; then rm -f /usr/sbin/policy-rc.d; made_policy=0; fi
  for c in "${need[@]}"; do command -v "$c" >/dev/null || fail "'$c' is still missing after installing slurm-wlm and munge"; done
fi
log "$(slurmctld -V), $(munged -V 2>&1 | head -n1), $(mpirun --version 2>/dev/null | head -n1)"

# ---- configuration ----------------------------------------------------------
node=$(hostname -s)
# Two tasks need two CPUs. slurmd reports the cores it finds; config_overrides
# makes slurmctld trust this file instead, so a 1-core machine still runs the
# 2-rank job (oversubscribed) rather than draining the node for "Low CPUs".
cpus=$(nproc)
[ "$cpus" -ge 2 ] || cpus=2
for p in "$port" "$((port + 1))"; do
  if timeout 2 bash -c ": </dev/tcp/127.0.0.1/$p" 2>/dev/null; then
    fail "port $p on 127.0.0.1 is in use (another slurmctld/slurmd?): pick others with --port"
  fi
done

cat >"$conf" <<EOF
# slurm.conf of a one-node test cluster made by zcode scripts/slurm-local.sh.
ClusterName=zcodelocal
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
# Everything runs as root in this throwaway cluster: no slurm user to create,
# and root may start jobs as root. Never do this on a shared machine.
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Our own munged, not the system one at /run/munge.
AuthInfo=socket=$socket
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/ctld/slurmctld.pid
SlurmdPidFile=$state/spool/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# Job scratch files (the PMIx plugin's client folders among them) stay in here.
TmpFS=$state/tmp
# No mail from a test cluster (and no "MailProg is invalid" at start-up).
MailProg=/bin/true
# A container has no cgroup tree of its own to give slurmd: track a job's
# processes through /proc and do no CPU binding from Slurm.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SlurmdParameters=config_overrides
# A registered node is usable at once, and a finished job stays visible to
# scontrol for 10 minutes (there is no accounting database to ask later).
ReturnToService=2
MinJobAge=600
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$conf
# Variables of an enclosing allocation would confuse sbatch/srun here.
while read -r v; do unset "$v"; done < <(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p' | grep -vx SLURM_CONF)

# ---- daemons ----------------------------------------------------------------
# Each runs in the foreground (-F / -D) as a background job of this script, so
# its pid is known without trusting a pid file, and `env` gives it the marker.
start_daemon() {
  local name=$1
  shift
  env "$marker" "$@" >"$state/log/$name.out" 2>&1 &
  daemon_pid[$name]=$!
  log "started $name (pid ${daemon_pid[$name]})"
}
# Fails naming $1 when its process has exited, with its log.
check_alive() {
  alive "${daemon_pid[$1]}" && return 0
  show_tail "$state/log/$1.out"
  [ -e "$2" ] && show_tail "$2"
  fail "$1 exited during start-up (see the log above)"
}

mungekey --create --keyfile="$state/munge/munge.key" >/dev/null 2>&1 ||
  fail "mungekey could not create $state/munge/munge.key"
chmod 0400 "$state/munge/munge.key"
start_daemon munged munged --foreground --socket="$socket" --key-file="$state/munge/munge.key" \
  --pid-file="$state/munge/munged.pid" --log-file="$state/log/munged.log" --seed-file="$state/munge/munged.seed"
deadline=$((SECONDS + 20))
until munge --no-input --socket="$socket" 2>/dev/null | unmunge --socket="$socket" >/dev/null 2>&1; do
  check_alive munged "$state/log/munged.log"
  [ $SECONDS -lt $deadline ] || fail "munged did not answer on $socket within 20 s"
  sleep 0.5
done

# -c: a cold start, no state from an earlier cluster in this folder.
start_daemon slurmctld slurmctld -D -c -f "$conf"
deadline=$((SECONDS + 30))
until timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; do
  check_alive slurmctld "$state/log/slurmctld.log"
  [ $SECONDS -lt $deadline ] || { show_tail "$state/log/slurmctld.log"; fail "slurmctld did not answer scontrol ping within 30 s"; }
  sleep 1
done

start_daemon slurmd slurmd -D -f "$conf"
deadline=$((SECONDS + 60))
while :; do
  check_alive slurmd "$state/log/slurmd.log"
  node_state=$(timeout 10 sinfo -h -N -n "$node" -o %T 2>/dev/null || true)
  case $node_state in
    idle) break ;;
    drain* | down* | fail*)
      show_tail "$state/log/slurmd.log"
      fail "node $node is $node_state: $(timeout 10 scontrol show node "$node" | grep -o 'Reason=.*' || echo 'no reason given')"
      ;;
  esac
  [ $SECONDS -lt $deadline ] || { show_tail "$state/log/slurmd.log"; fail "node $node did not become idle within 60 s (state: ${node_state:-none})"; }
  sleep 1
done
log "cluster up: $(timeout 10 sinfo -h -o '%P %D node %N %c CPUs %T')"

# ---- jobs -------------------------------------------------------------------
# A tiny run of the quickstart model: 4 steps of 2 sequences x 64 tokens per
# rank, one checkpoint at the end. hardware.devices and hardware.num_threads
# come from the allocation (train.sbatch).
run_args=(--set training.max_steps=4 --set scheduler.warmup_steps=1 --set training.gradient_accumulation=1
  --set training.eval_every=1000 --set training.save_every=4 --set training.log_every=1
  --set data.batch_size=2 --set model.max_seq_len=64 --set data.num_workers=0 --set evaluation.max_batches=2
  --set "logging.output_dir=$state/outputs")

# run_job VARIANT LAUNCHER [MPIRUN_ARGS]: submits train.sbatch on 2 tasks x 1
# CPU, waits for it and checks that its run folder is one 2-rank run.
run_job() {
  local variant=$1 launcher=$2 mpirun_args=${3:-} out="$state/job/$1.out" run="$state/outputs/slurm_$1"
  local id
  id=$(timeout 30 sbatch --parsable --job-name="zcode-$variant" --nodes=1 --ntasks=2 --ntasks-per-node=2 \
    --cpus-per-task=1 --time="$(((job_timeout + 59) / 60))" --chdir="$ROOT" --output="$out" \
    --export="ALL,$marker,ZCODE_HOST=$host_bin,ZCODE_LAUNCHER=$launcher,ZCODE_MPIRUN_ARGS=$mpirun_args" \
    "$sbatch_script" "${run_args[@]}" --set "experiment_name=slurm_$variant" 2>"$state/log/sbatch-$variant.err") ||
    { show_tail "$state/log/sbatch-$variant.err"; fail "sbatch of the $variant job was refused"; }
  id=${id%%;*}
  jobs_submitted+=("$id")
  log "submitted job $id ($variant): sbatch --nodes=1 --ntasks=2 --cpus-per-task=1 examples/slurm/train.sbatch (ZCODE_LAUNCHER=$launcher)"
  local deadline=$((SECONDS + job_timeout)) info job_state exit_code
  while :; do
    info=$(timeout 10 scontrol show job -o "$id" 2>/dev/null || true)
    job_state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
    case $job_state in
      PENDING | CONFIGURING | RUNNING | COMPLETING | "") ;;
      *) break ;;
    esac
    check_alive slurmd "$state/log/slurmd.log"
    if [ $SECONDS -ge $deadline ]; then
      show_tail "$out"
      fail "job $id ($variant) did not finish within $job_timeout s (state ${job_state:-unknown}; cancelled)"
    fi
    sleep 2
  done
  exit_code=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$info")
  if [ "$job_state" != COMPLETED ] || [ "$exit_code" != 0:0 ]; then
    show_tail "$out" 30
    fail "job $id ($variant) ended $job_state with exit code ${exit_code:-?} (output: $out)"
  fi
  # One world of 2: rank 0 says so and names the launcher it recognised, and
  # rank 1 wrote its own log into the same run folder. Two one-process runs
  # would each say "Training on 1 device(s)" and write no rank_1.log.
  local line
  line=$(grep -m1 'Training on [0-9]* processes (' "$run/logs/console.log" 2>/dev/null || true)
  case $line in
    *"Training on 2 processes ("*"($launcher)"*) ;;
    "") show_tail "$out"; fail "job $id ($variant): $run/logs/console.log has no 'Training on 2 processes' line: the ranks did not form one world" ;;
    *) fail "job $id ($variant): expected 2 processes launched by $launcher, rank 0 logged: ${line#*] }" ;;
  esac
  [ -s "$run/logs/rank_1.log" ] || fail "job $id ($variant): $run/logs/rank_1.log is missing: rank 1 did not join the run"
  [ -e "$run/checkpoints/latest" ] || fail "job $id ($variant): no checkpoints/latest in $run"
  log "job $id ($variant) COMPLETED, exit code 0:0, in $run:"
  echo "    ${line#*] }"
  grep -E 'Step 4/4 \||Checkpoint saved' "$run/logs/console.log" | sed 's/^\[[A-Z]*\] /    /'
  echo "    logs/rank_1.log: $(wc -l <"$run/logs/rank_1.log") lines"
}

# On a 1-core machine Open MPI would refuse to bind 2 ranks to 1 core.
mpirun_args=""
[ "$(nproc)" -ge 2 ] || mpirun_args="--oversubscribe --bind-to none"
run_job mpirun mpirun "$mpirun_args"

variants="sbatch + mpirun"
mpi_list=$(timeout 10 srun --mpi=list 2>&1 || true)
if grep -qw pmix <<<"$mpi_list"; then
  log "srun --mpi=list offers pmix ($(grep -o 'pmix_v[0-9]*' <<<"$mpi_list" | tr '\n' ' ' | sed 's/ $//')): running the srun variant"
  run_job srun srun
  variants+=", sbatch + srun --mpi=pmix"
else
  log "SKIPPED: srun --mpi=pmix (this Slurm has no pmix MPI plugin; srun --mpi=list offers: $(grep -v ':' <<<"$mpi_list" | tr -s ' \t\n' ' '))"
fi

# cleanup (the EXIT trap) prints it once the cluster is down.
verdict="OK: Slurm ran ZCode as one 2-rank job ($variants)"
