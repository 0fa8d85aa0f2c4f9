# What stop and rm do while a task's driver plugin is away
# (docs/plugins.md, "Stopping and removing while a driver is away"). The
# driver is test_plugin as a
# TaskDriver (it stands for the oci driver: --state-dir keeps its tasks in
# a directory, as a container runtime keeps its state and bundles, and
# --adopt recovers an earlier instance's task). Helpers are prefixed da_.

# The exit code of a stop or removal that is pending because a driver is away.
DA_PENDING_EXIT=4

da_job_gone() { ! op inspect "$1" >/dev/null 2>&1; }

test_stop_and_rm_while_the_driver_is_away_are_pending_and_done_when_it_is_back() {
  jt_start '"plugin_grace_period": "120s"'
  mkdir -p "$T/drv-state"
  pl_start_plugin TaskDriver awaydrv --adopt --state-dir "$T/drv-state"
  wait_for 10 grep -q "^registered" "$T/plugin-awaydrv.out" || fail "driver not registered: $(op plugins)"
  pl_driver_job a awaydrv
  pl_driver_job b awaydrv
  local pa pb
  pa="$(wait_for 10 jt_running_pid a/t)" || fail "a/t not running"
  pb="$(wait_for 10 jt_running_pid b/t)" || fail "b/t not running"
  kill -9 "$PLUGIN_PID"
  wait_for 10 jt_tstate_is a/t unknown || fail "a/t not unknown once its driver went: $(op inspect a)"
  # Neither says it is done: the tasks still run and the driver still has them.
  expect_exit $DA_PENDING_EXIT op rm a --timeout 1s
  expect_contains "$OUT" "the removal of job a is pending: task t: stop waits for its driver: driver awaydrv is disconnected" "rm"
  expect_not_contains "$OUT" "removed" "rm"
  expect_exit $DA_PENDING_EXIT op stop b --timeout 1s
  expect_contains "$OUT" "the stop of job b is pending: task t: stop waits for its driver: driver awaydrv is disconnected" "stop"
  expect_not_contains "$OUT" "job b stopped" "stop"
  proc_alive "$pa" || fail "a/t's process is gone"
  proc_alive "$pb" || fail "b/t's process is gone"
  expect_exit 0 op ps
  expect_contains "$OUT" "a removing: task t: stop waits for its driver: driver awaydrv is disconnected" "ps says why"
  expect_contains "$OUT" "b stopping: task t: stop waits for its driver" "ps says why"
  expect_exit 0 op inspect a
  expect_contains "$OUT" "pending:    task t: stop waits for its driver: driver awaydrv is disconnected" "inspect"
  [ -e "$T/drv-state/a.t" ] || fail "the driver's state of a/t is gone already"
  # The driver is back: the agent carries both out.
  pl_start_plugin TaskDriver awaydrv --adopt --state-dir "$T/drv-state"
  wait_for 20 da_job_gone a || fail "job a not removed once its driver was back: $(op ps)"
  wait_for 20 jt_status_is b stopped || fail "job b not stopped once its driver was back: $(op ps)"
  wait_gone "$pa" 10 || fail "a/t's process survived its removal"
  wait_gone "$pb" 10 || fail "b/t's process survived its stop"
  [ -e "$T/drv-state/a.t" ] && fail "the driver was not told to destroy a/t"
  # A removal that can be done at once is: b's task has stopped.
  expect_exit 0 op rm b
  expect_contains "$OUT" "job b removed" "rm b"
  [ -e "$T/drv-state/b.t" ] && fail "the driver was not told to destroy b/t"
  true
}

# Given up on (its grace period ended), the driver's tasks are lost and a
# removal goes on without it; when it registers again, what it still has
# that no record accounts for is destroyed, and an event says so.
test_what_a_returning_driver_has_without_a_record_is_destroyed() {
  jt_start '"plugin_grace_period": "2s"'
  mkdir -p "$T/drv-state"
  pl_start_plugin TaskDriver gonedrv --state-dir "$T/drv-state"
  wait_for 10 grep -q "^registered" "$T/plugin-gonedrv.out" || fail "driver not registered: $(op plugins)"
  pl_driver_job g gonedrv
  local pg; pg="$(wait_for 10 jt_running_pid g/t)" || fail "g/t not running"
  kill -9 "$PLUGIN_PID"
  wait_for 10 jt_tstate_is g/t unknown || fail "g/t not unknown: $(op inspect g)"
  # Pending, or done already if the grace period ended meanwhile.
  op rm g --timeout 1s >"$T/rm.out" 2>&1
  local rc=$?
  [ $rc = 0 ] || [ $rc = $DA_PENDING_EXIT ] || fail "rm g exited $rc: $(cat "$T/rm.out")"
  wait_for 20 da_job_gone g || fail "job g not removed after its driver's grace period: $(op ps)"
  proc_alive "$pg" || fail "test setup: g/t's process ended (nothing here kills it without its driver)"
  [ -e "$T/drv-state/g.t" ] || fail "test setup: the driver's state of g/t is gone"
  pl_start_plugin TaskDriver gonedrv --state-dir "$T/drv-state"
  wait_gone "$pg" 20 || fail "the returning driver's task of a removed job still runs"
  [ -e "$T/drv-state/g.t" ] && fail "the returning driver still has g/t"
  wait_for 10 da_events_say "no task record accounts for it: destroyed by its driver gonedrv" ||
    fail "no event about it: $(op events)"
  expect_contains "$(grep -F 'destroyed g.t' "$T/plugin-gonedrv.out")" "of an earlier instance" "the driver destroyed it"
}
da_events_say() { op events 2>/dev/null | grep -qF -- "$1"; }
