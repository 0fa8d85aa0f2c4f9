#!/bin/sh
# A task started under busybox init survives kill -9 of the agent (keeper
# and worker) and is recovered, same pid, after init respawns the agent.
. "$(dirname "$0")/lib/common.sh"

HELPER=/usr/bin/outpost-test-helper
[ -x "$HELPER" ] || skip "no test helper in the image"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

outpost task run --id vm-survivor -- "$HELPER" sleep 600 >/dev/null || fail "task run failed"
task_pid() { outpost --json task inspect vm-survivor | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p'; }
task_state() { outpost --json task inspect vm-survivor | sed -n 's/.*"state": *"\([a-z]*\)".*/\1/p'; }
pid=$(task_pid)
[ -n "$pid" ] && [ -d "/proc/$pid" ] || fail "task not running (pid '$pid')"

before=$(outpost_pids | tr '\n' ' ')
agent=$(agent_init_pid) || fail "no agent process started by init"
# Kill every outpost process (keeper and worker) but the task's own.
for p in $before; do
  [ "$p" = "$pid" ] || kill -9 "$p"
done
[ -d "/proc/$pid" ] || fail "task $pid died with the agent"

respawned() { agent_init_pid "$before" >/dev/null && outpost status >/dev/null; }
wait_for 30 respawned || fail "agent not respawned by init: $(wait_output)"
[ "$(task_state)" = running ] || fail "task not recovered as running: $(outpost task inspect vm-survivor 2>&1)"
[ "$(task_pid)" = "$pid" ] || fail "recovered task has pid $(task_pid), expected $pid"

outpost task stop vm-survivor --timeout 2s >/dev/null || fail "stop of the recovered task failed"
[ "$(task_state)" = exited ] || fail "recovered task did not stop"
[ -d "/proc/$pid" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" && fail "process $pid still alive"
outpost task rm vm-survivor >/dev/null || fail "rm failed"
echo "task $pid survived agent pid $agent and was recovered and stopped"
