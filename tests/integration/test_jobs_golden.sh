# Golden outputs of the job commands (human and --json); see golden.sh for
# the normalisation and OUTPOST_UPDATE_GOLDEN=1. Each scenario is built so
# its output is deterministic once pids, times and sizes are placeholders.
# shellcheck source=golden.sh
. "$(dirname "${BASH_SOURCE[0]}")/golden.sh"

test_golden_help() {
  local c
  for c in run ps inspect start stop rm restart logs exec signal events stats status; do
    golden "help_$c" txt op help "$c"
  done
  golden help txt op help
}

test_golden_job_commands() {
  jt_start
  # A job whose output is fixed: "web" prints one line then sleeps.
  jt_job web "$(jt_task api /bin/sh -c 'echo ready; exec sleep 600')" "$(jt_sleeper db)" >"$T/web.json"
  golden run txt op run -f "$T/web.json"
  golden run_unchanged txt op run -f "$T/web.json"
  golden run_unchanged json op --json run -f "$T/web.json"
  wait_for 5 sh -c "'$OUTPOST' --socket '$SOCK' logs web/api | grep -q ready" || fail "no output"
  golden ps txt op ps
  golden ps json op --json ps
  golden inspect_job txt op inspect web
  golden inspect_job json op --json inspect web
  golden inspect_task txt op inspect web/api
  golden inspect_task json op --json inspect web/api
  # The raw text, which the golden's normalising parse does not show
  # (docs/cli-json.md): slashes as they are, null for what is not set.
  expect_contains "$GOLDEN_OUT" '"command": "/bin/sh"' "inspect --json writes slashes unescaped"
  expect_not_contains "$GOLDEN_OUT" '\/' "inspect --json escapes no slash"
  expect_contains "$GOLDEN_OUT" '"completed_at": null' "inspect --json: null for an unset time"
  golden logs txt op logs web/api
  golden exec txt op exec web/api -- /bin/sh -c 'echo out; exit 3'
  golden exec json op --json exec web/api -- /bin/sh -c 'echo out; exit 3'
  golden signal txt op signal web/db HUP
  wait_for 10 jt_started_again web/db "$(op events web/db | grep -m1 -o 'pid [0-9]*' | cut -d' ' -f2)" \
    || fail "db not restarted after HUP"
  wait_for 10 jt_status_is web running || fail "web not running again"
  # The restarted db's healthy event comes min_healthy_time after its start:
  # wait for it, so its place in the events below is fixed.
  wait_for 10 jt_healthy_is web/db 2 || fail "db not healthy again: $(op events web/db)"
  golden stats txt op stats web/db
  golden stats json op --json stats web/db
  # Seconds of CPU as the shortest text that reads back: never 17 digits.
  if grep -Eq '[0-9]\.[0-9]{16,}' <<<"$GOLDEN_OUT"; then fail "stats --json prints a number inexactly: $GOLDEN_OUT"; fi
  local api; api="$(jt_running_pid web/api)"
  golden restart_task txt op restart web/api
  wait_for 10 jt_started_again web/api "$api" || fail "api not restarted"
  wait_for 10 jt_healthy_is web/api 2 || fail "api not healthy again: $(op events web/api)"
  # Before the stop: the order in which a job's tasks finish stopping is not fixed.
  golden events txt op events web
  golden events json op --json events web
  golden stop txt op stop web --timeout 2s
  golden stop json op --json stop web --timeout 2s
  golden events_task txt op events web/db
  golden rm txt op rm web
  jt_job web2 "$(jt_sleeper t)" | op run -f - --detach >/dev/null || fail "run web2"
  golden start_running txt op start web2
  golden restart json op --json restart web2
  golden rm json op --json rm web2
}

test_golden_errors() {
  jt_start
  printf '{"id": "web", "tasks": [{"name": "api", "command": 5, "args": "x"}, {"name": "api"}], "bogus": 1}' >"$T/bad.json"
  golden run_invalid txt op run -f "$T/bad.json"
  golden run_malformed txt op run -f - <<<'{"id": '
  golden run_no_file txt op run
  golden inspect_unknown txt op inspect nope
  jt_job w "$(jt_sleeper a)" | op run -f - --detach >/dev/null || fail "run w"
  golden inspect_unknown_task txt op inspect w/nope
  golden stop_task txt op stop w/a
  golden rm_unknown txt op rm nope
  golden exec_no_cmd txt op exec w/a
  golden signal_bad txt op signal w/a NOPE
  golden logs_unknown txt op logs w/nope
  golden events_unknown txt op events nope/x
  golden stats_unknown txt op stats nope
  jt_job bad "$(JT_EXTRA='"restart": {"policy": "on-failure", "attempts": 1, "delay": "1s"}' jt_task t "$HELPER" exit 3)" >"$T/fail.json"
  golden run_failing txt op run -f "$T/fail.json"
  golden events_failing txt op events bad
  jt_job f "$(jt_sleeper t)" >"$T/jobs.d/f.json"
  wait_for 10 jt_tstate_is f/t running || fail "file job"
  golden rm_file_job txt op rm f
  golden run_file_job txt op run -f "$T/jobs.d/f.json"
  printf '{"id": "g", "tasks": [{"name": "t"}]}' >"$T/jobs.d/g.json"
  wait_for 10 jt_invalid_listed g.json || fail "invalid file not listed"
  # Whether a task is healthy yet shows in --json: wait until both are.
  wait_for 10 jt_healthy_is f/t 1 || fail "f/t not healthy"
  wait_for 10 jt_healthy_is w/a 1 || fail "w/a not healthy"
  golden ps_invalid_files txt op ps
  golden ps_invalid_files json op --json ps
  golden status txt op status
  golden status json op --json status
}

test_golden_stats_follow() {
  jt_start
  jt_job s "$(jt_sleeper t)" | op run -f - >/dev/null || fail "run s"
  OUT="$(timeout 2 "$OUTPOST" --socket "$SOCK" stats -f --interval 300ms s)"
  # Every sample line has the same shape: TIME JOB/TASK pid= cpu= rss=.
  local bad; bad="$(printf '%s\n' "$OUT" | grep -cvE '^[0-9TZ:.-]+ s/t pid=[0-9]+ cpu=[0-9.]+% rss=[0-9]+$')"
  expect_eq "$bad" "0" "stats -f line format: $OUT"
  [ "$(printf '%s\n' "$OUT" | wc -l)" -ge 2 ] || fail "fewer than 2 samples: $OUT"
}
