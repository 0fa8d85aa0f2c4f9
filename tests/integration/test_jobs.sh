# Jobs through the CLI: run (file, stdin, --detach, failing, invalid), ps,
# inspect, stop, rm, restart, logs, exec, signal, events, stats, updates.
# Helpers are prefixed jt_ (every test file is sourced into one shell).

# jt_config [EXTRA_JSON_MEMBERS]: config with a jobs.d under $T.
jt_config() {
  mkdir -p "$T/jobs.d"
  write_config "\"jobs_dir\": \"$T/jobs.d\"${1:+, $1}"
}
jt_start() { jt_config "${1:-}"; start_agent; }

# jt_task NAME CMD [ARGS...]: a task object running CMD ARGS (as JSON
# strings; no quoting of " or \ needed in the tests' arguments).
jt_task() {
  local name="$1" cmd="$2"; shift 2
  local args="" a
  for a in "$@"; do args="$args${args:+, }\"$a\""; done
  printf '{"name": "%s", "command": "%s", "args": [%s]%s}' "$name" "$cmd" "$args" "${JT_EXTRA:+, $JT_EXTRA}"
}
# jt_job ID TASK_JSON...: a job document.
jt_job() {
  local id="$1"; shift
  local tasks="" t
  for t in "$@"; do tasks="$tasks${tasks:+, }$t"; done
  printf '{"id": "%s", "tasks": [%s]}\n' "$id" "$tasks"
}
jt_sleeper() { jt_task "$1" "$HELPER" sleep "${2:-600}"; }
# jt_run_doc DOC [RUN_ARGS...]: `outpost run -f -` with DOC on stdin.
jt_run_doc() { printf '%s\n' "$1" | op run -f - "${@:2}"; }

# jt_tfield JOB/TASK FIELD: a field of `inspect JOB/TASK --json` (dots for nesting).
jt_tfield() { op --json inspect "$1" | json_get "$2"; }
jt_jfield() { op --json inspect "$1" | json_get "$2"; }
jt_tstate_is() { [ "$(jt_tfield "$1" state)" = "$2" ]; }
jt_status_is() { [ "$(jt_jfield "$1" status)" = "$2" ]; }
jt_pid() { jt_tfield "$1" pid; }
jt_running_pid() { local p; p="$(jt_pid "$1")" && [ -n "$p" ] && [ "$p" != 0 ] && echo "$p"; }
jt_restarts_at_least() { [ "$(jt_tfield "$1" restarts)" -ge "$2" ]; }
jt_pid_changed() { local p; p="$(jt_running_pid "$1")" && [ "$p" != "$2" ]; }
# jt_started_again JOB/TASK OLDPID: an instance other than OLDPID was started
# (monotone, unlike "the pid now differs", which a task in backoff flips).
jt_started_again() { op events "$1" 2>/dev/null | grep 'started with pid' | grep -qv "pid $2\$"; }
jt_events_contain() { op events "$1" 2>/dev/null | grep -qF -- "$2"; }
# jt_healthy_count JOB[/TASK]: how many `healthy` events there are;
# jt_healthy_is JOB[/TASK] N: exactly N (a predicate for wait_for).
jt_healthy_count() { op events "$1" 2>/dev/null | grep -c ' healthy '; }
jt_healthy_is() { [ "$(jt_healthy_count "$1")" = "$2" ]; }
# jt_job_ids: sorted ids of every job, one line.
jt_job_ids() { op --json ps | python3 -c 'import json,sys; print(" ".join(sorted(j["id"] for j in json.load(sys.stdin)["jobs"])))'; }

