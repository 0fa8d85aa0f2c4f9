#!/bin/sh
# The agent started by busybox init from /etc/inittab comes up and answers
# `outpost status` (startup is asynchronous: poll with a deadline).
. "$(dirname "$0")/lib/common.sh"

if ! wait_for 20 outpost status; then
  fail "outpost status did not succeed within 20 s: $(wait_output)"
fi
pid=$(agent_init_pid) || fail "no /usr/bin/outpost process with parent pid 1 (init)"
echo "agent pid $pid ($(cmdline_of "$pid")) answers: $(wait_output)"
