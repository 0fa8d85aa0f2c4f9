#!/bin/sh
# A fork bomb is stopped by pids.max and the agent stays responsive; stop
# kills every process of it (cgroup.kill).
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

submit bomb '{"id": "bomb", "tasks": [{"name": "b", "command": "'$HELPER'", "args": ["forkbomb"],
  "resources": {"pids": {"max": 20}}}]}' >/dev/null
cg=$(task_cgroup bomb b)
bombed() { outpost logs bomb/b | grep -q 'fork failed after'; }
wait_for 20 bombed || fail "the fork bomb was not stopped: $(outpost logs bomb/b | tail -n 3); pids.current $(cat $cg/pids.current)"
n=$(outpost logs bomb/b | sed -n 's/fork failed after \([0-9]*\).*/\1/p')
[ "$n" -le 19 ] || fail "fork bomb made $n children with pids.max 20"
[ "$(cat $cg/pids.current)" -le 20 ] || fail "pids.current $(cat $cg/pids.current) > 20"
t0=$(now)
outpost status >/dev/null || fail "agent not responsive during the fork bomb"
outpost ps >/dev/null || fail "ps failed during the fork bomb"
outpost stop bomb --timeout 1s >/dev/null || fail "stop failed"
[ "$(cat $cg/pids.current 2>/dev/null || echo 0)" = 0 ] || fail "processes left after stop: $(cat $cg/cgroup.procs)"
outpost rm bomb >/dev/null || fail "rm failed"
echo "fork bomb stopped after $n children; agent answered at $t0"