test_job_run_from_file_and_stdin_waits_until_running() {
  jt_start
  jt_job web "$(jt_sleeper api)" "$(jt_sleeper db)" >"$T/web.json"
  expect_exit 0 op run -f "$T/web.json"
  expect_contains "$OUT" "job web created" "run prints the creation"
  expect_contains "$OUT" "job web is running" "run waits until running"
  # When run returns, both tasks run (not merely pending).
  jt_tstate_is web/api running || fail "api not running after run returned"
  jt_tstate_is web/db running || fail "db not running after run returned"
  expect_exit 0 jt_run_doc "$(cat "$T/web.json")"
  expect_contains "$OUT" "job web unchanged" "same spec on stdin"
  jt_job other "$(jt_sleeper t)" | op run -f - --detach >"$T/out" || fail "run --detach failed"
  expect_contains "$(cat "$T/out")" "job other created" "detach"
  expect_not_contains "$(cat "$T/out")" "is running" "--detach does not wait"
  wait_for 10 jt_tstate_is other/t running || fail "detached job did not start"
  expect_exit 0 op ps
  expect_contains "$OUT" "web" "ps lists web"
  expect_contains "$OUT" "other" "ps lists other"
  expect_eq "$(op --json ps | python3 -c 'import json,sys; print([ (j["id"], j["status"], len(j["tasks"])) for j in json.load(sys.stdin)["jobs"]])')" \
    "[('other', 'running', 1), ('web', 'running', 2)]" "ps --json"
  expect_exit 2 op run
  expect_contains "$OUT" "run needs a job file" "usage"
  expect_exit 2 op run -f "$T/missing.json"
  expect_contains "$OUT" "missing.json" "unreadable file named"
}

test_job_run_of_a_failing_job_exits_1() {
  jt_start
  local pol='"restart": {"policy": "on-failure", "attempts": 2, "delay": "1s", "interval": "1m"}'
  jt_job bad "$(JT_EXTRA="$pol" jt_task t "$HELPER" exit 3)" >"$T/bad.json"
  expect_exit 1 op run -f "$T/bad.json"
  expect_contains "$OUT" "job bad has failed" "status line"
  expect_contains "$OUT" "task t failed (exit code 3)" "says which task and why"
  expect_contains "$OUT" "outpost inspect bad" "says where to look"
  expect_eq "$(jt_tfield bad/t state)" "dead" "dead"
  expect_eq "$(jt_tfield bad/t failed)" "True" "failed"
  expect_eq "$(jt_tfield bad/t restarts)" "2" "2 restarts"
  expect_exit 0 op events bad/t
  expect_contains "$OUT" "restarting in 1s: exit code 3 (restart 1 of 2 within 1m)" "first backoff"
  expect_contains "$OUT" "restarting in 2s: exit code 3 (restart 2 of 2 within 1m)" "backoff doubles"
  expect_contains "$OUT" "restart limit reached" "failed event"
  expect_eq "$(printf '%s\n' "$OUT" | grep -c ' started ')" "3" "three starts"
  # Re-running a failed job that did not change says so and fails at once.
  expect_exit 1 op run -f "$T/bad.json"
  expect_contains "$OUT" "job bad unchanged" "unchanged"
}

