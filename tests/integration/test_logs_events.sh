# outpost logs (both streams, -t, --since, a one-task job by its name) and
# the event history across worker restarts, removals and -f before a job
# exists. Helpers are prefixed le_.

le_worker() { op status --json 2>/dev/null | json_get pid; }
le_new_worker() { local p; p="$(le_worker)" && [ -n "$p" ] && [ "$p" != "$1" ]; }
le_has() { op logs "$1" 2>&1 | grep -qF -- "$2"; }

# A task that writes to stderr only (as busybox httpd does) shows in a plain
# `outpost logs JOB`, on stderr; --stdout and --stderr pick one; -t puts the
# second in front of each line; a job of several tasks names them.
test_logs_show_both_streams_with_times_and_a_job_by_its_name() {
  jt_start
  jt_job e "$(jt_task t /bin/sh -c 'echo out-1; echo err-1 >&2; exec sleep 600')" | op run -f - --detach >/dev/null ||
    fail "submit e"
  wait_for 10 le_has e err-1 || fail "no err-1 in logs e: $(op logs e 2>&1)"
  expect_eq "$(op logs e 2>/dev/null)" "out-1" "stdout of logs e"
  expect_eq "$(op logs e 2>&1 >/dev/null)" "err-1" "stderr of logs e"
  expect_eq "$(op logs --stderr e/t 2>&1)" "err-1" "logs --stderr"
  expect_eq "$(op logs --stdout e/t 2>&1)" "out-1" "logs --stdout"
  local line; line="$(op logs -t --stdout e 2>&1)"
  [[ "$line" =~ ^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]Z\ out-1$ ]] ||
    fail "logs -t: '$line'"
  expect_eq "$(op logs --since 10m --stdout e 2>&1)" "out-1" "--since 10m"
  expect_eq "$(op logs --since 2099-01-01T00:00:00Z e 2>&1)" "" "--since in the future"
  expect_exit 2 op logs --since yesterday e
  # The plain log file is the task's bytes, untouched.
  expect_eq "$(cat "$(op --json task inspect e.t | json_get log_dir)/t.stdout")" "out-1" "the log file"
  jt_job m "$(jt_sleeper a)" "$(jt_sleeper b)" | op run -f - --detach >/dev/null || fail "submit m"
  local msg; msg="$(op logs m 2>&1)" && fail "logs m succeeded: $msg"
  expect_contains "$msg" "m/a, m/b" "the tasks named"
}

# The history survives a worker kill and an upgrade, a removed job's events
# stay, and a name nothing has is an error.
test_events_survive_worker_restarts_and_removal() {
  cp "$OUTPOST" "$T/outpost"
  OUTPOST="$T/outpost"
  jt_start
  jt_job h "$(jt_sleeper t)" | op run -f - --detach >/dev/null || fail "submit h"
  wait_for 10 jt_events_contain h/t 'started with pid' || fail "no start event: $(op events h)"
  local seq; seq="$(op events --json | tail -1 | json_get seq)"
  local w; w="$(le_worker)"
  kill -9 "$w"
  wait_for 15 le_new_worker "$w" || fail "no new worker after kill -9"
  expect_contains "$(op events h)" "job-submitted" "h's events after a worker kill"
  local seq2; seq2="$(op events --json | tail -1 | json_get seq)"
  [ "$seq2" -ge "$seq" ] || fail "seq went back from $seq to $seq2"
  w="$(le_worker)"
  cp "$T/outpost" "$T/outpost.new" && mv "$T/outpost.new" "$T/outpost"
  kill -USR2 "$AGENT_PID"
  wait_for 15 le_new_worker "$w" || fail "no new worker after SIGUSR2"
  expect_contains "$(op events h)" "job-submitted" "h's events after an upgrade"
  expect_exit 0 op rm h
  wait_for 10 jt_events_contain h job-removed || fail "no job-removed: $(op events h)"
  expect_contains "$(op events h)" "started with pid" "a removed job's events"
  expect_exit 1 op events nosuchjob
  expect_contains "$(op events nosuchjob 2>&1)" "nosuchjob" "the error names it"
}

# events -f for a job that does not exist yet follows it once it does.
test_events_follow_a_job_submitted_later() {
  jt_start
  op events -f later >"$T/follow.out" 2>&1 &
  local f=$!
  jt_job later "$(jt_sleeper t)" | op run -f - --detach >/dev/null || fail "submit later"
  wait_for 15 grep -q 'started with pid' "$T/follow.out" || { kill "$f"; fail "events -f saw: $(cat "$T/follow.out")"; }
  kill "$f"
  wait "$f" 2>/dev/null || true
}
