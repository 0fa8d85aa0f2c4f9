# Shared helpers of the VM tests (busybox ash). A test sources it with
#   . "$(dirname "$0")/lib/common.sh"
# Tests run as root inside the VM, in /vmtest/tests, one after another.

AGENT_CONFIG=/etc/outpost/config.json

# fail MSG: the runner's reason is the last line a test writes to stderr;
# a message that holds command output over several lines is repeated by its
# first line (what failed) at the end.
fail() {
  echo "$*" >&2
  _first=$(printf '%s\n' "$*" | head -n 1)
  [ "$_first" = "$*" ] || echo "$_first (details above)" >&2
  exit 1
}
skip() { echo "SKIP: $*"; exit 77; }

# Seconds since boot, with centiseconds (for deadlines; monotonic).
now() { cut -d' ' -f1 /proc/uptime; }

# wait_for SECONDS CMD...: run CMD every 0.1 s until it succeeds (return 0)
# or SECONDS have passed (return 1). CMD's output goes to $WAIT_OUT.
WAIT_OUT=/tmp/wait_for.out
wait_for() {
  _limit=$1; shift
  _deadline=$(awk -v n="$(now)" -v l="$_limit" 'BEGIN { printf "%.2f", n + l }')
  while :; do
    if "$@" >"$WAIT_OUT" 2>&1; then return 0; fi
    if awk -v n="$(now)" -v d="$_deadline" 'BEGIN { exit !(n >= d) }'; then return 1; fi
    sleep 0.1
  done
}

# The last output of the command wait_for ran, on one line.
wait_output() { tr '\n' ' ' <"$WAIT_OUT" | cut -c1-200; }

# stat_field PID N: field N of /proc/PID/stat counted from the state (1 =
# state, 2 = ppid, 3 = pgrp, 4 = session); empty if PID is gone.
stat_field() {
  _stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  _n=$2
  # comm may hold spaces and parentheses: split after the last ") ".
  set -- ${_stat##*) }
  shift $((_n - 1))
  echo "$1"
}
ppid_of() { stat_field "$1" 2; }
session_of() { stat_field "$1" 4; }

# cmdline_of PID: argv joined by single spaces.
cmdline_of() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | sed 's/ $//'; }

# outpost_pids: every process running /usr/bin/outpost (by /proc/PID/exe,
# which neither argv rewriting nor a new comm changes).
outpost_pids() {
  for _d in /proc/[0-9]*; do
    [ "$(readlink "$_d/exe" 2>/dev/null)" = /usr/bin/outpost ] && echo "${_d#/proc/}"
  done
  return 0
}

# agent_init_pid [EXCLUDE_PIDS]: the agent busybox init started, ignoring
# the pids listed in $1: an outpost process whose parent is pid 1 and that
# leads its own session (init setsid()s what it spawns). Workers and tasks
# have the agent as parent; one orphaned by a kill -9 of the agent has parent
# 1 too but stays in the old agent's session.
agent_init_pid() {
  for _p in $(outpost_pids); do
    case " $1 " in *" $_p "*) continue ;; esac
    [ "$(ppid_of "$_p")" = 1 ] || continue
    [ "$(session_of "$_p")" = "$_p" ] || continue
    echo "$_p"
    return 0
  done
  return 1
}

# status_pid: the "pid" field of `outpost status --json` (empty if none).
status_pid() {
  outpost status --json 2>/dev/null |
    sed -n 's/.*"pid"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p' | head -n 1
}

# ---- power-cycle tests -------------------------------------------------------
# A test with a line "# vmtest: power-cycle" runs twice: in boot 1
# (VMTEST_BOOT=1) it prepares and exits $CYCLE (75) to ask for a power cycle
# (QEMU is SIGKILLed after boot 1's tests: no sync, no umount); in boot 2
# (VMTEST_BOOT=2, same state disk) it checks, and that is its result. With
# tools/vmtest --power-cuts N it may ask again while VMTEST_CUTS_LEFT > 0.

CYCLE=75
STATE_DIR=/var/lib/outpost
VMTEST_BOOT=${VMTEST_BOOT:-1}

# power_cycle: end boot 1 of a power-cycle test (after syncing what must
# survive: a power cut loses whatever is not on the disk yet).
power_cycle() { echo "boot $VMTEST_BOOT done, power cycle requested"; exit "$CYCLE"; }

# state_disk_ok: /var/lib/outpost is the mounted state disk; else fails with
# rcS's reason.
state_disk_ok() {
  grep -q "^/dev/vda $STATE_DIR ext4 " /proc/mounts && return 0
  fail "no state disk: $STATE_DIR is not /dev/vda mounted ext4 ($(cat /run/vmtest/state-disk 2>/dev/null || echo 'no rcS report'))"
}

# pc_dir: a directory on the state disk for what a test carries from boot 1
# to boot 2 (/var/lib/outpost/.vmtest/NAME; created by boot 1).
pc_dir() { echo "$STATE_DIR/.vmtest/${VMTEST_NAME:-$(basename "$0" .sh)}"; }

boot_id() { cat /proc/sys/kernel/random/boot_id; }
