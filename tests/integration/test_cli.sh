# The CLI says what is happening: run's progress and its fail-fast for a
# start that cannot heal, start/stop/restart/rm of many jobs, ps's filters,
# status's counts, and the smaller messages (update's flags, an unchanged
# stopped job). Helpers are prefixed cl_ (jt_ ones come from test_jobs.sh).

# cl_took_less SECONDS START: the time since START ($EPOCHREALTIME) is
# under SECONDS.
cl_took_less() { awk -v a="$2" -v b="$EPOCHREALTIME" -v s="$1" 'BEGIN { exit !(b - a < s) }'; }

# A start that retrying cannot heal fails run at once, with a shell's exit
# status and a message naming the task and the command; not after --timeout.
test_cli_run_fails_fast_for_a_command_that_does_not_exist() {
  jt_start
  local t0=$EPOCHREALTIME
  expect_exit 127 jt_run_doc "$(jt_job web "$(jt_task server /nonexistent/server)")" --timeout 60s
  cl_took_less 30 "$t0" || fail "run waited for its timeout"
  expect_contains "$OUT" "web/server: start failed" "the message names the task"
  expect_contains "$OUT" "/nonexistent/server" "the message names the command"
  # Looked up in PATH, as a shell does.
  t0=$EPOCHREALTIME
  expect_exit 127 jt_run_doc "$(jt_job lookup "$(jt_task t no-such-command-xyz)")" --timeout 60s
  cl_took_less 30 "$t0" || fail "run waited for its timeout"
  expect_contains "$OUT" "lookup/t: start failed" "PATH lookup: the task"
  expect_contains "$OUT" "command \"no-such-command-xyz\" not found in PATH=" "PATH lookup: the command"
  # The agent goes on by the restart policy; the job is there to inspect.
  expect_contains "$(op inspect web/server)" "start failed" "inspect shows the start error"
  # A task that never ran has no logs, and logs says so (not "not found").
  expect_exit 1 op logs web/server
  expect_contains "$OUT" "web/server has no logs yet: it has not started (\`outpost inspect web/server\` says why)" \
    "logs of a task that never ran"
}

test_cli_run_fails_fast_for_a_command_that_is_not_executable() {
  jt_start
  printf '#!/bin/sh\necho hi\n' >"$T/script"
  chmod 644 "$T/script"
  local t0=$EPOCHREALTIME
  expect_exit 126 jt_run_doc "$(jt_job web "$(jt_task server "$T/script")")" --timeout 60s
  cl_took_less 30 "$t0" || fail "run waited for its timeout"
  expect_contains "$OUT" "web/server: start failed" "the message names the task"
  expect_contains "$OUT" "$T/script" "the message names the path"
  expect_contains "$OUT" "Permission denied" "the message says why"
}

test_cli_run_fails_fast_for_an_unknown_user() {
  jt_start
  local t0=$EPOCHREALTIME
  expect_exit 1 jt_run_doc "$(jt_job web "$(JT_EXTRA='"user": "no-such-user-xyz"' jt_sleeper server)")" --timeout 60s
  cl_took_less 30 "$t0" || fail "run waited for its timeout"
  expect_contains "$OUT" "web/server: start failed" "the message names the task"
  expect_contains "$OUT" "no-such-user-xyz" "the message names the user"
}

# --progress (or a terminal): one line per task per change, on stderr.
test_cli_run_progress_shows_each_tasks_state() {
  jt_start
  expect_exit 0 jt_run_doc "$(jt_job web "$(jt_sleeper server)" "$(jt_sleeper db)")" --progress
  expect_contains "$OUT" "web/server: running" "progress shows running"
  expect_contains "$OUT" "web/server: healthy" "progress shows healthy"
  expect_contains "$OUT" "web/db: healthy" "progress shows each task"
  expect_contains "$OUT" "job web is running" "the result follows"
  # Once per change: one healthy line per task.
  expect_eq "$(printf '%s\n' "$OUT" | grep -c 'web/server: healthy')" 1 "healthy lines of server"
  # Not with --json, nor without a terminal unless asked.
  local out
  out="$(jt_run_doc "$(jt_job j2 "$(jt_sleeper a)")" 2>&1 >/dev/null)"
  expect_not_contains "$out" "j2/a:" "no progress when stderr is no terminal"
  out="$(printf '%s\n' "$(jt_job j3 "$(jt_sleeper a)")" | op --json run -f - --progress 2>&1)"
  expect_not_contains "$out" "j3/a:" "no progress with --json"
}

