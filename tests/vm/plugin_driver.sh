#!/bin/sh
# A task-driver plugin under busybox init: started as a job of the agent
# (the exec driver runs it), it registers, runs a task in that task's
# cgroup with its memory limit, and after kill -9 of the agent (keeper and
# worker; init respawns it) the task is recovered through the driver with
# the same pid.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"

PLUGIN=/usr/bin/test_plugin
[ -x "$PLUGIN" ] || skip "no test_plugin in the image (tools/vmtest --extra build/test_plugin)"
HELPER=/usr/bin/outpost-test-helper
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

printf '%s\n' '{"id": "vmdrv", "tasks": [{"name": "plugin", "command": "'$PLUGIN'",
  "args": ["--type", "TaskDriver", "--name", "vmdrv", "--versions", "v1"]}]}' >/tmp/vmdrv.json
outpost run --detach -f /tmp/vmdrv.json >/dev/null || fail "driver job not submitted"
registered() { outpost plugins | grep -q '^TaskDriver vmdrv'; }
wait_for 30 registered || fail "driver plugin not registered: $(outpost plugins 2>&1)"

printf '%s\n' '{"id": "viad", "tasks": [{"name": "t", "driver": "vmdrv", "command": "'$HELPER'",
  "args": ["sleep", "600"], "resources": {"memory": {"max": "32MiB"}}}]}' >/tmp/viad.json
outpost run --detach -f /tmp/viad.json >/dev/null || fail "job on the driver not submitted"
wait_for 30 state_is viad/t running || fail "task on the driver not running: $(outpost inspect viad 2>&1)"
pid=$(tpid viad/t)
drv=$(tpid vmdrv/plugin)
[ "$(ppid_of "$pid")" = "$drv" ] || fail "task $pid is not the driver's ($drv) child: ppid $(ppid_of "$pid")"
cg=$(task_cgroup viad t)
grep -qx "$pid" "$cg/cgroup.procs" || fail "task $pid not in its cgroup $cg: $(cat /proc/$pid/cgroup)"
[ "$(cat "$cg/memory.max")" = 33554432 ] || fail "memory.max of $cg is $(cat "$cg/memory.max")"

before=$(outpost_pids | tr '\n' ' ')
for p in $before; do
  [ "$p" = "$pid" ] || [ "$p" = "$drv" ] || kill -9 "$p"
done
respawned() { agent_init_pid "$before" >/dev/null && outpost status >/dev/null; }
wait_for 30 respawned || fail "agent not respawned by init: $(wait_output)"
wait_for 40 state_is viad/t running || fail "task not recovered: $(outpost inspect viad 2>&1)"
[ "$(tpid viad/t)" = "$pid" ] || fail "recovered task has pid $(tpid viad/t), expected $pid"
[ -d "/proc/$pid" ] || fail "task $pid gone"

outpost rm viad >/dev/null || fail "rm of the driver's job failed"
[ -d "/proc/$pid" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" && fail "task $pid still alive after rm"
outpost rm vmdrv >/dev/null || fail "rm of the driver job failed"
echo "driver plugin $drv ran task $pid in $cg (memory.max 32MiB); it was recovered after the agent was killed"
