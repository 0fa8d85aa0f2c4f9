# A full disk: the agent's state dir on a small tmpfs, mounted in a private
# mount namespace this test creates (the host's mounts are never touched),
# filled with dd and freed by deleting. Helpers are prefixed dk_.

# dk_start [SIZE]: a tmpfs of SIZE (2m) on $T/state in a new mount namespace
# held by a sleeping process, and the agent started inside it. DK_ROOT is
# that namespace's view of / (/proc/PID/root), for reaching the tmpfs.
# Returns 1 (after a SKIP line) where no private mount namespace can be
# made: in a chroot whose "/" is not a mount point unshare cannot make it
# private, and a tmpfs mounted without that could propagate to the host's
# mounts (make test-fresh's roots are mount points for this). The agent
# enters the namespace with nsenter -r: setns into a mount namespace puts a
# process at that namespace's real root, outside any chroot.
dk_start() {
  local why
  if ! why="$(unshare -m --propagation private true 2>&1)"; then
    echo "SKIP: no private mount namespace here (unshare -m --propagation private: $why)" >&2
    return 1
  fi
  mkdir -p "$T/state"
  unshare -m --propagation private sh -c \
    "mount -t tmpfs -o size=${1:-2m},mode=0711 tmpfs '$T/state' && : >'$T/.ns-ready' && exec sleep 3600" &
  DK_NS=$!
  echo "$DK_NS" >>"$T/.pids"
  wait_for 10 test -e "$T/.ns-ready" || fail "no tmpfs in a private mount namespace"
  DK_ROOT="/proc/$DK_NS/root"
  [ "$(stat -f -c %T "$DK_ROOT$T/state")" = tmpfs ] || fail "state dir is not the test's tmpfs"
  jt_config
  nsenter -t "$DK_NS" -m -r -w "$OUTPOST" agent --config "$T/config.json" >>"$T/agent.log" 2>&1 &
  AGENT_PID=$!
  echo "$AGENT_PID" >>"$T/.pids"
  wait_for 10 op status >/dev/null || fail "agent did not answer status within 10s: $(tail -n 5 "$T/agent.log")"
}

# dk_fill: fills the tmpfs (never more than 64 MiB, and only after checking
# that the target is the tmpfs, so a mistake cannot fill a real disk).
dk_fill() {
  [ "$(stat -f -c %T "$DK_ROOT$T/state")" = tmpfs ] || fail "refusing to fill: not the test's tmpfs"
  dd if=/dev/zero of="$DK_ROOT$T/state/fill" bs=64k count=1024 2>/dev/null && fail "the tmpfs did not fill up"
  dd if=/dev/zero of="$DK_ROOT$T/state/probe" bs=4k count=1 2>/dev/null && fail "the tmpfs still has room"
  rm -f "$DK_ROOT$T/state/probe"
}
dk_free() { rm -f "$DK_ROOT$T/state/fill"; }
dk_record() { cat "$DK_ROOT$T/state/jobs/$1.json" 2>/dev/null; }
# dk_record_has JOB TEXT: the job's record on disk contains TEXT.
dk_record_has() { dk_record "$1" | grep -qF -- "$2"; }
dk_gone() { ! proc_alive "$1"; }

