#!/bin/sh
# `outpost exec` runs as the task: in its cgroup, so a memory hog exec'd into
# a task with memory.max is OOM-killed there (it would run unbounded outside).
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

submit exoom '{"id": "exoom", "tasks": [{"name": "t", "command": "'$HELPER'", "args": ["sleep", "600"],
  "resources": {"memory": {"max": "32MiB", "swap_max": "0"}}}]}' >/dev/null
cg=$(task_cgroup exoom t)
grep -qx 33554432 "$cg/memory.max" || fail "memory.max of the task cgroup is not 32MiB: $(cat "$cg/memory.max" 2>&1)"
before=$(sed -n 's/^oom_kill //p' "$cg/memory.events")
# memhog sleeps forever once it has its 256 MiB: if it escaped the cgroup,
# exec would end only at its own 60 s deadline, killed by SIGKILL too, but
# with no OOM kill counted in the task's cgroup.
out=$(outpost exec --timeout 60s exoom/t -- "$HELPER" memhog 256 2>&1)
rc=$?
[ "$rc" -ne 0 ] || fail "exec'd memhog exited 0: $out"
after=$(sed -n 's/^oom_kill //p' "$cg/memory.events")
[ "${after:-0}" -gt "${before:-0}" ] || fail "no OOM kill in the task's cgroup (oom_kill $before -> $after); exec said: $out"
last=$(printf '%s\n' "$out" | grep -E '^[0-9]+$' | tail -n 1)
[ "${last:-0}" -lt 32 ] || fail "memhog got ${last} MiB in a 32MiB cgroup: $out"
state_is exoom/t running || fail "the task itself did not survive the exec'd hog: $(outpost inspect exoom/t 2>&1)"
outpost rm exoom >/dev/null || fail "rm failed"
echo "exec'd memhog OOM-killed in the task cgroup after ${last:-0} MiB (oom_kill $before -> $after)"
