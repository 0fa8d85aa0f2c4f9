# The worker's heartbeat and the optional watchdog device
# (docs/supervision.md). $AGENT_PID is the keeper.

hb_worker() { op status --json | json_get pid; }
hb_new_worker() { local w; w="$(hb_worker)" && [ -n "$w" ] && [ "$w" != "$1" ]; }
hb_task_field() { op --json task inspect "$1" | json_get "$2"; }
hb_size() { stat -c %s "$1"; }
hb_grew_past() { [ "$(hb_size "$1")" -gt "$2" ]; }
# The Nth worker has started its heartbeat. (Counted, not looked for after the keeper's "worker started pid=N" line:
# the worker's own lines may come before the keeper's, two processes
# writing to one log.)
hb_beating() { [ "$(grep -c "heartbeat started: .* timeout=2s" "$T/agent.log")" -ge "$1" ]; }

test_stopped_worker_misses_its_heartbeat_and_is_replaced_keeping_tasks() {
  write_config '"heartbeat_timeout": "2s"'
  start_agent
  expect_exit 0 op task run --id hb -- "$HELPER" sleep 600
  local tpid; tpid="$(hb_task_field hb pid)"
  [ -n "$tpid" ] && kill -0 "$tpid" || fail "task not running: $tpid"
  local w; w="$(hb_worker)"
  wait_for 10 hb_beating 1 || fail "the worker did not start its heartbeat: $(tail -n 5 "$T/agent.log")"
  kill -STOP "$w"
  wait_for 30 grep -q "worker unresponsive: no heartbeat for 2s; killing pid $w\$" "$T/agent.log" ||
    fail "the keeper did not notice the stopped worker: $(tail -n 5 "$T/agent.log")"
  wait_for 30 hb_new_worker "$w" >/dev/null || fail "no new worker answered after $w was killed"
  local log; log="$(cat "$T/agent.log")"
  expect_contains "$log" "worker exited pid=$w status=\"killed by SIGKILL\"" "exit logged"
  expect_contains "$log" "reason=\"the worker was unresponsive (no heartbeat)\"" "restart reason"
  expect_eq "$(hb_task_field hb pid)" "$tpid" "task pid after the worker was replaced"
  expect_eq "$(hb_task_field hb state)" "running" "task state"
  kill -0 "$tpid" || fail "task $tpid died with the worker"
  kill -0 "$AGENT_PID" || fail "keeper gone"
  # The new worker beats too: stopping it is noticed again.
  local w2; w2="$(hb_worker)"
  wait_for 10 hb_beating 2 || fail "the new worker did not start its heartbeat"
  kill -STOP "$w2"
  wait_for 30 grep -q "no heartbeat for 2s; killing pid $w2\$" "$T/agent.log" || fail "second stop not noticed"
  wait_for 30 hb_new_worker "$w2" >/dev/null || fail "no third worker"
  expect_eq "$(hb_task_field hb pid)" "$tpid" "task pid after the second replacement"
}

test_heartbeat_off_is_accepted_and_a_short_one_rejected() {
  write_config '"heartbeat_timeout": "0s"'
  expect_exit 0 "$OUTPOST" agent --config "$T/config.json" --check
  write_config '"heartbeat_timeout": "100ms"'
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json" --check
  expect_contains "$OUT" 'heartbeat_timeout: must be "0s" (off) or at least 1s' "error"
}

# A plain file stands in for /dev/watchdog: every pet is a byte, the magic
# close a final 'V'. (It reports no timeout, so the worker pets every second.)
test_watchdog_is_petted_by_each_worker_and_disarmed_only_on_a_clean_stop() {
  : >"$T/watchdog"
  write_config "\"watchdog_device\": \"$T/watchdog\""
  start_agent
  wait_for 10 hb_grew_past "$T/watchdog" 1 || fail "the watchdog was not petted twice: $(od -c "$T/watchdog")"
  local w; w="$(hb_worker)"
  kill -9 "$w"
  wait_for 10 hb_new_worker "$w" >/dev/null || fail "no new worker"
  local n; n="$(hb_size "$T/watchdog")"
  wait_for 10 hb_grew_past "$T/watchdog" "$n" || fail "the new worker does not pet the watchdog"
  expect_not_contains "$(cat "$T/watchdog")" "V" "a killed worker must not disarm the watchdog"
  kill -TERM "$AGENT_PID"
  wait_gone "$AGENT_PID" 35 || fail "agent did not stop"
  expect_eq "$(tail -c 1 "$T/watchdog")" "V" "magic close on a clean stop"
  expect_contains "$(cat "$T/agent.log")" "watchdog disarmed (magic close) device=$T/watchdog" "log"
}

test_unusable_watchdog_device_keeps_the_agent_from_starting() {
  write_config "\"watchdog_device\": \"$T/no-such-watchdog\""
  expect_exit 1 timeout 30 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "watchdog_device is configured but unusable" "error"
  expect_contains "$OUT" "$T/no-such-watchdog" "the device is named"
}
