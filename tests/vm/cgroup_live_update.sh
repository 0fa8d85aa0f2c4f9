#!/bin/sh
# A live memory update takes effect without a restart (same pid) and is
# persisted in the job's spec.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

submit lu '{"id": "lu", "resources": {"memory": {"max": "256MiB"}},
  "tasks": [{"name": "a", "command": "'$HELPER'", "args": ["sleep", "600"],
  "resources": {"memory": {"max": "64MiB"}}}]}' >/dev/null
# Job-level limits are on the job's cgroup, the parent of its tasks'.
[ "$(cat $CG/lu/memory.max)" = 268435456 ] || fail "job memory.max is $(cat $CG/lu/memory.max)"
cg=$(task_cgroup lu a)
pid=$(tpid lu/a)
[ "$(cat $cg/memory.max)" = 67108864 ] || fail "memory.max is $(cat $cg/memory.max)"
outpost update lu/a --memory-max 128MiB --pids-max 50 || fail "update failed"
[ "$(cat $cg/memory.max)" = 134217728 ] || fail "memory.max after update is $(cat $cg/memory.max)"
[ "$(cat $cg/pids.max)" = 50 ] || fail "pids.max after update is $(cat $cg/pids.max)"
[ "$(tpid lu/a)" = "$pid" ] || fail "task restarted by the update (pid $pid -> $(tpid lu/a))"
grep -q "$pid" "$cg/cgroup.procs" || fail "task not in its cgroup"
outpost update lu --memory-max 512MiB >/dev/null || fail "job-level update failed"
[ "$(cat $CG/lu/memory.max)" = 536870912 ] || fail "job memory.max after update is $(cat $CG/lu/memory.max)"
[ "$(tpid lu/a)" = "$pid" ] || fail "task restarted by the job-level update"
outpost --json inspect lu | tr -d ' \n' | grep -q '"memory":{[^}]*"max":134217728' ||
  fail "new limit not in the job's spec: $(outpost --json inspect lu | grep -A3 memory)"
outpost rm lu >/dev/null || fail "rm failed"
echo "memory.max 64MiB -> 128MiB live, pid $pid kept"
