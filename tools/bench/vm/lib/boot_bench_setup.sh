#!/bin/sh
# sysinit step of the boot benchmark (tools/bench/vm/boot_bench.inittab),
# after rcS mounted the state disk on /var/lib/outpost: what a freshly
# provisioned board has before init starts the agent.
#  - /var/lib/outpost/agent: the agent's state dir, emptied on every boot,
#    so that every boot measures the same path (a first boot, no state to
#    recover). /var/lib/outpost/boot-bench keeps the samples of earlier
#    boots (the bench power-cycles the VM for more samples).
#  - /etc/outpost/boot-bench.json: the VM's config with that state dir.
#  - /etc/outpost/jobs.d/first.json: one job, one task: the helper writing
#    its CLOCK_MONOTONIC to /run/boot-bench/task.main.
set -u
mkdir -p /run/boot-bench
rm -rf /var/lib/outpost/agent
mkdir -p /var/lib/outpost/boot-bench
mkdir -m 0700 /var/lib/outpost/agent
cat >/etc/outpost/boot-bench.json <<'JSON'
{"state_dir": "/var/lib/outpost/agent", "runtime_dir": "/run/outpost", "api_socket": "/run/outpost/outpost.sock", "log_level": "info"}
JSON
mkdir -p /etc/outpost/jobs.d
cat >/etc/outpost/jobs.d/first.json <<'JSON'
{"id": "first", "tasks": [{"name": "stamp", "command": "/usr/bin/outpost-test-helper",
  "args": ["timestamp", "/run/boot-bench/task.main"], "restart": {"policy": "never"}}]}
JSON
sync
