# Jobs from the jobs.d directory, bad input (files and API), max_jobs.
# Uses the jt_ helpers of test_jobs.sh.

# jt_file_job NAME ID [SLEEP]: writes jobs.d/NAME with one sleeper task.
jt_file_job() { jt_job "$2" "$(jt_sleeper t "${3:-600}")" >"$T/jobs.d/$1"; }
jt_has_job() { op inspect "$1" >/dev/null 2>&1; }
jt_no_job() { ! op inspect "$1" >/dev/null 2>&1; }
jt_invalid_listed() { op --json ps | python3 -c 'import json,sys; sys.exit(not any(p["file"].endswith("/" + sys.argv[1]) for p in json.load(sys.stdin)["invalid_files"]))' "$1"; }
jt_args_are() { [ "$(jt_tfield "$1" task.args | tr -d "[]' ")" = "$2" ]; }

test_jobs_dir_files_create_update_remove() {
  jt_start
  jt_file_job a.json fa
  wait_for 10 jt_tstate_is fa/t running || fail "dropped file did not start a job"
  expect_eq "$(jt_jfield fa source)" "file" "source"
  expect_eq "$(jt_jfield fa file)" "$T/jobs.d/a.json" "file"
  expect_exit 0 op ps
  expect_contains "$OUT" "file" "ps shows the source"
  # Edit in place.
  local p1; p1="$(jt_running_pid fa/t)"
  jt_file_job a.json fa 601
  wait_for 10 jt_args_are fa/t sleep,601 || fail "in-place edit not applied"
  wait_for 10 jt_pid_changed fa/t "$p1" || fail "edited task not restarted"
  expect_eq "$(jt_jfield fa version)" "2" "version after edit"
  # Replace by rename (how most tools write files).
  jt_file_job .a.tmp fa 602
  mv "$T/jobs.d/.a.tmp" "$T/jobs.d/a.json"
  wait_for 10 jt_args_are fa/t sleep,602 || fail "mv over the file not applied"
  # Editor backup and swap files are not jobs.
  jt_file_job 'a.json~' backup1
  jt_file_job '.a.json.swp' backup2
  jt_file_job '#a.json#' backup3
  jt_file_job 'notes.txt' backup4
  jt_file_job b.json fb   # a marker: once it runs, the others were seen too
  wait_for 10 jt_has_job fb || fail "b.json not applied"
  expect_eq "$(jt_job_ids)" "fa fb" "backup/swap/non-json files ignored"
  # The API cannot take over or remove a file's job.
  expect_exit 1 op rm fa
  expect_contains "$OUT" "remove that file" "rm of a file job says what to do"
  expect_contains "$OUT" "$T/jobs.d/a.json" "rm names the file"
  expect_exit 1 jt_run_doc "$(jt_job fa "$(jt_sleeper t)")"
  expect_contains "$OUT" "managed by the file $T/jobs.d/a.json" "run of a file job's id refused"
  expect_contains "$OUT" "edit that file instead" "says what to do"
  expect_exit 0 jt_run_doc "$(jt_job api1 "$(jt_sleeper t)")"
  jt_file_job c.json api1
  wait_for 10 jt_invalid_listed c.json || fail "file reusing an API job's id not reported"
  expect_eq "$(jt_jfield api1 source)" "api" "the API job stays"
  # Remove the file: the job is stopped and removed.
  local p2; p2="$(jt_running_pid fa/t)"
  rm "$T/jobs.d/a.json"
  wait_for 10 jt_no_job fa || fail "job of a removed file still there"
  wait_for 10 sh -c "! kill -0 $p2 2>/dev/null || grep -q '^State:.*Z' /proc/$p2/status" || fail "task of a removed file still runs"
}

test_jobs_dir_invalid_file_keeps_running_version() {
  jt_start
  jt_file_job w.json fw
  wait_for 10 jt_tstate_is fw/t running || fail "fw did not start"
  local pid; pid="$(jt_running_pid fw/t)"
  printf '{"id": "fw", "tasks": [{"name": "t", "command": 5}]}' >"$T/jobs.d/w.json"
  wait_for 10 jt_invalid_listed w.json || fail "invalid file not listed in ps --json"
  expect_exit 0 op ps
  expect_contains "$OUT" "Invalid job files (not applied; fix or remove them):" "ps human header"
  expect_contains "$OUT" "$T/jobs.d/w.json: tasks[0].command: expected a string, got number" "ps names file, path and problem"
  expect_eq "$(jt_running_pid fw/t)" "$pid" "the running version keeps running"
  expect_eq "$(jt_jfield fw version)" "1" "version unchanged"
  expect_exit 0 op status
  expect_contains "$OUT" "w.json" "status shows the invalid job file"
  # Fixing the file clears the problem.
  jt_file_job w.json fw 601
  wait_for 10 jt_args_are fw/t sleep,601 || fail "fixed file not applied"
  jt_invalid_listed w.json && fail "problem not cleared after the fix"
  true
}

test_jobs_dir_garbage_does_not_hurt() {
  jt_start
  jt_job keep "$(jt_sleeper t)" | op run -f - >/dev/null || fail "run keep"
  local pid; pid="$(jt_running_pid keep/t)"
  local d="$T/jobs.d" i
  for i in $(seq 1 100); do head -c $((RANDOM % 2000)) /dev/urandom >"$d/rand$i.json"; done
  for i in $(seq 1 100); do : >"$d/empty$i.json"; done
  for i in $(seq 1 50); do mkdir "$d/dir$i.json"; done
  for i in $(seq 1 49); do printf '{"id": "g%s", "tasks": [' "$i" >"$d/trunc$i.json"; done
  mkfifo "$d/y.json"
  head -c $((2 << 20)) /dev/zero | tr '\0' ' ' >"$d/big.json"
  python3 -c 'print("[" * 10000 + "]" * 10000)' >"$d/deep.json"
  printf '{"id": "bad\xff\xfe", "tasks": []}' >"$d/utf.json"
  jt_file_job zz.json marker
  wait_for 30 jt_tstate_is marker/t running || fail "a valid file among garbage not applied"
  wait_for 30 jt_invalid_listed y.json || fail "FIFO not reported"
  op status >/dev/null || fail "agent down after garbage"
  local n; n="$(op --json ps | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["invalid_files"]))')"
  [ "$n" -ge 300 ] || fail "only $n of 303 bad files reported"
  OUT="$(op --json ps | python3 -c '
import json,sys
p = {x["file"].rsplit("/",1)[1]: x["error"] for x in json.load(sys.stdin)["invalid_files"]}
for k in ("big.json", "deep.json", "utf.json", "dir1.json", "y.json", "empty1.json"): print(k, "=>", p.get(k))')"
  expect_contains "$OUT" "big.json =>" "big file listed"
  expect_not_contains "$OUT" "=> None" "each kind of garbage has an error: $OUT"
  expect_eq "$(jt_running_pid keep/t)" "$pid" "other jobs untouched"
  expect_eq "$(jt_job_ids)" "keep marker" "no job from garbage"
  kill -0 "$(op --json status | json_get pid)" || fail "worker gone"
}

test_jobs_bad_input_through_the_api() {
  jt_start
  jt_job keep "$(jt_sleeper t)" | op run -f - >/dev/null || fail "run keep"
  local pid; pid="$(jt_running_pid keep/t)"
  head -c $((2 << 20)) /dev/zero | tr '\0' ' ' >"$T/big.json"
  expect_exit 2 op run -f "$T/big.json"
  expect_contains "$OUT" "1 MiB" "size limit named"
  OUT="$(head -c $((2 << 20)) /dev/zero | tr '\0' ' ' | op run -f - 2>&1)"; expect_eq "$?" 2 "big stdin exit code"
  expect_contains "$OUT" "1 MiB" "size limit named (stdin)"
  python3 -c 'print("[" * 10000 + "]" * 10000)' >"$T/deep.json"
  expect_exit 2 op run -f "$T/deep.json"
  expect_contains "$OUT" "invalid job spec" "deep nesting refused as a spec problem"
  printf '{"id": "bad\xff\xfe", "tasks": []}' >"$T/utf.json"
  expect_exit 2 op run -f "$T/utf.json"
  expect_contains "$OUT" "UTF-8" "non-UTF-8 named"
  printf 'not json at all' >"$T/nj.json"
  expect_exit 2 op run -f "$T/nj.json"
  expect_contains "$OUT" "invalid JSON" "not JSON"
  : >"$T/empty.json"
  expect_exit 2 op run -f "$T/empty.json"
  op status >/dev/null || fail "agent down after bad input"
  expect_eq "$(jt_running_pid keep/t)" "$pid" "other jobs untouched"
  expect_eq "$(jt_job_ids)" "keep" "no job from bad input"
}

test_jobs_max_jobs() {
  jt_start '"max_jobs": 50'
  local i
  for i in $(seq 1 50); do
    jt_job "j$i" "$(jt_sleeper t)" | op run -f - --detach >/dev/null || fail "job $i refused"
  done
  expect_exit 1 jt_run_doc "$(jt_job j51 "$(jt_sleeper t)")" --detach
  expect_contains "$OUT" "max_jobs" "the refusal names max_jobs"
  expect_contains "$OUT" "j51" "the refusal names the job"
  expect_eq "$(op --json ps | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')" "50" "50 jobs"
  # An update of an existing job is not a new job.
  expect_exit 0 jt_run_doc "$(jt_job j1 "$(jt_sleeper t 601)")" --detach
  op status >/dev/null || fail "agent down"
}
