#!/bin/sh
# vmtest: crun
# vmtest-timeout: 90
# The oci task driver under busybox init with real cgroup v2: started as a
# job of the agent it registers as TaskDriver oci and is healthy; a
# container task (busybox root file system, crun) prints to its logs, sees
# only its root, is the driver's child and runs in the task cgroup outpost
# made, with the job's memory.max; after stop and rm no mount, cgroup, crun
# state or bundle is left.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
. "$(dirname "$0")/lib/oci.sh"
oci_setup
drv=$(oci_driver_pid)

oci_job oc 'echo out-$(hostname); cat /etc/marker; ls /vmtest 2>/dev/null || echo no-host-dir; test -e /dev/kmsg || echo no-kmsg; echo pid-$$; exec sleep 600' \
  '"hostname": "box"' '"resources": {"memory": {"max": "32MiB"}}'
outpost run --detach -f /tmp/oc.json >/dev/null || fail "oci job not submitted"
wait_for 30 state_is oc/t running || fail "oci task not running: $(outpost inspect oc 2>&1; outpost events oc 2>&1 | tail -n 5)"
wait_for 20 oci_logs_have oc/t pid-1 || fail "no output in the logs: $(outpost logs oc/t 2>&1)"
out=$(outpost logs oc/t)
for want in out-box inside-rootfs no-host-dir no-kmsg; do
  echo "$out" | grep -qx "$want" || fail "logs lack '$want': $out"
done
pid=$(tpid oc/t)
[ "$(ppid_of "$pid")" = "$drv" ] || fail "container init $pid is not the driver's ($drv) child: ppid $(ppid_of "$pid")"
[ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] || fail "not in a mount namespace of its own"
[ "$(readlink "/proc/$pid/ns/pid")" != "$(readlink /proc/self/ns/pid)" ] || fail "not in a pid namespace of its own"
cg=$(task_cgroup oc t)
grep -qx "$pid" "$cg/cgroup.procs" || fail "container $pid not in its cgroup $cg: $(cat "/proc/$pid/cgroup")"
[ "$(cat "$cg/memory.max")" = 33554432 ] || fail "memory.max of $cg is $(cat "$cg/memory.max")"
# The container's root is the rootfs: its /etc/marker is ours.
[ "$(cat "/proc/$pid/root/etc/marker")" = inside-rootfs ] || fail "the container's root is not $OCI_ROOT"
[ -f "$OCI_STATE/bundles/oc.t/config.json" ] || fail "no bundle: $(ls -R "$OCI_STATE")"
[ -n "$(ls -A "$OCI_STATE/crun")" ] || fail "no crun state while running"

outpost stop oc >/dev/null || fail "stop failed"
wait_for 20 state_is oc/t dead || fail "not dead after stop: $(outpost inspect oc/t 2>&1)"
[ ! -d "/proc/$pid" ] || grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" || fail "container $pid survived the stop"
outpost rm oc >/dev/null || fail "rm failed"
wait_for 10 oci_nothing_left oc || fail "after rm: $(wait_output)"
echo "container $pid (driver $drv) ran in $cg with memory.max 32MiB; nothing left after rm"