cl_three_jobs() {
  local id
  for id in "$@"; do
    jt_run_doc "$(jt_job "$id" "$(jt_sleeper t)")" --detach >/dev/null || fail "run $id"
  done
  for id in "$@"; do wait_for 20 jt_status_is "$id" running >/dev/null || fail "$id not running"; done
}

test_cli_start_stop_restart_rm_take_many_jobs() {
  jt_start
  cl_three_jobs a b c
  expect_exit 0 op stop a b c
  expect_eq "$OUT" "job a stopped
job b stopped
job c stopped" "stop reports each job"
  for id in a b c; do jt_status_is "$id" stopped || fail "$id not stopped"; done
  expect_exit 0 op start a b
  expect_eq "$OUT" "job a starting
job b starting" "start reports each job"
  wait_for 20 jt_status_is a running >/dev/null || fail "start did not start a"
  wait_for 20 jt_status_is b running >/dev/null || fail "start did not start b"
  jt_status_is c stopped || fail "c was started too"
  expect_exit 0 op start a
  expect_contains "$OUT" "job a is running already (status running): nothing to do" "start of a running job"
  # An unknown job fails the command, naming it; the others are done.
  expect_exit 1 op start c nosuch
  expect_contains "$OUT" "job c starting" "the known job starts"
  expect_contains "$OUT" "\"nosuch\" not found" "the unknown job is named"
  expect_contains "$OUT" "start failed for 1 of 2: nosuch" "the summary names it"
  wait_for 20 jt_status_is c running >/dev/null || fail "c not started"
  local pa pb
  pa="$(jt_running_pid a/t)"
  pb="$(jt_running_pid b/t)"
  expect_exit 0 op restart a b/t
  expect_eq "$OUT" "restarting a
restarting b/t" "restart reports each"
  wait_for 20 jt_started_again a/t "$pa" || fail "a not restarted"
  wait_for 20 jt_started_again b/t "$pb" || fail "b/t not restarted"
  expect_exit 2 op stop a/t
  expect_contains "$OUT" "stop takes a whole job, not a task (a/t)" "stop of a task"
  expect_exit 2 op start
  expect_contains "$OUT" "start needs at least one JOB" "start without a job"
  expect_exit 1 op rm a nosuch b
  expect_contains "$OUT" "job a removed" "rm reports each"
  expect_contains "$OUT" "job b removed" "rm goes on after a failure"
  expect_contains "$OUT" "rm failed for 1 of 3: nosuch" "rm names the failed one"
  expect_eq "$(jt_job_ids)" "c" "what is left"
  # Without an agent the first call fails; the others are named as not tried.
  expect_exit 3 "$OUTPOST" --socket "$T/nothing.sock" stop a b c
  expect_contains "$OUT" "no agent is running at $T/nothing.sock" "no agent"
  expect_contains "$OUT" "stop failed for 3 of 3: a; not tried: b, c" "the untried jobs are named"
}

# Many jobs in one call, on one connection: 40 stopped jobs up in one start.
test_cli_start_of_many_jobs() {
  jt_start
  local ids=() i
  for i in $(seq 1 40); do
    ids+=("j$i")
    jt_run_doc "$(jt_job "j$i" "$(jt_sleeper t)")" --detach >/dev/null || fail "run j$i"
  done
  expect_exit 0 op stop "${ids[@]}"
  expect_eq "$(printf '%s\n' "$OUT" | grep -c stopped)" 40 "every job stopped"
  expect_exit 0 op start "${ids[@]}"
  expect_eq "$(printf '%s\n' "$OUT" | grep -c starting)" 40 "every job starting"
  wait_for 60 cl_all_running 40 || fail "not every job runs: $(op ps)"
}
cl_all_running() { [ "$(op ps --status running | tail -n +2 | wc -l)" = "$1" ]; }

test_cli_ps_filters_by_name_and_status() {
  jt_start
  cl_three_jobs web1 web2 db
  op stop db >/dev/null || fail "stop db"
  local out
  out="$(op ps 'web*')"
  expect_contains "$out" "web1" "glob"
  expect_contains "$out" "web2" "glob"
  expect_not_contains "$out" "db " "glob leaves db out"
  out="$(op ps --status stopped)"
  expect_contains "$out" "db" "status filter"
  expect_not_contains "$out" "web" "status filter leaves the running ones out"
  out="$(op ps --status running,stopped web1 db)"
  expect_contains "$out" "web1" "both"
  expect_contains "$out" "db" "both"
  expect_not_contains "$out" "web2" "both"
  expect_eq "$(op --json ps 'w*' --status running | python3 -c 'import json,sys; print(" ".join(sorted(j["id"] for j in json.load(sys.stdin)["jobs"])))')" \
    "web1 web2" "ps --json filters too"
  expect_exit 2 op ps --status bogus
  expect_contains "$OUT" "unknown status \"bogus\"" "a bad status word"
  expect_contains "$OUT" "degraded" "the words are listed"
  # Ages like docker's.
  out="$(op ps web1 | tail -n 1)"
  [[ "$out" =~ \ [0-9]+s\  ]] || fail "ps AGE of a new job: $out"
}

