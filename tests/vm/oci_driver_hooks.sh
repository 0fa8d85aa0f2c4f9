#!/bin/sh
# vmtest: crun
# A job's OCI hooks on an oci task are run by crun (the agent runs none),
# each exactly once: createContainer and, at the delete, poststop append
# to a record file of the VM; startContainer runs inside the container
# (its rootfs's marker) and appends to a directory bind-mounted through
# config.mounts.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
. "$(dirname "$0")/lib/oci.sh"
oci_setup

R=/tmp/ochk-rec D=/tmp/ochk-dir
rm -rf "$R" "$D"
mkdir -p "$D"
h() { printf '{"path": "/bin/sh", "args": ["sh", "-c", "echo %s >> %s"]}' "$1" "$2"; }
hooks="\"hooks\": {\"createContainer\": [$(h createContainer $R)], \"startContainer\": [$(h 'startContainer-in-$(cat /etc/marker)' /rec/runs)], \"poststop\": [$(h poststop $R)]}"
oci_job ochk 'exec sleep 600' '"mounts": [{"source": "'$D'", "destination": "/rec"}]' "$hooks"
outpost run --detach -f /tmp/ochk.json >/dev/null || fail "oci job not submitted"
wait_for 30 state_is ochk/t running || fail "not running: $(outpost inspect ochk 2>&1; outpost events ochk 2>&1 | tail -n 5)"
wait_for 10 grep -q startContainer "$D/runs" || fail "startContainer did not run in the container: $(cat "$D/runs" 2>&1)"
[ "$(cat "$D/runs")" = startContainer-in-inside-rootfs ] || fail "startContainer records: $(cat "$D/runs" | tr '\n' ' ')"
[ "$(cat "$R")" = createContainer ] || fail "createContainer records before the delete: $(cat "$R" 2>&1 | tr '\n' ' ')"
! outpost events ochk/t | grep -q ' hook ' || fail "a hook run by the agent: $(outpost events ochk/t | grep ' hook ')"
outpost stop ochk >/dev/null || fail "stop failed"
outpost rm ochk >/dev/null || fail "rm failed"
wait_for 10 grep -q poststop "$R" || fail "poststop did not run at the delete: $(cat "$R" | tr '\n' ' ')"
wait_for 10 oci_nothing_left ochk || fail "after rm: $(wait_output)"
[ "$(cat "$R" | tr '\n' ' ')" = "createContainer poststop " ] || fail "records: $(cat "$R" | tr '\n' ' ')"
[ "$(cat "$D/runs")" = startContainer-in-inside-rootfs ] || fail "startContainer records: $(cat "$D/runs" | tr '\n' ' ')"
echo "createContainer, startContainer (in the container) and poststop ran once each, by crun"
