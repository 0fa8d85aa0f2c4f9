#!/bin/sh
# cgroup.kill on stop kills a daemonised grandchild (its own session,
# reparented to the keeper), and rm removes the cgroups.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

submit gk '{"id": "gk", "tasks": [{"name": "a", "command": "/bin/sh", "args": ["-c", "'$HELPER' orphan 600; exec sleep 600"]}]}' >/dev/null
got() { outpost logs gk/a | grep -q '^[0-9]'; }
wait_for 10 got || fail "no orphan pid printed"
orphan=$(outpost logs gk/a | head -n 1)
[ -d "/proc/$orphan" ] || fail "orphan $orphan not running"
grep -qx "$orphan" "$(task_cgroup gk a)/cgroup.procs" || fail "orphan not in the task's cgroup"
outpost stop gk --timeout 1s >/dev/null || fail "stop failed"
gone() { [ ! -d "/proc/$orphan" ] || grep -q '^State:[[:space:]]*Z' "/proc/$orphan/status"; }
wait_for 5 gone || fail "daemonised grandchild $orphan survived the stop"
outpost rm gk >/dev/null || fail "rm failed"
[ ! -d "$CG/gk" ] || fail "cgroups left after rm: $(find $CG/gk -type d)"
echo "grandchild $orphan killed with its task"
