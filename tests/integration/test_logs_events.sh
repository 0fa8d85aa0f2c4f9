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

# events -f for a job that does not exist yet follows it once it does. The
# job is submitted only once the follower has had its first answer (it says
# on stderr that it waits), so the follower cannot have found the job there.
test_events_follow_a_job_submitted_later() {
  jt_start
  op events -f later >"$T/follow.out" 2>&1 &
  local f=$!
  echo "$f" >>"$T/.pids"
  wait_for 10 grep -q 'no events of "later" yet; waiting for them' "$T/follow.out" ||
    fail "the follower does not say it waits: $(cat "$T/follow.out")"
  jt_job later "$(jt_sleeper t)" | op run -f - --detach >/dev/null || fail "submit later"
  wait_for 15 grep -q 'started with pid' "$T/follow.out" || { kill "$f"; fail "events -f saw: $(cat "$T/follow.out")"; }
  kill "$f"
  wait "$f" 2>/dev/null || true
}

# The history is on disk: a whole agent stopped (keeper and worker, as init
# or an operator stops it) and started again shows the events from before.
test_events_survive_a_full_agent_stop_and_start() {
  jt_start
  jt_job h "$(jt_sleeper t)" | op run -f - --detach >/dev/null || fail "submit h"
  wait_for 10 jt_events_contain h/t 'started with pid' || fail "no start event: $(op events h)"
  local before; before="$(op events h)"
  local seq; seq="$(op events --json | tail -1 | json_get seq)"
  kill -TERM "$AGENT_PID"
  wait_gone "$AGENT_PID" 20 || fail "the agent did not stop on SIGTERM"
  expect_exit 3 op events h
  start_agent
  local after; after="$(op events h)"
  [ "${after:0:${#before}}" = "$before" ] || fail "the events before the stop are not kept as they were: before: $before; after: $after"
  local seq2; seq2="$(op events --json | tail -1 | json_get seq)"
  [ "$seq2" -ge "$seq" ] || fail "seq went back from $seq to $seq2"
}

le_clock_past() { [ "$(date -u +%s)" -gt "$1" ]; }
le_file_has() { grep -qxF -- "$2" "$1"; }

# logs -f with -t, --stderr, --all and --since: each follower prints what
# was there as its options say, then the new lines on their own streams,
# and ends when the task does. The task prints out-N and err-N for each N
# written to its FIFO, so the test decides when output comes.
test_logs_follow_with_timestamps_streams_and_since() {
  jt_start
  mkfifo "$T/ctl"
  jt_job lf "$(jt_task t /bin/sh -c "echo old-out; echo old-err >&2; exec 3<>$T/ctl; while read l <&3; do echo out-\$l; echo err-\$l >&2; done")" |
    op run -f - --detach >/dev/null || fail "submit lf"
  wait_for 10 le_has lf old-err || fail "no old-err: $(op logs lf 2>&1)"
  # A --since after the old lines' second: wait for the clock to pass it.
  local old; old="$(op logs -t --stdout lf | awk '{print $1}')"
  wait_for 5 le_clock_past "$(date -u -d "$old" +%s)" || fail "the clock did not pass $old"
  local since; since="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  op logs -f -t lf >"$T/t.out" 2>"$T/t.err" &
  local f1=$!
  op logs -f --stderr lf >"$T/e.out" 2>"$T/e.err" &
  local f2=$!
  op logs -f --all --since "$since" lf >"$T/s.out" 2>"$T/s.err" &
  local f3=$!
  op logs --follow --stdout --since 1h lf >"$T/o.out" 2>"$T/o.err" &
  local f4=$!
  echo "$f1 $f2 $f3 $f4" | tr ' ' '\n' >>"$T/.pids"
  wait_for 10 grep -q ' old-out$' "$T/t.out" || fail "-f -t did not print the old stdout: $(cat "$T/t.out" "$T/t.err")"
  wait_for 10 grep -q ' old-err$' "$T/t.err" || fail "-f -t did not print the old stderr: $(cat "$T/t.out" "$T/t.err")"
  wait_for 10 le_file_has "$T/e.err" old-err || fail "-f --stderr did not print the old stderr: $(cat "$T/e.err")"
  wait_for 10 le_file_has "$T/o.out" old-out || fail "-f --since 1h did not print the old stdout: $(cat "$T/o.out")"
  local n
  for n in 1 2; do
    echo "$n" >"$T/ctl"
    wait_for 10 le_file_has "$T/e.err" "err-$n" || fail "-f --stderr: no err-$n: $(cat "$T/e.err")"
    wait_for 10 le_file_has "$T/s.out" "out-$n" || fail "-f --since: no out-$n: $(cat "$T/s.out")"
    wait_for 10 le_file_has "$T/s.err" "err-$n" || fail "-f --since: no err-$n: $(cat "$T/s.err")"
    wait_for 10 le_file_has "$T/o.out" "out-$n" || fail "-f --stdout: no out-$n: $(cat "$T/o.out")"
    wait_for 10 grep -q " out-$n\$" "$T/t.out" || fail "-f -t: no out-$n: $(cat "$T/t.out")"
    wait_for 10 grep -q " err-$n\$" "$T/t.err" || fail "-f -t: no err-$n: $(cat "$T/t.err")"
  done
  # The followers end with the task.
  op stop lf >/dev/null || fail "stop lf"
  local f
  for f in $f1 $f2 $f3 $f4; do
    wait_gone "$f" 20 || fail "a follower did not end with the task"
    wait "$f" || fail "a follower exited $?"
  done
  expect_eq "$(cat "$T/e.out")" "" "-f --stderr's stdout"
  expect_eq "$(cat "$T/e.err")" "$(printf 'old-err\nerr-1\nerr-2')" "-f --stderr"
  expect_eq "$(cat "$T/s.out")" "$(printf 'out-1\nout-2')" "-f --all --since's stdout"
  expect_eq "$(cat "$T/s.err")" "$(printf 'err-1\nerr-2')" "-f --all --since's stderr"
  expect_eq "$(cat "$T/o.out")" "$(printf 'old-out\nout-1\nout-2')" "-f --stdout --since 1h"
  expect_eq "$(cat "$T/o.err")" "" "-f --stdout's stderr"
  local stamp='20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]Z'
  expect_eq "$(sed "s/^$stamp //" "$T/t.out")" "$(printf 'old-out\nout-1\nout-2')" "-f -t's stdout"
  expect_eq "$(sed "s/^$stamp //" "$T/t.err")" "$(printf 'old-err\nerr-1\nerr-2')" "-f -t's stderr"
  [ "$(grep -c "^$stamp " "$T/t.out")" = 3 ] || fail "-f -t: a stdout line without its time: $(cat "$T/t.out")"
  [ "$(grep -c "^$stamp " "$T/t.err")" = 3 ] || fail "-f -t: a stderr line without its time: $(cat "$T/t.err")"
  # The new lines' times are not before --since.
  local t1; t1="$(awk '$2 == "out-1" {print $1}' "$T/t.out")"
  [[ ! "$t1" < "$since" ]] || fail "out-1 at $t1, before $since"
}