# A task that stays up half a second and then fails: a run that polled the
# job could see it running; run waits for healthy (up for 2s) instead.
test_job_run_never_reports_a_task_that_exits_as_running() {
  jt_start
  jt_job quick "$(JT_EXTRA='"restart": {"policy": "never"}' jt_task t /bin/sh -c 'sleep 0.5; exit 3')" >"$T/quick.json"
  expect_exit 1 op run --min-healthy-time 2s -f "$T/quick.json"
  expect_not_contains "$OUT" "is running" "never said running"
  expect_contains "$OUT" "job quick has failed" "status line"
  expect_contains "$OUT" "task t failed (exit code 3)" "says which task and why"
  expect_eq "$(jt_jfield quick spec.min_healthy_time)" "2s" "the flag is stored in the spec"
  expect_exit 0 op events quick
  expect_not_contains "$OUT" "healthy" "no healthy event"
  # Restarted for ever, never up for min_healthy_time: not running in time.
  jt_job flap "$(JT_EXTRA='"restart": {"policy": "always", "attempts": 0}' jt_task t /bin/sh -c 'exit 0')" >"$T/flap.json"
  expect_exit 1 op run --timeout 2s -f "$T/flap.json"
  expect_not_contains "$OUT" "is running" "flapping task never said running"
  expect_contains "$OUT" "job flap is not running after 2s" "timeout message"
  expect_exit 2 op run --min-healthy-time 2h -f "$T/quick.json"
  expect_contains "$OUT" "--min-healthy-time: must be between 0s and 1h" "range checked"
  expect_exit 2 op run --min-healthy-time soon -f "$T/quick.json"
  expect_contains "$OUT" "--min-healthy-time" "bad duration named"
  # A member given twice reaches the agent as written (the flag does not
  # rewrite it away), and is refused there.
  printf '{"id": "twice", "id": "twice2", "tasks": [{"name": "t", "command": "/bin/true"}]}\n' >"$T/twice.json"
  expect_exit 2 op run --min-healthy-time 1s -f "$T/twice.json"
  expect_contains "$OUT" "id: given twice (lines 1 and 1)" "a member given twice, named"
  expect_exit 1 op inspect twice2
  expect_contains "$OUT" "not found" "nothing stored"
}

test_job_run_returns_once_every_task_is_healthy() {
  jt_start
  jt_job web "$(jt_sleeper api)" "$(jt_sleeper db)" >"$T/web.json"
  local t0 t1
  t0="$(date +%s%N)"
  expect_exit 0 op run --min-healthy-time 1500ms -f "$T/web.json"
  t1="$(date +%s%N)"
  expect_contains "$OUT" "job web is running" "running"
  # Healthy before run returned: the events are there at once, and no task
  # can be healthy before it has been up for min_healthy_time.
  expect_eq "$(jt_healthy_count web/api)" "1" "api healthy when run returned"
  expect_eq "$(jt_healthy_count web/db)" "1" "db healthy when run returned"
  expect_contains "$(op events web/api)" "running for 1.5s" "healthy after min_healthy_time"
  [ $(((t1 - t0) / 1000000)) -ge 1500 ] || fail "run returned before min_healthy_time: $(((t1 - t0) / 1000000))ms"
  expect_eq "$(jt_tfield web/api healthy)" "True" "inspect --json shows healthy"
  expect_eq "$(jt_jfield web spec.min_healthy_time)" "1.5s" "stored"
  # 0s: healthy as soon as started (and found alive).
  jt_job zero "$(jt_sleeper t)" >"$T/zero.json"
  expect_exit 0 op run --min-healthy-time 0s -f "$T/zero.json"
  expect_contains "$OUT" "job zero is running" "running with 0s"
  expect_contains "$(op events zero/t)" "running for 0s" "healthy at once"
  # A batch job: complete is success, no healthy needed.
  jt_job batch "$(jt_task t /bin/sh -c 'exit 0')" >"$T/batch.json"
  expect_exit 0 op run -f "$T/batch.json"
  expect_contains "$OUT" "job batch is complete" "complete"
}

test_job_invalid_spec_changes_nothing() {
  jt_start
  jt_job web "$(jt_sleeper api)" | op run -f - >/dev/null || fail "run web"
  jt_job other "$(jt_sleeper t)" | op run -f - >/dev/null || fail "run other"
  local pid opid ver
  pid="$(jt_running_pid web/api)"; opid="$(jt_running_pid other/t)"; ver="$(jt_jfield web version)"
  printf '{"id": "web", "tasks": [{"name": "api", "command": 5, "args": "x"}, {"name": "api"}], "bogus": 1}' >"$T/bad.json"
  OUT="$(op run -f "$T/bad.json" 2>&1 >/dev/null)"; local rc=$?
  expect_eq "$rc" 2 "invalid spec exit code"
  expect_eq "$OUT" "outpost: invalid job spec in $T/bad.json (nothing was changed):
  bogus: unknown field
  tasks[0].command: expected a string, got number
  tasks[0].args: expected an array of strings, got string
  tasks[1].command: required
  tasks[1].name: duplicate task name \"api\" (also tasks[0])" "every problem, by JSON path, on stderr"
  OUT="$(echo '{"id": ' | op run -f - 2>&1)"; rc=$?
  expect_eq "$rc" 2 "malformed JSON exit code"
  expect_contains "$OUT" "invalid job spec from stdin (nothing was changed):" "stdin named"
  expect_contains "$OUT" "invalid JSON" "says it is not JSON"
  expect_eq "$(jt_running_pid web/api)" "$pid" "web/api keeps its pid"
  expect_eq "$(jt_running_pid other/t)" "$opid" "other/t keeps its pid"
  expect_eq "$(jt_jfield web version)" "$ver" "web keeps its version"
  expect_eq "$(jt_job_ids)" "other web" "no job added"
}

