#!/bin/sh
# cpuset is honoured: the task reads its own affinity.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"
[ "$(cat /sys/fs/cgroup/cpuset.cpus.effective)" != 0 ] || skip "one CPU only"

submit cs '{"id": "cs", "tasks": [{"name": "a", "command": "/bin/sh", "args": ["-c", "'$HELPER' affinity; exec sleep 600"],
  "resources": {"cpu": {"cpuset": {"cpus": "1"}}}}]}' >/dev/null
got() { outpost logs cs/a | grep -q .; }
wait_for 10 got || fail "no output"
[ "$(outpost logs cs/a | head -n 1)" = 1 ] || fail "affinity is '$(outpost logs cs/a | head -n 1)', expected 1"
[ "$(cat "$(task_cgroup cs a)/cpuset.cpus")" = 1 ] || fail "cpuset.cpus is '$(cat "$(task_cgroup cs a)/cpuset.cpus")'"
outpost rm cs >/dev/null || fail "rm failed"
echo "affinity 1"