test_cli_status_counts_jobs_and_tasks() {
  jt_start
  expect_exit 0 op status
  expect_contains "$OUT" "jobs:         0 (none)" "no jobs"
  cl_three_jobs a b
  jt_run_doc "$(jt_job c "$(jt_sleeper x)" "$(jt_sleeper y)")" >/dev/null || fail "run c"
  op stop b >/dev/null || fail "stop b"
  expect_exit 0 op status
  expect_contains "$OUT" "jobs:         3 (2 running, 1 stopped)" "job counts"
  expect_contains "$OUT" "tasks:        4 (3 running, 1 dead)" "task counts"
  expect_eq "$(op --json status | json_get jobs.running)" 2 "--json jobs.running"
  expect_eq "$(op --json status | json_get jobs.total)" 3 "--json jobs.total"
  expect_eq "$(op --json status | json_get tasks.dead)" 1 "--json tasks.dead"
}

test_cli_resubmitting_a_stopped_job_leaves_it_stopped() {
  jt_start
  jt_job web "$(jt_sleeper t)" >"$T/web.json"
  op run -f "$T/web.json" >/dev/null || fail "run"
  op stop web >/dev/null || fail "stop"
  expect_exit 0 op run -f "$T/web.json"
  expect_eq "$OUT" "job web unchanged (version 1) and stopped; \`outpost start web\` starts it" "resubmit"
  jt_status_is web stopped || fail "the job was started"
  expect_exit 0 op start web
  wait_for 20 jt_status_is web running >/dev/null || fail "start"
}

test_cli_update_names_the_flag_in_its_error() {
  jt_start
  jt_run_doc "$(jt_job web "$(jt_sleeper api)")" >/dev/null || fail "run"
  expect_exit 2 op update web/api --memory-max lots
  expect_contains "$OUT" "--memory-max: " "the flag is named"
  expect_not_contains "$OUT" "resources.memory.max" "not the JSON path"
  expect_exit 2 op update web --pids-max -3
  expect_contains "$OUT" "--pids-max: " "the flag is named for the job too"
}

test_cli_job_level_hooks_says_to_set_them_per_task() {
  jt_start
  expect_exit 2 jt_run_doc '{"id": "h", "hooks": [], "tasks": [{"name": "t", "command": "/bin/true"}]}'
  expect_contains "$OUT" "hooks: hooks are set per task" "job-level hooks"
}

# cl_json_stream: the JSON documents on stdin, one after the other (as jq
# reads them), printed as one compact array.
cl_json_stream() {
  python3 -c '
import json, sys
text, at, docs = sys.stdin.read(), 0, []
dec = json.JSONDecoder()
while text[at:].strip():
    while text[at].isspace(): at += 1
    doc, at = dec.raw_decode(text, at)
    docs.append(doc)
print(json.dumps(docs, sort_keys=True))'
}

# --json of start, stop, restart and rm with many jobs: one document per
# job done, in order (docs/cli-json.md); a failed one prints none.
test_cli_json_of_many_jobs_is_one_document_each() {
  jt_start
  cl_three_jobs a b
  expect_eq "$(op --json stop a b | cl_json_stream)" '[{"stopped": "a"}, {"stopped": "b"}]' "stop --json"
  expect_eq "$(op --json start a b | cl_json_stream)" '[{"starting": "a"}, {"starting": "b"}]' "start --json"
  wait_for 20 jt_status_is a running >/dev/null || fail "a not running"
  expect_eq "$(op --json start a | cl_json_stream)" '[{"already_running": true, "job": "a", "status": "running"}]' \
    "start --json of a running job"
  expect_eq "$(op --json restart a b/t 2>/dev/null | cl_json_stream)" '[{"restarting": "a"}, {"restarting": "b/t"}]' \
    "restart --json"
  local out; out="$(op --json rm a nosuch b 2>/dev/null)" && fail "rm of an unknown job succeeded"
  expect_eq "$(printf '%s' "$out" | cl_json_stream)" '[{"removed": "a"}, {"removed": "b"}]' "rm --json with a failure"
}

