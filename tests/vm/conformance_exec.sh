#!/bin/sh
# `outpost plugins check exec` with real cgroup v2: every check passes,
# destroy-kills-all included (the check tasks get cgroups of their own, as
# a job's tasks do), and the check leaves no cgroup behind.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

outpost plugins check exec >/tmp/chk-exec.out 2>&1 || fail "check failed: $(cat /tmp/chk-exec.out)"
for c in start-wait stop-sigint stop-sigkill stop-timeout-0 signal recover-idempotent destroy-running \
  destroy-kills-all bad-command bad-user stats inspect exec; do
  grep -q "^PASS $c " /tmp/chk-exec.out || fail "check $c did not pass: $(cat /tmp/chk-exec.out)"
done
left() { ls -d "$CG"/_tasks/conformance-* >/dev/null 2>&1; }
! left || fail "cgroups left by the check: $(ls -d "$CG"/_tasks/conformance-*)"
echo "exec passes all 13 checks with cgroup v2"
