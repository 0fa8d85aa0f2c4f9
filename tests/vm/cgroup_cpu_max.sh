#!/bin/sh
# Two CPU burners with cpu.max 0.2 and 0.5 cores: throttling shows in
# cpu.stat and the CPU each gets over a window is within 20% of its limit.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

submit burn '{"id": "burn", "tasks": [
  {"name": "small", "command": "'$HELPER'", "args": ["burn", "600"], "resources": {"cpu": {"max": 0.2}}},
  {"name": "big", "command": "'$HELPER'", "args": ["burn", "600"], "resources": {"cpu": {"max": 0.5}}}]}' >/dev/null
usage() { sed -n 's/^usage_usec //p' "$(task_cgroup burn "$1")/cpu.stat"; }
sleep 1  # let both reach their steady state before the window starts
s0=$(usage small); b0=$(usage big); t0=$(now)
sleep 4
s1=$(usage small); b1=$(usage big); t1=$(now)
ratio() { awk -v u0="$1" -v u1="$2" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.3f", (u1 - u0) / 1e6 / (t1 - t0) }'; }
rs=$(ratio "$s0" "$s1"); rb=$(ratio "$b0" "$b1")
echo "small: $rs cores (limit 0.2), big: $rb cores (limit 0.5)"
awk -v r="$rs" 'BEGIN { exit !(r >= 0.16 && r <= 0.24) }' || fail "small got $rs cores, limit 0.2"
awk -v r="$rb" 'BEGIN { exit !(r >= 0.40 && r <= 0.60) }' || fail "big got $rb cores, limit 0.5"
thr=$(sed -n 's/^nr_throttled //p' "$(task_cgroup burn small)/cpu.stat")
[ "${thr:-0}" -gt 0 ] || fail "no throttling in cpu.stat of small"
outpost --json stats burn/small | grep -q 'cpu.stat.nr_throttled' || fail "stats lacks nr_throttled: $(outpost --json stats burn/small)"
outpost rm burn >/dev/null || fail "rm failed"