# inspect JOB/TASK of a task that failed: how its last run ended, when, and
# the last lines of its stderr and stdout (10, or --lines N).
test_cli_inspect_of_a_failed_task() {
  jt_start
  local script='for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo err-$i >&2; done; echo out-only; exit 3'
  jt_job bad "$(JT_EXTRA='"restart": {"policy": "never"}' jt_task t /bin/sh -c "$script")" >"$T/bad.json"
  op run -f "$T/bad.json" --detach >/dev/null || fail "submit bad"
  wait_for 20 jt_status_is bad failed >/dev/null || fail "bad did not fail: $(op inspect bad)"
  expect_exit 0 op inspect bad/t
  local txt="$OUT"
  expect_contains "$txt" "state:      dead" "state"
  expect_contains "$txt" "last exit:  exit code 3" "how the last run ended"
  expect_contains "$txt" 'reason:     failed: exit code 3 (restart policy "never")' "why it is not restarted"
  local started ended
  started="$(printf '%s\n' "$txt" | sed -n 's/^started: *//p')"
  ended="$(printf '%s\n' "$txt" | sed -n 's/^ended: *//p')"
  [[ "$ended" =~ ^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T ]] || fail "no ended time: $txt"
  [[ ! "$ended" < "$started" ]] || fail "ended $ended before started $started"
  expect_eq "$(printf '%s\n' "$txt" | sed -n '/^stderr (last 10 lines):$/,/^stdout/p' | sed -n 's/^  //p' | xargs)" \
    "err-3 err-4 err-5 err-6 err-7 err-8 err-9 err-10 err-11 err-12" "the last 10 lines of stderr"
  expect_eq "$(printf '%s\n' "$txt" | sed -n '/^stdout (last 10 lines):$/,$p' | sed -n 's/^  //p')" "out-only" "stdout's tail"
  expect_exit 0 op inspect bad/t --lines 3
  expect_contains "$OUT" "stderr (last 3 lines):
  err-10
  err-11
  err-12
stdout (last 3 lines):
  out-only" "--lines 3"
  expect_not_contains "$OUT" "err-9" "--lines 3 shows no more"
  expect_exit 0 op --json inspect bad/t --lines 2
  expect_eq "$(printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["last_exit"], d["stderr_tail"], d["stdout_tail"], d["task"]["exit_code"], d["task"]["completed_at"] is not None)')" \
    "exit code 3 ['err-11', 'err-12'] ['out-only'] 3 True" "--json's last_exit, tails and end"
  expect_exit 2 op inspect bad/t --lines lots
}

# ps at CLI level: RUNNING leaves completed prestart and poststart tasks
# out; NOTE says why a job is not running, and the task behind a failed
# prestart task says what it waits for.
test_cli_ps_running_count_and_note_with_lifecycle_tasks() {
  jt_start
  local pre post
  pre="$(JT_EXTRA='"lifecycle": {"hook": "prestart"}' jt_task setup /bin/true)"
  post="$(JT_EXTRA='"lifecycle": {"hook": "poststart"}' jt_task announce /bin/true)"
  jt_run_doc "$(jt_job hooks "$pre" "$(jt_sleeper main)" "$post")" >/dev/null || fail "run hooks: $(op inspect hooks)"
  wait_for 20 jt_tstate_is hooks/announce dead >/dev/null || fail "the poststart task did not complete: $(op inspect hooks)"
  expect_exit 0 op ps hooks
  expect_eq "$(printf '%s\n' "$OUT" | awk '$1 == "hooks" {print $2, $3, $NF}')" "running 1/1 -" \
    "completed hooks count in neither number"
  pre="$(JT_EXTRA='"lifecycle": {"hook": "prestart"}, "restart": {"policy": "never"}' jt_task setup /bin/sh -c 'exit 4')"
  jt_job blocked "$pre" "$(jt_sleeper main)" | op run -f - --detach >/dev/null || fail "submit blocked"
  wait_for 20 jt_status_is blocked failed >/dev/null || fail "blocked did not fail: $(op inspect blocked)"
  expect_exit 0 op ps blocked
  local row; row="$(printf '%s\n' "$OUT" | awk '$1 == "blocked"')"
  expect_eq "$(printf '%s\n' "$row" | awk '{print $2, $3}')" "failed 0/2" "status and RUNNING of a job whose prestart failed"
  expect_contains "$row" 'setup: failed: exit code 4 (restart policy "never")' "NOTE names the failed task and why"
  expect_exit 0 op inspect blocked
  expect_eq "$(printf '%s\n' "$OUT" | awk '$1 == "main" {print $2}')" "pending" "the main task's state"
  expect_contains "$(printf '%s\n' "$OUT" | awk '$1 == "main"')" "waiting for prestart task setup (failed: exit code 4" \
    "the main task's NOTE says what it waits for"
}
