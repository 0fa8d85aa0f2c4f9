#!/bin/sh
# vmtest: crun
# vmtest-timeout: 120
# An oci container survives kill -9 of the agent (keeper and worker; init
# respawns it) and kill -9 of the driver (its job restarts it, and the new
# driver recovers the task from crun's state): the same pid each time,
# running; stop and rm then leave nothing behind.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
. "$(dirname "$0")/lib/oci.sh"
oci_setup
drv=$(oci_driver_pid)

oci_job ocrec 'echo started; exec sleep 600'
outpost run --detach -f /tmp/ocrec.json >/dev/null || fail "oci job not submitted"
wait_for 30 state_is ocrec/t running || fail "not running: $(outpost inspect ocrec 2>&1)"
wait_for 20 oci_logs_have ocrec/t started || fail "no output: $(outpost logs ocrec/t 2>&1)"
pid=$(tpid ocrec/t)

# The agent: keeper and worker killed, init respawns it.
before=$(outpost_pids | tr '\n' ' ')
for p in $before; do kill -9 "$p"; done
respawned() { agent_init_pid "$before" >/dev/null && outpost status >/dev/null; }
wait_for 30 respawned || fail "agent not respawned by init: $(wait_output)"
wait_for 40 state_is ocrec/t running || fail "not recovered after the agent: $(outpost inspect ocrec 2>&1)"
[ "$(tpid ocrec/t)" = "$pid" ] || fail "after the agent: pid $(tpid ocrec/t), expected $pid"
[ "$(oci_driver_pid)" = "$drv" ] || fail "the driver was restarted with the agent: $(oci_driver_pid), was $drv"
wait_for 20 oci_registered || fail "driver not registered with the new agent: $(outpost plugins 2>&1)"

# The driver: its job restarts it, the task is recovered from crun's state.
kill -9 "$drv"
new_driver() { p=$(oci_driver_pid) && [ -n "$p" ] && [ "$p" != "$drv" ] && oci_registered; }
wait_for 40 new_driver || fail "driver not restarted by its job: $(outpost inspect ocrec 2>&1; outpost plugins 2>&1)"
[ -d "/proc/$pid" ] || fail "container $pid died with its driver"
wait_for 30 state_is ocrec/t running || fail "not recovered after the driver: $(outpost inspect ocrec 2>&1)"
[ "$(tpid ocrec/t)" = "$pid" ] || fail "after the driver: pid $(tpid ocrec/t), expected $pid"
outpost inspect ocrec/t | grep -q running || fail "inspect: $(outpost inspect ocrec/t)"
outpost exec ocrec/t -- cat /etc/marker >/tmp/ocrec.exec 2>&1 && grep -q inside-rootfs /tmp/ocrec.exec ||
  fail "exec after the recovery: $(cat /tmp/ocrec.exec)"

outpost stop ocrec >/dev/null || fail "stop failed"
gone() { [ ! -d "/proc/$pid" ] || grep -q '^State:[[:space:]]*Z' "/proc/$pid/status"; }
wait_for 20 gone || fail "recovered container $pid survived the stop"
outpost rm ocrec >/dev/null || fail "rm failed"
wait_for 10 oci_nothing_left ocrec || fail "after rm: $(wait_output)"
echo "container $pid kept through kill -9 of the agent and of the driver ($drv -> $(oci_driver_pid))"
