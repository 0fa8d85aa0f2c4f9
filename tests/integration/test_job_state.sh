# What a job keeps across agent restarts and upgrades (docs/supervision.md,
# "Desired state and recovery"): failed tasks stay failed, restart counts
# go on; and a stop during a start is no restart. Helpers are prefixed js_.

# A job whose task reached its restart limit stays failed across agent
# restarts and an upgrade, and restart counts survive them; only a restart
# by the user starts it again.
test_failed_jobs_stay_failed_and_restart_counts_survive_agent_restarts() {
  cp "$OUTPOST" "$T/outpost"
  OUTPOST="$T/outpost"
  jt_start
  local f w
  f='{"name": "t", "command": "'$HELPER'", "args": ["exit", "1"], "restart": {"policy": "on-failure", "attempts": 2, "interval": "10m", "delay": "10ms"}}'
  # Fails twice, then runs: its count is 2 for good.
  w='{"name": "t", "command": "/bin/sh", "args": ["-c", "n=$(cat n 2>/dev/null || echo 0); echo $((n + 1)) >n; [ $n -ge 2 ] && exec '$HELPER' sleep 600; exit 1"], "restart": {"policy": "on-failure", "attempts": 5, "interval": "10m", "delay": "10ms"}}'
  printf '{"id": "f", "tasks": [%s]}\n' "$f" | op run -f - --detach >/dev/null || fail "submit f"
  printf '{"id": "w", "tasks": [%s]}\n' "$w" | op run -f - --detach >/dev/null || fail "submit w"
  wait_for 20 jt_status_is f failed || fail "f did not fail: $(op inspect f)"
  wait_for 20 js_healthy w/t || fail "w did not come up: $(op inspect w)"
  expect_eq "$(jt_tfield f/t restarts)" 2 "f's restarts"
  expect_eq "$(jt_tfield w/t restarts)" 2 "w's restarts"
  local reason; reason="$(jt_tfield f/t reason)"
  local pw; pw="$(jt_running_pid w/t)"
  # A restart of the agent (stop and start, as init would) ...
  js_mark
  kill -TERM "$AGENT_PID"
  wait "$AGENT_PID"
  start_agent
  js_after_recovery f w "after an agent restart"
  expect_eq "$(jt_tfield f/t reason)" "$reason" "f's reason after an agent restart"
  # ... and an in-place upgrade.
  cp "$T/outpost" "$T/outpost.new" && mv "$T/outpost.new" "$T/outpost"
  local k="$AGENT_PID" ow; ow="$(op status --json | json_get pid)"
  js_mark
  kill -USR2 "$k"
  wait_for 15 new_worker_answers "$ow" >/dev/null || fail "no new worker after SIGUSR2"
  js_after_recovery f w "after an upgrade"
  expect_eq "$(jt_running_pid w/t)" "$pw" "w's process across both"
  # The user starts it again.
  expect_exit 0 op restart f
  wait_for 10 js_started_in_this_agent f/t || fail "f did not start again on restart: $(op events f/t)"
}
js_healthy() { op events "$1" 2>/dev/null | grep -q ' healthy '; }
# The history survives restarts: only events after JS_AFTER (a seq) count.
js_started_in_this_agent() {
  op events --json "$1" 2>/dev/null | python3 -c 'import json,sys; sys.exit(0 if any(json.loads(l)["seq"] > int(sys.argv[1]) and "started with pid" in json.loads(l)["message"] for l in sys.stdin if l.strip()) else 1)' "${JS_AFTER:-0}"
}
js_mark() { JS_AFTER="$(op events --json | tail -1 | json_get seq)"; }
# js_after_recovery FAILED_JOB RUNNING_JOB WHEN: once the running job's task
# has been healthy in this worker (its recovery and the other job's are
# done), the failed job was not started and both kept their counts.
js_after_recovery() {
  wait_for 20 js_healthy "$2/t" || fail "$2 not healthy $3: $(op inspect "$2")"
  js_started_in_this_agent "$1/t" && fail "$1 was started again $3: $(op events "$1/t")"
  expect_eq "$(jt_jfield "$1" status)" failed "$1's status $3"
  expect_eq "$(jt_tfield "$1/t" restarts)" 2 "$1's restarts $3"
  expect_eq "$(jt_tfield "$2/t" restarts)" 2 "$2's restarts $3"
}

# A stop while the task waits for a required NRI plugin gives the start
# up; it is no exit of the task's and no restart.
test_stopping_a_task_that_waits_for_a_required_plugin_counts_no_restart() {
  mkdir -p "$T/jobs.d" "$T/nri-plugins" "$T/nri-conf"
  write_config "\"jobs_dir\": \"$T/jobs.d\", \"nri\": {\"socket\": \"$T/nri/nri.sock\", \"plugin_dir\": \"$T/nri-plugins\", \"plugin_config_dir\": \"$T/nri-conf\", \"required_plugins\": [\"gate\"]}"
  start_agent
  jt_job q "$(jt_sleeper t)" | op run -f - --detach >/dev/null
  wait_for 10 jt_events_contain q/t "waiting for required NRI plugin(s): gate" || fail "no waiting event: $(op events q/t)"
  expect_exit 0 op stop q
  expect_eq "$(jt_tfield q/t restarts)" 0 "restarts"
  op events q/t | grep -q ' restarting ' && fail "a restart was scheduled: $(op events q/t)"
  grep -q 'restarting in' "$T/agent.log" && fail "the log says it restarts: $(grep 'restarting in' "$T/agent.log")"
  expect_eq "$(jt_jfield q status)" stopped "status"
}
