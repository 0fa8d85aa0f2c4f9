#!/bin/sh
# vmtest: crun
# vmtest-timeout: 180
# `outpost plugins check oci` with real cgroup v2: every check passes,
# destroy-kills-all included (the check tasks get cgroups of their own),
# and nothing is left: no cgroup, crun state or bundle.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
. "$(dirname "$0")/lib/oci.sh"
oci_setup

work=/run/outpost/conformance   # <runtime_dir>/conformance
mkdir -p "$work"
outpost plugins check oci --config '{"rootfs": "'$OCI_ROOT'", "mounts": [{"source": "'$work'", "destination": "'$work'"}]}' \
  >/tmp/chk-oci.out 2>&1 || fail "check failed: $(grep -v '^PASS' /tmp/chk-oci.out | tr '\n' ' ')"
! grep -q '^FAIL' /tmp/chk-oci.out || fail "a check failed: $(grep '^FAIL' /tmp/chk-oci.out)"
for c in start-wait stop-sigint stop-sigkill stop-timeout-0 signal recover-idempotent destroy-running \
  destroy-kills-all bad-command bad-user stats inspect exec; do
  grep -q "^PASS $c " /tmp/chk-oci.out || fail "check $c did not pass: $(cat /tmp/chk-oci.out | tr '\n' ' ')"
done
left() { ls -d "$CG"/_tasks/conformance-* >/dev/null 2>&1; }
! left || fail "cgroups left by the check: $(ls -d "$CG"/_tasks/conformance-*)"
[ -z "$(ls -A "$OCI_STATE/crun" 2>/dev/null)" ] || fail "crun state left: $(ls "$OCI_STATE/crun")"
[ -z "$(ls -A "$OCI_STATE/bundles" 2>/dev/null)" ] || fail "bundles left: $(ls "$OCI_STATE/bundles")"
echo "oci passes all 13 checks with cgroup v2 ($(grep -c '^PASS' /tmp/chk-oci.out) PASS lines)"