test_disk_full_stop_rm_restart_update_still_work() {
  dk_start || return 0
  for j in a b c d; do
    jt_job "$j" "$(jt_sleeper t)" | op run -f - >/dev/null || fail "run $j"
  done
  local pa pb pc pd
  pa="$(jt_running_pid a/t)" && pb="$(jt_running_pid b/t)" && pc="$(jt_running_pid c/t)" &&
    pd="$(jt_running_pid d/t)" || fail "no pids"
  dk_record_has d '"desired": "running"' || fail "d not stored as running: $(dk_record d)"
  dk_fill

  # stop: succeeds, the task really stops, and says where the state is.
  expect_exit 0 op stop d
  wait_for 10 dk_gone "$pd" || fail "d's task still runs after stop"
  jt_status_is d stopped || fail "d: $(jt_jfield d status)"
  jt_events_contain d "saved in memory only: no space left on device" || fail "no note: $(op events d)"
  dk_record_has d '"desired": "running"' || fail "d written despite the full disk?"

  # stop, then restart: a new instance.
  expect_exit 0 op stop a
  wait_for 10 dk_gone "$pa" || fail "a's task still runs after stop"
  expect_exit 0 op restart a
  wait_for 10 jt_tstate_is a/t running || fail "a did not start again: $(op events a)"

  # update: the changed task is restarted.
  jt_job b "$(jt_sleeper t 500)" | op run -f - >"$T/out" 2>&1 || fail "update of b: $(cat "$T/out")"
  expect_contains "$(cat "$T/out")" "updated" "b updated"
  wait_for 10 dk_gone "$pb" || fail "b's old task still runs after the update"
  wait_for 10 jt_pid_changed b/t "$pb" >/dev/null || fail "b's new task did not start"

  # rm: the job and its task are gone, and so is its record.
  expect_exit 0 op rm c
  wait_for 10 dk_gone "$pc" || fail "c's task still runs after rm"
  expect_not_contains "$(jt_job_ids)" "c" "c removed"
  [ -e "$DK_ROOT$T/state/jobs/c.json" ] && fail "c's record still on disk"

  # Space returns: what was kept in memory is written.
  dk_free
  wait_for 15 dk_record_has d '"desired": "stopped"' || fail "d's stop not persisted: $(dk_record d)"
  wait_for 15 dk_record_has b '"500"' || fail "b's update not persisted: $(dk_record b)"
  dk_record_has b '"job_version": 2' || fail "b's version: $(dk_record b)"
  dk_record_has a '"desired": "running"' || fail "a: $(dk_record a)"
  grep -q "state written now that the disk has room" "$T/agent.log" || fail "the late write is not logged"
  ls "$DK_ROOT$T/state/jobs" | grep -q '\.tmp$' && fail "a temporary record was left behind"
  true
}

test_disk_full_logs_drop_without_blocking_and_resume() {
  dk_start || return 0
  # Waits for go1, prints ~3.4 MB (more than the FIFO holds, so a reader that
  # stopped reading would block it), leaves a marker, waits for go2, prints
  # one more line and sleeps.
  local script="while [ ! -e $T/go1 ]; do sleep 0.02; done; $HELPER lines 300000 seq-; : > $T/marker; while [ ! -e $T/go2 ]; do sleep 0.02; done; echo after-space; exec $HELPER sleep 600"
  jt_job noisy "$(jt_task t /bin/sh -c "$script")" | op run -f - >/dev/null || fail "run noisy"
  local log="$DK_ROOT$T/state/logs/noisy.t/t.stdout"
  dk_fill
  : >"$T/go1"
  wait_for 60 test -e "$T/marker" || fail "the task blocked on its output while the disk was full"
  local dropped
  wait_for 10 jt_events_contain noisy/t "log-dropping" || fail "no log-dropping event: $(op events noisy)"
  dropped="$(jt_tfield noisy/t task.log_dropped_bytes)"
  [ "$dropped" -gt 1000000 ] || fail "dropped bytes: $dropped"
  expect_contains "$(op inspect noisy/t)" "dropped" "inspect shows the dropped bytes"
  expect_eq "$(op events noisy/t | grep -c 'log-dropping')" 1 "one log-dropping event, not one per write"
  jt_tstate_is noisy/t running || fail "task not running"

  dk_free
  : >"$T/go2"
  wait_for 10 grep -q after-space "$log" || fail "logging did not resume: $(tail -c 200 "$log")"
  wait_for 10 jt_events_contain noisy/t "log-resumed" || fail "no log-resumed event: $(op events noisy)"
  expect_contains "$(op events noisy/t | grep log-resumed)" "$(jt_tfield noisy/t task.log_dropped_bytes) bytes dropped" \
    "the resumed event counts the dropped bytes"
  expect_eq "$(op events noisy/t | grep -c 'log-dropping')" 1 "still one log-dropping event"
  expect_eq "$(jt_tfield noisy/t task.log_error)" "" "no current log error once writing works again"
}