test_job_inspect_restart_and_logs_across_restarts() {
  jt_start
  jt_job web "$(jt_task api /bin/sh -c 'echo hello from $$; exec sleep 600')" "$(jt_sleeper db)" | op run -f - >/dev/null \
    || fail "run web"
  expect_exit 0 op inspect web
  expect_contains "$OUT" "status:     running" "inspect job"
  expect_contains "$OUT" "source:     api" "source"
  expect_exit 0 op inspect web/api
  expect_contains "$OUT" "task:       web/api" "inspect task"
  expect_contains "$OUT" "command:    /bin/sh -c" "command"
  expect_exit 1 op inspect web/nope
  expect_contains "$OUT" "job \"web\" has no task \"nope\" (tasks: api, db)" "unknown task lists the tasks"
  expect_exit 1 op inspect nope
  expect_contains "$OUT" "job \"nope\" not found" "unknown job"
  expect_eq "$(op --json inspect web | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["tasks"][0]["restart"]["policy"])')" \
    "on-failure" "--json carries the canonical spec with defaults"
  local api db
  api="$(jt_running_pid web/api)"; db="$(jt_running_pid web/db)"
  wait_for 5 sh -c "'$OUTPOST' --socket '$SOCK' logs web/api | grep -q hello" || fail "no log line"
  expect_exit 0 op restart web/api
  expect_contains "$OUT" "web/api" "restart names the task"
  wait_for 10 jt_pid_changed web/api "$api" || fail "api was not restarted"
  expect_eq "$(jt_running_pid web/db)" "$db" "db keeps its pid on a task restart"
  local api2; api2="$(jt_running_pid web/api)"
  wait_for 5 sh -c "[ \$('$OUTPOST' --socket '$SOCK' logs web/api | grep -c hello) = 2 ]" || fail "no second log line"
  expect_exit 0 op logs web/api
  expect_eq "$OUT" "$(printf 'hello from %s\nhello from %s' "$api" "$api2")" "one log across restarts"
  expect_exit 0 op logs --tail 1 web/api
  expect_eq "$OUT" "hello from $api2" "tail"
  expect_exit 0 op restart web
  wait_for 10 jt_pid_changed web/db "$db" || fail "db was not restarted by a job restart"
  wait_for 10 jt_pid_changed web/api "$api2" || fail "api was not restarted by a job restart"
  wait_for 10 jt_status_is web running || fail "web not running after restart"
  expect_exit 0 op events web
  expect_contains "$OUT" "job-restarting" "job restart event"
  expect_exit 1 op restart web/nope
  expect_contains "$OUT" "has no task \"nope\"" "restart of an unknown task"
  expect_exit 1 op logs web/nope
}

