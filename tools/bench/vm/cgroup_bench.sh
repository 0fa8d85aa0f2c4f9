#!/bin/sh
# Runs cgroup_bench inside the test VM (busybox ash), where cgroup v2 is
# usable; tools/bench/run.sh boots it with
#   tools/vmtest --tests-dir tools/bench/vm --extra build/bench/cgroup_bench ...
# and prints this script's stdout (the BENCH lines among it). The bench
# starts its own two agents (one with cgroups, one without) beside the VM's
# agent. Sizes: 100 start samples per figure; 300 tasks (not 1,000) for the
# stats of many tasks: every TaskStats call reads /proc/*/stat of every
# process, so sampling N tasks costs O(N^2), and 1,000 would take minutes
# under QEMU TCG (docs/benchmarks.md). The whole VM run is about 75 s.
# vmtest-timeout: 540
set -u
BENCH=/usr/bin/cgroup_bench
[ -x "$BENCH" ] || { echo "SKIP: $BENCH not installed (tools/vmtest --extra build/bench/cgroup_bench)"; exit 77; }
[ -x /usr/bin/outpost-test-helper ] || { echo "SKIP: no /usr/bin/outpost-test-helper (tools/vmtest --helper)"; exit 77; }
echo "kernel $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPUs, MemTotal $(sed -n 's/^MemTotal: *//p' /proc/meminfo)"
exec "$BENCH" --outpost /usr/bin/outpost --helper /usr/bin/outpost-test-helper --samples 100 --tasks 300 --rounds 1
