#!/bin/sh
# vmtest: crun
# A container of the oci driver that allocates beyond its job's memory.max
# (busybox dd with a 64 MiB buffer under 32 MiB) is OOM-killed in the task
# cgroup outpost made, and outpost reports it as for an exec task
# (cgroup_oom.sh): "oom_killed": true, last_exit "OOM killed", an
# oom-killed event.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
. "$(dirname "$0")/lib/oci.sh"
oci_setup

oci_job ocoom 'echo hog-starts; exec dd if=/dev/zero of=/dev/null bs=67108864 count=1' '' \
  '"restart": {"policy": "never"}, "resources": {"memory": {"max": "32MiB", "swap_max": "0"}}'
outpost run --detach -f /tmp/ocoom.json >/dev/null || fail "oci job not submitted"
cg=$(task_cgroup ocoom t)
wait_for 20 grep -qx 33554432 "$cg/memory.max" || fail "memory.max of $cg is not 32MiB: $(cat "$cg/memory.max" 2>&1)"
wait_for 30 state_is ocoom/t dead || fail "hog not dead: $(outpost inspect ocoom/t 2>&1)"
oci_logs_have ocoom/t hog-starts || fail "the hog did not start: $(outpost logs ocoom/t 2>&1; outpost events ocoom 2>&1 | tail -n 5)"
outpost --json inspect ocoom/t | grep -q '"oom_killed": true' ||
  fail "not reported as OOM killed: $(outpost --json inspect ocoom/t | tr '\n' ' ')"
[ "$(tfield ocoom/t last_exit)" = "OOM killed" ] || fail "last_exit is '$(tfield ocoom/t last_exit)'"
outpost events ocoom | grep -q 'oom-killed' || fail "no oom-killed event: $(outpost events ocoom)"
oom_kills=$(sed -n 's/^oom_kill //p' "$cg/memory.events")
[ "${oom_kills:-0}" -ge 1 ] || fail "memory.events oom_kill is '$oom_kills'"
outpost rm ocoom >/dev/null || fail "rm failed"
wait_for 10 oci_nothing_left ocoom || fail "after rm: $(wait_output)"
echo "container OOM killed at memory.max 32MiB (oom_kill=$oom_kills), reported as such"