test_job_exec_signal_stats() {
  jt_start
  jt_job web "$(JT_EXTRA='"env": {"MARK": "hello"}' jt_task api "$HELPER" trap USR1 42)" "$(jt_sleeper db)" \
    | op run -f - >/dev/null || fail "run web"
  local pid; pid="$(jt_running_pid web/api)"
  wait_for 5 sig_in_mask "$pid" SigCgt 10 || fail "trap not installed"
  expect_exit 0 op exec web/api -- "$HELPER" env
  expect_contains "$OUT" "MARK=hello" "exec sees the task env"
  expect_exit 7 op exec web/api -- "$HELPER" exit 7
  expect_exit 1 op exec web/nope -- "$HELPER" exit 0
  expect_exit 0 op stats web
  expect_contains "$OUT" "web/api" "stats row"
  expect_contains "$OUT" "web/db" "stats row"
  expect_contains "$(printf '%s\n' "$OUT" | head -n1)" "MEMORY" "stats header"
  expect_eq "$(printf '%s\n' "$OUT" | wc -l)" "3" "non-tty stats is one table"
  OUT="$(timeout 3 "$OUTPOST" --socket "$SOCK" stats -f --interval 200ms web/db)"
  local n; n="$(printf '%s\n' "$OUT" | grep -c 'web/db pid=')"
  [ "$n" -ge 2 ] || fail "stats -f printed $n samples: $OUT"
  expect_exit 1 op stats nope
  expect_contains "$OUT" "job \"nope\" not found" "stats of an unknown job"
  expect_exit 0 op signal web/api USR1
  wait_for 10 jt_events_contain web/api "exited with code 42" || fail "signal did not reach the task"
  expect_exit 1 op signal web/api BOGUS
  expect_contains "$OUT" "unknown signal" "bad signal name"
}

test_job_stop_and_rm() {
  jt_start
  jt_job web "$(JT_EXTRA='"kill_timeout": "30s"' jt_task api "$HELPER" ignore-term 600)" "$(jt_sleeper db)" \
    | op run -f - >/dev/null || fail "run web"
  local api db; api="$(jt_running_pid web/api)"; db="$(jt_running_pid web/db)"
  wait_for 5 sig_in_mask "$api" SigIgn 15 || fail "ignore-term not installed"
  local t0=$SECONDS
  expect_exit 0 op stop web --timeout 500ms
  [ $((SECONDS - t0)) -le 5 ] || fail "--timeout not applied (took $((SECONDS - t0))s)"
  proc_alive "$api" && fail "api still alive after stop"
  proc_alive "$db" && fail "db still alive after stop"
  expect_eq "$(jt_jfield web status)" "stopped" "status"
  expect_eq "$(jt_jfield web desired)" "stopped" "desired"
  expect_exit 0 op events web
  expect_contains "$OUT" "job-stopping" "stop event"
  expect_contains "$OUT" "killed by SIGKILL" "escalated to SIGKILL"
  expect_exit 2 op stop web/api
  expect_contains "$OUT" "stop takes a whole job" "stop JOB/TASK"
  expect_exit 0 op restart web
  wait_for 10 jt_status_is web running || fail "restart did not start the stopped job"
  expect_exit 0 op rm web
  expect_exit 1 op inspect web
  expect_exit 1 op rm web
  expect_contains "$OUT" "job \"web\" not found" "rm of a removed job"
  [ -e "$T/state/logs/web.api" ] && fail "rm left the logs: $(ls "$T/state/logs")"
  expect_eq "$(jt_job_ids)" "" "no jobs left"
}

