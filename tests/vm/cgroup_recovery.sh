#!/bin/sh
# kill -9 of the agent while limited tasks run: after init respawns it the
# tasks are recovered (same pid) with their cgroups and limits; rm leaves no
# cgroup behind.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

submit rc '{"id": "rc", "tasks": [{"name": "a", "command": "'$HELPER'", "args": ["sleep", "600"],
  "resources": {"memory": {"max": "48MiB"}, "pids": {"max": 10}}}]}' >/dev/null
pid=$(tpid rc/a)
cg=$(task_cgroup rc a)
before=$(outpost_pids | tr '\n' ' ')
for p in $before; do [ "$p" = "$pid" ] || kill -9 "$p"; done
respawned() { agent_init_pid "$before" >/dev/null && outpost status >/dev/null && outpost inspect rc >/dev/null; }
wait_for 30 respawned || fail "agent not respawned: $(wait_output)"
wait_for 10 state_is rc/a running || fail "task not running after recovery: $(outpost inspect rc/a 2>&1)"
[ "$(tpid rc/a)" = "$pid" ] || fail "pid changed: $pid -> $(tpid rc/a)"
grep -qx "$pid" "$cg/cgroup.procs" || fail "task not in $cg"
[ "$(cat $cg/memory.max)" = 50331648 ] || fail "memory.max is $(cat $cg/memory.max)"
[ "$(cat $cg/pids.max)" = 10 ] || fail "pids.max is $(cat $cg/pids.max)"
outpost rm rc >/dev/null || fail "rm failed"
[ ! -d "$CG/rc" ] || fail "cgroups left after rm"
echo "recovered pid $pid in $cg"
