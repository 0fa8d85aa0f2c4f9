# Helpers of the oci driver's VM tests (busybox ash), sourced after common.sh
# and jobs.sh. The tests have a line "# vmtest: crun": tools/vmtest then
# copies crun with its libraries and loader into the VM (the host's on
# x86_64, Debian's crun:arm64 on arm64; when it has none /etc/vmtest/no-crun
# says why and oci_ready fails with it).
# The driver (tools/vmtest --extra build/outpost-oci-driver) runs as a job
# of the agent, with its defaults: plugins dir /run/outpost/plugins (the
# agent's runtime_dir), state in /run/outpost-oci (bundles/<task id>, crun's
# state in crun/).

OCI_DRIVER=/usr/bin/outpost-oci-driver
OCI_ROOT=/tmp/oci-root        # the containers' root file system (busybox)
OCI_STATE=/run/outpost-oci
OCI_WHY=

# oci_ready: crun and the driver are in the VM; else returns 1 with the
# reason in $OCI_WHY.
oci_ready() {
  if [ -s /etc/vmtest/no-crun ]; then
    OCI_WHY="no crun in the VM: $(cat /etc/vmtest/no-crun)"
    return 1
  fi
  [ -x /usr/bin/crun ] || { OCI_WHY="/usr/bin/crun missing in the VM"; return 1; }
  [ -x "$OCI_DRIVER" ] || { OCI_WHY="no $OCI_DRIVER in the image (tools/vmtest --extra build/outpost-oci-driver)"; return 1; }
}

# oci_rootfs: a busybox root file system at $OCI_ROOT (once per boot): every
# applet linked relative in /bin, /etc/passwd, a marker file.
oci_rootfs() {
  [ -f "$OCI_ROOT/etc/marker" ] && return 0
  mkdir -p "$OCI_ROOT/bin" "$OCI_ROOT/etc" "$OCI_ROOT/tmp" "$OCI_ROOT/proc" "$OCI_ROOT/dev" "$OCI_ROOT/sys" ||
    fail "cannot create $OCI_ROOT"
  cp /bin/busybox "$OCI_ROOT/bin/busybox" || fail "cannot copy busybox"
  for _a in $(busybox --list); do
    [ "$_a" = busybox ] || ln -sf busybox "$OCI_ROOT/bin/$_a"
  done
  echo "root:x:0:0:root:/:/bin/sh" >"$OCI_ROOT/etc/passwd"
  echo "inside-rootfs" >"$OCI_ROOT/etc/marker"
}

# oci_driver_start: the driver as job "ocidrv" (exec driver, restarted
# whenever it ends); waits until it is registered and healthy.
oci_registered() {
  outpost plugins 2>/dev/null | grep -q '^TaskDriver oci' &&
    outpost status 2>/dev/null | grep -Eq 'driver\.oci +on +healthy'
}
oci_driver_start() {
  printf '%s\n' '{"id": "ocidrv", "restart": {"policy": "always", "delay": "0s"},
    "tasks": [{"name": "driver", "command": "'$OCI_DRIVER'"}]}' >/tmp/ocidrv.json
  outpost run --detach -f /tmp/ocidrv.json >/dev/null || fail "driver job not submitted"
  wait_for 30 oci_registered ||
    fail "oci driver not registered and healthy: $(outpost plugins 2>&1; outpost status 2>&1 | grep driver; outpost logs --stderr ocidrv/driver 2>&1 | tail -n 5)"
}
oci_driver_pid() { tpid ocidrv/driver; }

# oci_setup: what most oci tests start with: skip without crun, the agent
# answering, the rootfs, and the driver running (removed when the test exits).
oci_setup() {
  oci_ready || skip "$OCI_WHY"
  wait_for 20 outpost status || fail "agent not answering: $(wait_output)"
  oci_rootfs
  trap oci_driver_rm EXIT
  oci_driver_start
}
oci_driver_rm() { outpost rm ocidrv >/dev/null 2>&1; }

# oci_job ID SCRIPT [CONFIG_MEMBERS] [TASK_MEMBERS] [JOB_MEMBERS]: a job
# with one oci task "t" running `sh -c SCRIPT` in $OCI_ROOT (SCRIPT must not
# hold double quotes or backslashes), written to /tmp/ID.json.
oci_job() {
  printf '{"id": "%s"%s, "tasks": [{"name": "t", "driver": "oci", "command": "/bin/sh", "args": ["-c", "%s"], "config": {"rootfs": "%s"%s}%s}]}\n' \
    "$1" "${5:+, $5}" "$2" "$OCI_ROOT" "${3:+, $3}" "${4:+, $4}" >"/tmp/$1.json"
}
oci_logs_have() { outpost logs "$1" 2>/dev/null | grep -qF -- "$2"; }

# oci_nothing_left JOB: after `outpost rm JOB` (task t): no mount under the
# rootfs or the bundle, no cgroup of the task, no crun state, no bundle.
oci_nothing_left() {
  _b=$OCI_STATE/bundles/$1.t
  ! grep -qE " ($OCI_ROOT|$_b)[/ ]" /proc/mounts || { echo "mounts left: $(grep -E "$OCI_ROOT|$_b" /proc/mounts)"; return 1; }
  [ ! -d "$(task_cgroup "$1" t)" ] || { echo "cgroup left: $(task_cgroup "$1" t)"; return 1; }
  [ -z "$(ls -A "$OCI_STATE/crun" 2>/dev/null)" ] || { echo "crun state left: $(ls "$OCI_STATE/crun")"; return 1; }
  [ ! -e "$_b" ] || { echo "bundle left: $(ls -A "$_b")"; return 1; }
}