test_job_update_restarts_only_changed_tasks() {
  jt_start
  local a b b2 c
  a="$(jt_sleeper a)"; b="$(jt_sleeper b)"; b2="$(jt_sleeper b 601)"; c="$(jt_sleeper c)"
  jt_job u "$a" "$b" | op run -f - >/dev/null || fail "run u"
  local pa pb; pa="$(jt_running_pid u/a)"; pb="$(jt_running_pid u/b)"
  expect_exit 0 jt_run_doc "$(jt_job u "$a" "$b")"
  expect_contains "$OUT" "job u unchanged (version 1)" "unchanged re-run"
  expect_eq "$(jt_running_pid u/a)" "$pa" "unchanged: a keeps its pid"
  expect_eq "$(jt_running_pid u/b)" "$pb" "unchanged: b keeps its pid"
  expect_exit 0 jt_run_doc "$(jt_job u "$a" "$b2")" --timeout 15s
  expect_contains "$OUT" "job u updated to version 2; restarting: b" "update names the restarted task"
  expect_eq "$(jt_running_pid u/a)" "$pa" "a keeps its pid"
  jt_pid_changed u/b "$pb" || fail "b not restarted"
  proc_alive "$pb" && fail "the old b ($pb) still runs after the update"
  expect_eq "$(jt_tfield u/b task.args | tr -d "[]' ")" "sleep,601" "b runs the new spec"
  expect_exit 0 jt_run_doc "$(jt_job u "$a" "$c")" --timeout 15s
  expect_contains "$OUT" "added: c; removed: b" "update names added and removed tasks"
  expect_eq "$(jt_running_pid u/a)" "$pa" "a keeps its pid"
  jt_tstate_is u/c running || fail "c not running"
  expect_exit 1 op inspect u/b
  expect_eq "$(jt_jfield u version)" "3" "version"
}

test_job_restart_policies() {
  jt_start
  # never: one start, failed, no restart.
  local never='"restart": {"policy": "never"}'
  expect_exit 1 jt_run_doc "$(jt_job n "$(JT_EXTRA="$never" jt_task t "$HELPER" exit 1)")"
  expect_eq "$(jt_tfield n/t restarts)" "0" "never: no restart"
  expect_eq "$(jt_tfield n/t failed)" "True" "never: failed"
  jt_events_contain n/t restarting && fail "never: restart event: $(op events n/t)"
  # always: restarts after a successful exit too.
  jt_job al "$(JT_EXTRA='"restart": {"policy": "always", "delay": "1s"}' jt_task t "$HELPER" exit 0)" \
    | op run -f - --detach >/dev/null || fail "run al"
  wait_for 10 jt_restarts_at_least al/t 1 || fail "always: no restart after exit 0"
  expect_exit 0 op events al/t
  expect_contains "$OUT" "restarting in 1s: exit code 0" "always restarts after exit 0"
  # on-failure: a successful exit completes the task.
  expect_exit 0 jt_run_doc "$(jt_job ok "$(jt_task t "$HELPER" exit 0)")"
  wait_for 10 jt_status_is ok complete || fail "on-failure exit 0 does not complete: $(op inspect ok)"
  expect_eq "$(jt_tfield ok/t restarts)" "0" "no restart after success"
  expect_eq "$(jt_tfield ok/t completed)" "True" "completed"
}

test_job_lifecycle_order() {
  jt_start
  local f="$T/order"
  jt_job lc \
    "$(JT_EXTRA='"lifecycle": {"hook": "poststart"}' jt_task post /bin/sh -c "echo post >>$f")" \
    "$(jt_task main /bin/sh -c "echo main >>$f; exec sleep 600")" \
    "$(JT_EXTRA='"lifecycle": {"hook": "prestart"}' jt_task pre /bin/sh -c "sleep 0.5; echo pre >>$f")" \
    "$(JT_EXTRA='"lifecycle": {"hook": "prestart", "sidecar": true}' jt_task side /bin/sh -c "echo side >>$f; exec sleep 600")" \
    >"$T/lc.json"
  expect_exit 0 op run -f "$T/lc.json"
  wait_for 10 grep -q post "$f" || fail "poststart did not run: $(cat "$f")"
  # pre's line is written before it exits, and main starts only after that.
  local order; order="$(grep -v -e side -e post "$f" | tr '\n' ' ')"
  expect_eq "$order" "pre main " "prestart completed before main"
  # Poststart starts once main is running (started), not once main's shell
  # has printed: the start order is the agent's, in its events.
  expect_exit 0 op events lc
  local starts; starts="$(echo "$OUT" | awk '$3 == "started" && $2 != "lc/side" { printf "%s ", $2 }')"
  expect_eq "$starts" "lc/pre lc/main lc/post " "prestart, then main, then poststart started"
  wait_for 10 jt_tstate_is lc/post dead || fail "post did not end"
  expect_eq "$(jt_tfield lc/post completed)" "True" "poststart completed"
  expect_eq "$(jt_tfield lc/pre completed)" "True" "prestart completed"
  jt_tstate_is lc/side running || fail "sidecar not running"
  jt_tstate_is lc/main running || fail "main not running"
  expect_eq "$(jt_tfield lc/pre restarts)" "0" "a completed prestart task is not restarted"
  expect_eq "$(jt_jfield lc status)" "running" "job status"
}

