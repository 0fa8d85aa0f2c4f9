#!/bin/sh
# Leftover cgroups of tasks the agent does not know (here: made by hand, with
# a process inside) are killed and removed when the agent starts; cgroups of
# known tasks are kept.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

submit keep '{"id": "keep", "tasks": [{"name": "a", "command": "'$HELPER'", "args": ["sleep", "600"]}]}' >/dev/null
kpid=$(tpid keep/a)
mkdir -p "$CG/ghost/ghost.t" || fail "cannot make a ghost cgroup"
sleep 600 &
ghost=$!
echo "$ghost" >"$CG/ghost/ghost.t/cgroup.procs" || fail "cannot move $ghost into the ghost cgroup"
before=$(outpost_pids | tr '\n' ' ')
for p in $before; do [ "$p" = "$kpid" ] || kill -9 "$p"; done
respawned() { agent_init_pid "$before" >/dev/null && outpost status >/dev/null && outpost inspect keep >/dev/null; }
wait_for 30 respawned || fail "agent not respawned: $(wait_output)"
gone() { [ ! -d "$CG/ghost" ]; }
wait_for 10 gone || fail "ghost cgroup still there: $(find $CG/ghost 2>&1)"
wait "$ghost" 2>/dev/null
[ ! -d "/proc/$ghost" ] || fail "process $ghost of the ghost cgroup survived"
[ -d "$(task_cgroup keep a)" ] || fail "the known task's cgroup was removed"
[ "$(tpid keep/a)" = "$kpid" ] || fail "known task not recovered"
outpost rm keep >/dev/null || fail "rm failed"
echo "ghost cgroup and process $ghost removed; keep/a ($kpid) kept"
