#!/bin/sh
# The VM offers what the agent's cgroup code needs: cgroup2 mounted at
# /sys/fs/cgroup with the cpuset, cpu, io, memory and pids controllers.
. "$(dirname "$0")/lib/common.sh"

grep -q '^[^ ]* /sys/fs/cgroup cgroup2 ' /proc/mounts ||
  fail "cgroup2 is not mounted on /sys/fs/cgroup: $(grep cgroup /proc/mounts | tr '\n' ';')"
have=$(cat /sys/fs/cgroup/cgroup.controllers) || fail "cannot read /sys/fs/cgroup/cgroup.controllers"
echo "controllers: $have"
for c in cpuset cpu io memory pids; do
  case " $have " in *" $c "*) ;; *) fail "controller '$c' missing from cgroup.controllers ($have)" ;; esac
done