test_job_events_filtering() {
  jt_start
  jt_job e1 "$(jt_sleeper a)" "$(jt_sleeper b)" | op run -f - >/dev/null || fail "run e1"
  jt_job e2 "$(jt_sleeper a)" | op run -f - >/dev/null || fail "run e2"
  expect_exit 0 op events
  expect_contains "$OUT" "e1/a" "all events"
  expect_contains "$OUT" "e2/a" "all events"
  expect_exit 0 op events e1
  expect_contains "$OUT" "e1/b" "job filter"
  expect_contains "$OUT" "job-submitted" "job events included"
  expect_not_contains "$OUT" "e2" "job filter excludes other jobs"
  expect_exit 0 op events e1/a
  expect_contains "$OUT" "e1/a" "task filter"
  expect_not_contains "$OUT" "e1/b" "task filter excludes other tasks"
  expect_exit 0 op --json events e1/a
  expect_eq "$(printf '%s\n' "$OUT" | head -n1 | json_get task)" "a" "json events"
  expect_exit 1 op events nope/x
  "$OUTPOST" --socket "$SOCK" events -f e2 >"$T/follow" 2>&1 &  # the binary: $! is what kill must stop
  local fp=$!
  wait_for 5 grep -q job-submitted "$T/follow" || fail "events -f printed nothing"
  op restart e2/a >/dev/null
  wait_for 10 grep -q stopping "$T/follow" || { kill $fp; fail "events -f does not show new events: $(cat "$T/follow")"; }
  kill $fp
}

test_job_agent_kill_recovers_jobs() {
  jt_start
  # short exits after 5s, again and again; with min_healthy_time 0s run
  # returns once the tasks started. Its pid is taken from the one status
  # call that found it running (it may exit before the agent is killed: then
  # the agent itself restarts it, which the checks below accept too).
  jt_job p "$(jt_sleeper live)" \
    "$(JT_EXTRA='"restart": {"policy": "on-failure", "delay": "1s"}' jt_task short /bin/sh -c 'sleep 5; exit 1')" \
    | op run --min-healthy-time 0s -f - >/dev/null || fail "run p"
  jt_job s "$(jt_sleeper t)" | op run --min-healthy-time 0s -f - >/dev/null || fail "run s"
  expect_exit 0 op stop s --timeout 1s
  local live short k w
  short="$(wait_for 10 jt_running_pid p/short)" || fail "short not running"
  live="$(jt_running_pid p/live)"
  k="$(op --json status | json_get keeper_pid)"; w="$(op --json status | json_get pid)"
  kill -9 "$k" "$w"
  wait_gone "$w" 5 || fail "worker did not die"
  wait_gone "$short" 10 || fail "short did not exit"
  proc_alive "$live" || fail "live died with the agent"
  start_agent
  wait_for 10 jt_status_is p running >/dev/null
  expect_eq "$(jt_running_pid p/live)" "$live" "live task keeps its pid"
  wait_for 15 jt_started_again p/short "$short" || fail "short (exited meanwhile) not restarted: $(op inspect p)"
  wait_for 10 jt_events_contain p/short restarting || fail "no restart event for short"
  expect_eq "$(jt_jfield s status)" "stopped" "a stopped job stays stopped"
  expect_eq "$(jt_jfield s desired)" "stopped" "desired stays stopped"
  expect_eq "$(jt_tfield s/t pid)" "0" "stopped job's task not started"
}
