#!/bin/sh
# outpost rm of a task with several processes holding memory: after
# cgroup.kill they take a moment to exit (freeing 40 MiB each), so the first
# rmdir of the task's cgroup meets EBUSY. The agent retries, so the cgroups
# are gone, without a warning.
# vmtest-timeout: 240
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

for round in 1 2 3; do
  submit busy '{"id": "busy", "tasks": [{"name": "a", "command": "/bin/sh", "args": ["-c", "for i in 1 2 3 4 5; do '$HELPER' memhog 40 >/dev/null & done; exec sleep 600"]}]}' >/dev/null
  held() { [ "$(cat "$(task_cgroup busy a)/memory.current")" -ge $((190 << 20)) ]; }
  wait_for 60 held || fail "round $round: the task's 5 x 40 MiB are not held after 60 s"
  outpost rm busy >/dev/null || fail "round $round: rm failed"
  wait_for 5 test ! -d "$CG/busy" || fail "round $round: cgroups left 5 s after rm: $(find "$CG/busy" -type d | tr '\n' ' ')"
done
if grep 'cannot remove task cgroup' /var/log/outpost.log; then fail "the agent warned about a cgroup it removed"; fi
echo "3 rounds: 6 processes holding 200 MiB killed and the cgroups removed each time"
