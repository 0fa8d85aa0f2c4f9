#!/usr/bin/env bash
# The chaos suite: random kill -9 of the worker, the keeper or the whole
# agent at random moments of a churning workload, with the invariants of
# docs/process-model.md checked after every recovery (tests/chaos/check.py).
#
#   tests/chaos/chaos.sh OUTPOST HELPER [--cycles N] [--seed S] [--keep] [--parallel P]
#
# --parallel P runs P independent agents side by side (seeds S, S+1, ...),
# splitting the cycles between them: the cycles are mostly waits (restart
# back-offs, recoveries), so this is how a 1,000-cycle run fits in an hour.
#
# One cycle: start one operation in the background (submit a job, update
# one, stop, restart, remove, add or remove a jobs.d file), wait a random
# 0-300 ms, kill -9 the worker (50%), the keeper (20%) or both (30%), bring
# the agent back (the keeper restarts a worker; after a keeper death a new
# `outpost agent` is started, as init would), let the operation finish, then
# wait (bounded) until the invariants hold. Throughout, counter tasks print
# "<token> <n>" lines into tiny log files (4 KiB, so kills land in
# rotations), dynamic-user tasks come and go, and tasks that exit 3 check
# exit codes. Every 10 cycles and at the end the counters' logs are checked:
# no lost and no repeated line. A failure prints the cycle and the seed;
# the same seed replays the same choices (timings differ, being real).
#
# Prints "chaos: N cycles, seed S, ... : ok" on success; exit 1 on the first
# broken invariant (the run dir is kept then, and with --keep).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -ge 2 ] || { echo "usage: $0 OUTPOST HELPER [--cycles N] [--seed S] [--keep]" >&2; exit 2; }
export OUTPOST="$(realpath "$1")" HELPER="$(realpath "$2")"
shift 2
CYCLES=1000 SEED="" KEEP=0 PARALLEL=1 INSTANCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cycles) CYCLES="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --parallel) PARALLEL="$2"; shift 2 ;;
    --instance) INSTANCE="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$SEED" ] || SEED=$(( $(od -An -N2 -tu2 /dev/urandom) ))
if [ "$PARALLEL" -gt 1 ]; then
  echo "chaos: $PARALLEL instances, $CYCLES cycles in all, seeds $SEED..$((SEED + PARALLEL - 1))"
  pids=() rc=0
  for ((i = 0; i < PARALLEL; i++)); do
    n=$((CYCLES / PARALLEL + (i < CYCLES % PARALLEL ? 1 : 0)))
    args=(--cycles "$n" --seed $((SEED + i)) --instance "$i")
    [ $KEEP = 1 ] && args+=(--keep)
    "$0" "$OUTPOST" "$HELPER" "${args[@]}" > >(sed -u "s/^/[$i] /") 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  echo "chaos: $PARALLEL instances: $([ $rc = 0 ] && echo ok || echo FAILED)"
  exit $rc
fi
RANDOM=$SEED
# shellcheck source=../integration/lib.sh
. "$here/../integration/lib.sh"
CHECK="$here/check.py"

T="$(mktemp -d /tmp/outpost-chaos.XXXXXX)"
chmod 0711 "$T"  # dynamic users traverse it to their task dirs
SOCK="$T/run/outpost.sock"
echo "chaos: seed $SEED, $CYCLES cycles, run dir $T"

finish() {
  local rc=$?
  cleanup_agents
  if [ $rc -eq 0 ] && [ $KEEP = 0 ]; then rm -rf "$T"; else echo "chaos: run dir kept: $T"; fi
  exit $rc
}
trap finish EXIT
# fail (from lib.sh) exits; say where.
chaos_fail() { echo "chaos: FAILED in cycle $CYCLE (seed $SEED): $*"; tail -n 30 "$T/agent.log" | sed 's/^/  agent: /'; exit 1; }

DYN=0
[ "$(id -u)" = 0 ] && DYN=1
mkdir -p "$T/bin" "$T/jobs.d"
chmod 0755 "$T/bin"
cat >"$T/bin/counter.sh" <<'EOF'
#!/bin/sh
# Numbered lines under a token unique to this run of the task; on SIGTERM
# one "end" line with the last number.
tok="$$-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
i=0
trap 'echo "$tok end $i"; exit 0' TERM
while :; do i=$((i + 1)); echo "$tok $i"; sleep 0.02; done
EOF
chmod 0755 "$T/bin/counter.sh"
UID0=$((70000 + INSTANCE * 100))
write_config "\"dynamic_users\": \"$UID0-$((UID0 + 99))\", \"log_level\": \"debug\""
# The agents this script kills are not waited for: no "Killed" job notices.
agent_up() { start_agent; disown "$AGENT_PID" 2>/dev/null; }
agent_up

worker_pid() { op status --json 2>/dev/null | json_get pid; }
keeper_pid() { op status --json 2>/dev/null | json_get keeper_pid; }
new_worker_answers() { local p; p="$(worker_pid)" && [ -n "$p" ] && [ "$p" != "$1" ]; }

# job_json ID GEN [dynamic] [exit3]: a job with a counter task (and an
# "exit3" task that exits with code 3 once, never restarted).
job_json() {
  local id="$1" gen="$2" user="" extra=""
  [ "${3:-}" = dynamic ] && [ $DYN = 1 ] && user=', "user": "dynamic"'
  [ "${4:-}" = exit3 ] && extra=', {"name": "exit3", "command": "/bin/sh", "args": ["-c", "sleep 0.5; exit 3"], "restart": {"policy": "never"}}'
  printf '{"id": "%s", "tasks": [{"name": "count", "command": "/bin/sh", "args": ["%s"], "env": {"GEN": "%s"}%s, "kill_timeout": "10s", "restart": {"policy": "always", "delay": "1s", "attempts": 0}, "logs": {"max_file_size": "4KiB", "max_files": 1000}}%s]}\n' \
    "$id" "$T/bin/counter.sh" "$gen" "$user" "$extra"
}

