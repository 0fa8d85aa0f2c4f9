#!/bin/sh
# watchdog_device with the kernel's softdog, loaded with soft_noboot=1 so that
# an expiry prints "Triggered - Reboot ignored" instead of rebooting the VM.
# A second agent (own config, socket and state) holds /dev/watchdog:
# - its worker holds the device and softdog is active;
# - a stopped worker is replaced by the keeper (heartbeat) and the new worker
#   opens the device again before the margin runs out: no expiry;
# - the whole agent stopped: the device expires;
# - a clean stop writes the magic close: softdog inactive again.
# vmtest-timeout: 150
. "$(dirname "$0")/lib/common.sh"

mods=/lib/modules/$(uname -r)
[ -f "$mods/softdog.ko" ] || skip "softdog.ko is not in the initramfs (tools/vmtest copies it with the state disk's modules)"
[ -e /dev/watchdog ] && skip "a watchdog device already exists"
if [ -f "$mods/watchdog.ko" ]; then insmod "$mods/watchdog.ko" || fail "insmod watchdog.ko failed"; fi
insmod "$mods/softdog.ko" soft_margin=15 soft_noboot=1 || fail "insmod softdog.ko failed"
wait_for 5 test -c /dev/watchdog || fail "no /dev/watchdog after loading softdog"
state=/sys/class/watchdog/watchdog0/state
triggered() { dmesg | grep -c "softdog: Triggered - Reboot ignored"; }

D=/tmp/wdtest
mkdir -p "$D"
cat >"$D/config.json" <<JSON
{"state_dir": "$D/state", "runtime_dir": "$D/run", "jobs_dir": "", "cgroup_root": "$D/no-cgroup",
 "heartbeat_timeout": "2s", "watchdog_device": "/dev/watchdog"}
JSON
op() { outpost --socket "$D/run/outpost.sock" "$@"; }
worker() { op status --json 2>/dev/null | sed -n 's/.*"pid"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p' | head -n 1; }
holds_watchdog() { ls -l "/proc/$1/fd" 2>/dev/null | grep -q -- '-> /dev/watchdog$'; }
new_worker_holds() { _nw=$(worker) && [ -n "$_nw" ] && [ "$_nw" != "$1" ] && holds_watchdog "$_nw"; }

outpost agent --config "$D/config.json" >>"$D/agent.log" 2>&1 &
keeper=$!
wait_for 30 op status || fail "test agent not answering: $(tail -n 3 "$D/agent.log")"
w=$(worker)
wait_for 10 holds_watchdog "$w" || fail "worker $w does not hold /dev/watchdog: $(tail -n 3 "$D/agent.log")"
[ ! -f "$state" ] || [ "$(cat "$state")" = active ] || fail "softdog is $(cat "$state") while the agent runs"
before=$(triggered)

# A stopped worker: the keeper replaces it, the new one takes the device over.
wait_for 30 grep -q "heartbeat started" "$D/agent.log" || fail "no heartbeat: $(tail -n 3 "$D/agent.log")"
kill -STOP "$w"
wait_for 30 new_worker_holds "$w" || fail "no new worker holding /dev/watchdog after stopping $w: $(tail -n 3 "$D/agent.log")"
grep -q "worker unresponsive: no heartbeat for 2s; killing pid $w" "$D/agent.log" || fail "no heartbeat kill logged"
[ "$(triggered)" = "$before" ] || fail "softdog expired while the keeper replaced the worker"

# The whole agent stopped: nobody pets, the device expires.
w=$(worker)
kill -STOP "$keeper" "$w"
wait_for 40 sh -c "dmesg | grep -c 'softdog: Triggered - Reboot ignored' | grep -qvx '$before'" ||
  { kill -CONT "$keeper" "$w"; fail "softdog did not expire with the agent stopped"; }
kill -CONT "$keeper" "$w"
wait_for 30 op status || fail "agent not answering after SIGCONT"

# Clean stop: magic close.
kill -TERM "$keeper"
wait "$keeper"  # bounded: the keeper kills a worker that does not stop within 30 s
grep -q "watchdog disarmed (magic close) device=/dev/watchdog" "$D/agent.log" || fail "no magic close logged: $(tail -n 3 "$D/agent.log")"
if [ -f "$state" ]; then
  [ "$(cat "$state")" = inactive ] || fail "softdog still $(cat "$state") after a clean stop"
fi
echo "ok: worker pets, a replaced worker takes over, a stopped agent expires, a clean stop disarms"
