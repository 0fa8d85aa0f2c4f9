#!/bin/sh
# kill -9 of the agent: busybox init respawns it (inittab `respawn`) and the
# new agent answers `outpost status` again, with a different pid.
. "$(dirname "$0")/lib/common.sh"

wait_for 20 outpost status || fail "agent not answering before the kill: $(wait_output)"
old=$(agent_init_pid) || fail "no agent process with parent pid 1 (init) found"
old_status_pid=$(status_pid)
before=$(outpost_pids | tr '\n' ' ')
echo "agent pid $old (status pid '${old_status_pid}'), outpost processes: $before"

kill -9 "$old" || fail "kill -9 $old failed"

# A new agent: a process init started that did not exist before the kill
# (an orphaned worker of the old agent must not count), answering status.
new_agent_answers() {
  new=$(agent_init_pid "$before") || { echo "no new agent process yet"; return 1; }
  outpost status
}
wait_for 20 new_agent_answers || fail "no respawned agent answering within 20 s: $(wait_output)"
new=$(agent_init_pid "$before")
[ -n "$new" ] && [ "$new" != "$old" ] || fail "agent pid did not change ($old)"
if grep -q '^State:[[:space:]]*Z' "/proc/$old/status" 2>/dev/null; then
  fail "init did not reap the killed agent $old"
fi

if [ -n "$old_status_pid" ]; then
  new_status_pid=$(status_pid)
  [ -n "$new_status_pid" ] || fail "outpost status --json has no pid after the respawn"
  [ "$new_status_pid" != "$old_status_pid" ] ||
    fail "outpost status --json pid unchanged after the respawn ($new_status_pid)"
fi
echo "respawned: agent pid $new (status pid '$(status_pid)')"
