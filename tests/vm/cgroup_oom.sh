#!/bin/sh
# A memory hog under memory.max is OOM-killed, and reported as such: the
# exit result says OOM killed, an "oom-killed" event names it.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

# --detach: the hog dies within its first second, so `outpost run` (which
# waits for the task to stay up min_healthy_time) would rightly fail.
printf '%s\n' '{"id": "oom", "tasks": [{"name": "hog", "command": "'$HELPER'", "args": ["memhog", "256"],
  "restart": {"policy": "never"},
  "resources": {"memory": {"max": "32MiB", "swap_max": "0"}}}]}' >/tmp/oom.json
outpost run --detach -f /tmp/oom.json >/dev/null || fail "outpost run --detach oom failed"
# --detach returns before the task (and its cgroup) exists: wait for it.
wait_for 20 grep -qx 33554432 "$(task_cgroup oom hog)/memory.max" ||
  fail "memory.max of the task cgroup is not 32MiB: $(cat "$(task_cgroup oom hog)/memory.max" 2>&1)"
wait_for 30 state_is oom/hog dead || fail "hog not dead: $(outpost inspect oom/hog 2>&1)"
outpost --json inspect oom/hog | grep -q '"oom_killed": true' || fail "not reported as OOM killed: $(outpost --json inspect oom/hog)"
[ "$(tfield oom/hog last_exit)" = "OOM killed" ] || fail "last_exit is '$(tfield oom/hog last_exit)'"
outpost events oom | grep -q 'oom-killed' || fail "no oom-killed event: $(outpost events oom)"
oom_kills=$(sed -n 's/^oom_kill //p' "$(task_cgroup oom hog)/memory.events")
[ "${oom_kills:-0}" -ge 1 ] || fail "memory.events oom_kill is '$oom_kills'"
outpost rm oom >/dev/null || fail "rm failed"
[ ! -d "$CG/oom" ] || fail "job cgroup left after rm: $(ls "$CG/oom")"
echo "OOM killed at memory.max 32MiB (oom_kill=$oom_kills)"