# Two jobs that live through the whole run (their logs are checked), and
# up to six that come and go.
job_json keep-a 0 >"$T/keep-a.json"
job_json keep-b 0 dynamic >"$T/keep-b.json"
op run -f "$T/keep-a.json" --detach >/dev/null || fail "submit keep-a"
op run -f "$T/keep-b.json" --detach >/dev/null || fail "submit keep-b"

pick() { echo $((RANDOM % $1)); }

# One operation, run in the background by the cycle.
operation() {
  local what="$1" n="$2"
  case "$what" in
    submit) job_json "eph-$n" "$CYCLE" "$([ $((n % 2)) = 0 ] && echo dynamic)" exit3 | op run -f - --detach ;;
    update) job_json "keep-$n" "$CYCLE" "$([ "$n" = b ] && echo dynamic)" | op run -f - --detach ;;
    stop) op stop "keep-$n" ;;
    restart) op restart "keep-$n" ;;
    rm) op rm "eph-$n" ;;
    file-add) job_json "file-$n" "$CYCLE" "" exit3 >"$T/jobs.d/.file-$n.tmp" && mv "$T/jobs.d/.file-$n.tmp" "$T/jobs.d/file-$n.json" ;;
    file-rm) rm -f "$T/jobs.d/file-$n.json" ;;
  esac
}

check_logs() {
  local job out
  for job in keep-a keep-b; do
    # A rotation in progress renames the files one by one: a read that meets
    # it sees a file missing. A real loss stays; a rotation is done in ms.
    out="$(wait_for 10 python3 "$CHECK" logs "$T" "$T/state/logs/$job.count" count)" ||
      chaos_fail "logs of $job: $(python3 "$CHECK" logs "$T" "$T/state/logs/$job.count" count)"
    LOGSUMMARY="$out"
  done
}

KILLS_W=0 KILLS_K=0 KILLS_A=0 CONVERGE_MAX=0
CYCLE=0
for ((CYCLE = 1; CYCLE <= CYCLES; CYCLE++)); do
  ops=(submit submit update update stop restart rm file-add file-rm)
  what="${ops[$(pick ${#ops[@]})]}"
  case "$what" in
    update | stop | restart) n=$([ "$(pick 2)" = 0 ] && echo a || echo b) ;;
    *) n=$(pick 6) ;;
  esac
  delay_ms=$(pick 300)
  target=$(pick 10)
  w="$(worker_pid)"; k="$(keeper_pid)"
  [ -n "$w" ] && [ -n "$k" ] || chaos_fail "agent not answering before the cycle"
  operation "$what" "$n" >>"$T/ops.log" 2>&1 &
  opid=$!
  sleep "$(printf '0.%03d' "$delay_ms")"  # a random moment to strike, not a synchronisation
  if [ "$target" -lt 5 ]; then
    KILLS_W=$((KILLS_W + 1))
    kill -9 "$w" 2>/dev/null
    # The keeper restarts a killed worker with a backoff (0.5 s doubling up to
    # 30 s while workers keep dying young; docs/process-model.md).
    wait_for 45 new_worker_answers "$w" >/dev/null || chaos_fail "no new worker after killing worker $w"
  else
    if [ "$target" -lt 7 ]; then KILLS_K=$((KILLS_K + 1)); kill -9 "$k"; else KILLS_A=$((KILLS_A + 1)); kill -9 "$k" "$w" 2>/dev/null; fi
    date +%s.%N >>"$T/keeper-deaths"
    # The worker notices the keeper is gone and exits too.
    wait_gone "$k" 10 || chaos_fail "keeper $k survived kill -9"
    wait_gone "$w" 20 || chaos_fail "worker $w did not exit after its keeper died"
    agent_up
  fi
  wait "$opid" 2>/dev/null  # it may have failed with the agent: fine
  t0=$SECONDS
  if ! out="$(wait_for 60 python3 "$CHECK" state "$OUTPOST" "$SOCK" "$T")"; then
    chaos_fail "after $what $n and a kill ($target) at ${delay_ms} ms: $(python3 "$CHECK" state "$OUTPOST" "$SOCK" "$T" 2>&1)"
  fi
  [ $((SECONDS - t0)) -gt $CONVERGE_MAX ] && CONVERGE_MAX=$((SECONDS - t0))
  [ $((CYCLE % 10)) = 0 ] && check_logs
  [ $((CYCLE % 50)) = 0 ] && echo "chaos: $CYCLE cycles ok"
done
CYCLE=end
# Stop everything gracefully: every counter writes its end line.
op stop keep-a >/dev/null || chaos_fail "final stop keep-a"
op stop keep-b >/dev/null || chaos_fail "final stop keep-b"
check_logs
# The stops and the last cycle's jobs.d changes settle as every cycle's do:
# the same bounded wait for the state to hold (and its reason when it
# does not, stderr included).
wait_for 60 python3 "$CHECK" state "$OUTPOST" "$SOCK" "$T" >/dev/null ||
  chaos_fail "final state: $(python3 "$CHECK" state "$OUTPOST" "$SOCK" "$T" 2>&1)"
echo "chaos: $CYCLES cycles, seed $SEED: kills worker $KILLS_W, keeper $KILLS_K, whole agent $KILLS_A; longest convergence ${CONVERGE_MAX}s; last $LOGSUMMARY: ok"
