# Health checks with the real agent (docs/supervision.md "Health checks"):
# http against busybox httpd, tcp against the helper's server, exec checks
# through the driver, on_unhealthy "restart", `outpost run` waiting for the
# checks, and a check inside a job's own network namespace. Helpers are
# prefixed ck_ (every test file is sourced into one shell).

# ck_port: a free TCP port on 127.0.0.1.
ck_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# ck_task NAME CHECKS_JSON CMD [ARGS...]: a task with checks.
ck_task() {
  local name="$1" checks="$2"; shift 2
  JT_EXTRA="\"checks\": [$checks]${CK_EXTRA:+, $CK_EXTRA}" jt_task "$name" "$@"
}
ck_health_is() { [ "$(jt_tfield "$1" health)" = "$2" ]; }
# ck_check_field JOB/TASK FIELD: a field of the task's first check.
ck_check_field() { op --json inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["checks"][0][sys.argv[1]])' "$2"; }
ck_runs_at_least() { [ "$(ck_check_field "$1" runs)" -ge "$2" ]; }
# ck_event JOB TYPE MESSAGE: an event of that type with that message.
ck_event() { op events "$1" 2>/dev/null | grep -F " $2 " | grep -qF -- "$3"; }
ck_httpd() {
  command -v busybox >/dev/null && busybox httpd --help 2>&1 | grep -q -- '-p' || return 1
}

test_checks_http_turns_unhealthy_and_healthy_again() {
  ck_httpd || { echo "skip: busybox httpd is not available"; return 0; }
  jt_start
  local port; port="$(ck_port)"
  mkdir -p "$T/www" && echo ok >"$T/www/healthz"
  local check="{\"type\": \"http\", \"port\": $port, \"path\": \"/healthz\", \"interval\": \"200ms\", \"failure_threshold\": 2}"
  jt_job web "$(ck_task httpd "$check" "$(command -v busybox)" httpd -f -p "127.0.0.1:$port" -h "$T/www")" >"$T/web.json"
  expect_exit 0 op run -f "$T/web.json" --timeout 30s
  expect_contains "$OUT" "job web is running" "run returns once the check passes"
  expect_eq "$(jt_tfield web/httpd health)" "healthy" "health after run"
  expect_eq "$(jt_tfield web/httpd healthy)" "True" "healthy after run"
  expect_exit 0 op ps
  expect_contains "$OUT" "HEALTH" "ps has a HEALTH column"
  expect_eq "$(printf '%s\n' "$OUT" | awk '$1 == "web" {print $4}')" "healthy" "ps HEALTH of web"
  expect_exit 0 op inspect web/httpd
  expect_contains "$OUT" "health:     healthy" "inspect shows the health"
  expect_contains "$OUT" "check http /healthz" "inspect names the check"
  expect_contains "$OUT" "passing  ok at" "inspect shows the last result"
  expect_contains "$OUT" ": 200 OK" "inspect shows the output"
  rm "$T/www/healthz"
  wait_for 20 ck_health_is web/httpd unhealthy >/dev/null || fail "not unhealthy: $(op inspect web/httpd)"
  wait_for 5 ck_event web unhealthy "check http /healthz: 404 Not Found (2 of 2)" >/dev/null ||
    fail "no unhealthy event: $(op events web)"
  expect_eq "$(op ps | awk '$1 == "web" {print $4}')" "unhealthy" "ps HEALTH when failing"
  expect_eq "$(jt_tfield web/httpd restarts)" "0" "on_unhealthy none restarts nothing"
  echo ok >"$T/www/healthz"
  wait_for 20 ck_health_is web/httpd healthy >/dev/null || fail "not healthy again: $(op inspect web/httpd)"
  wait_for 5 jt_healthy_is web/httpd 2 >/dev/null || fail "no second healthy event: $(op events web)"
  expect_exit 0 op --json inspect web/httpd
  expect_contains "$OUT" '"status": "passing"' "json check status"
  expect_contains "$OUT" '"health": "healthy"' "json health"
}

test_checks_tcp_passes_on_a_listening_port_and_fails_on_a_closed_one() {
  jt_start
  local port closed; port="$(ck_port)"; closed="$(ck_port)"
  local good="{\"type\": \"tcp\", \"port\": $port, \"interval\": \"200ms\"}"
  local bad="{\"type\": \"tcp\", \"port\": $closed, \"interval\": \"200ms\", \"failure_threshold\": 2}"
  jt_run_doc "$(jt_job db "$(ck_task srv "$good" "$HELPER" serve tcp "$port")")" --timeout 30s >/dev/null ||
    fail "run with a tcp check: $(op inspect db/srv)"
  expect_eq "$(ck_check_field db/srv last_output)" "connected" "tcp output"
  jt_run_doc "$(jt_job nope "$(ck_task s "$bad" "$HELPER" sleep 600)")" --detach >/dev/null || fail "run --detach"
  wait_for 20 ck_health_is nope/s unhealthy >/dev/null || fail "not unhealthy: $(op inspect nope/s)"
  expect_eq "$(ck_check_field nope/s last_output)" "connect: Connection refused" "refused output"
  expect_eq "$(jt_tfield nope/s state)" "running" "still running with on_unhealthy none"
  expect_eq "$(jt_jfield db status)" "running" "job status"
  # A task without checks has no health.
  jt_run_doc "$(jt_job plain "$(jt_sleeper s)")" >/dev/null || fail "run plain"
  expect_eq "$(op ps | awk '$1 == "plain" {print $4}')" "-" "ps HEALTH without checks"
  expect_eq "$(op --json inspect plain/s | python3 -c 'import json, sys; print(repr(json.load(sys.stdin)["health"]))')" \
    "None" "json health without checks is null"
}

test_checks_exec_unhealthy_then_healthy_through_the_driver() {
  jt_start
  local check="{\"type\": \"exec\", \"command\": [\"/bin/sh\", \"-c\", \"test -f $T/ready && echo ready || { echo not ready; exit 3; }\"], \"interval\": \"200ms\", \"failure_threshold\": 2}"
  jt_run_doc "$(jt_job ex "$(ck_task t "$check" "$HELPER" sleep 600)")" --detach >/dev/null || fail "run --detach"
  wait_for 20 ck_health_is ex/t unhealthy >/dev/null || fail "not unhealthy: $(op inspect ex/t)"
  expect_eq "$(ck_check_field ex/t last_output)" "exit code 3: not ready" "exec output"
  wait_for 5 ck_event ex unhealthy "check exec /bin/sh: exit code 3: not ready (2 of 2)" >/dev/null ||
    fail "no unhealthy event: $(op events ex)"
  touch "$T/ready"
  wait_for 20 ck_health_is ex/t healthy >/dev/null || fail "not healthy: $(op inspect ex/t)"
  wait_for 5 ck_event ex healthy "check exec /bin/sh: ready" >/dev/null || fail "no healthy event: $(op events ex)"
}

test_checks_on_unhealthy_restart_restarts_the_task_and_counts_it() {
  jt_start
  local check="{\"type\": \"exec\", \"command\": [\"/bin/sh\", \"-c\", \"test -f $T/ready\"], \"interval\": \"200ms\", \"failure_threshold\": 2, \"on_unhealthy\": \"restart\"}"
  CK_EXTRA='"restart": {"policy": "always", "delay": "0s"}' \
    jt_run_doc "$(jt_job rs "$(ck_task t "$check" "$HELPER" sleep 600)")" --detach >/dev/null || fail "run --detach"
  local pid; pid="$(wait_for 10 jt_running_pid rs/t)" || fail "not running"
  wait_for 20 jt_restarts_at_least rs/t 1 >/dev/null || fail "not restarted: $(op events rs)"
  wait_for 10 proc_gone "$pid" >/dev/null || fail "the unhealthy instance still runs"
  wait_for 5 jt_events_contain rs "unhealthy: check exec /bin/sh: exit code 1 (2 of 2); killed by SIGTERM" >/dev/null ||
    fail "the restart does not say why: $(op events rs)"
  touch "$T/ready"
  wait_for 20 ck_health_is rs/t healthy >/dev/null || fail "not healthy after the restart: $(op inspect rs/t)"
  local n; n="$(jt_tfield rs/t restarts)"
  expect_contains "$(op inspect rs/t)" "last exit:  unhealthy: check exec /bin/sh" "inspect tells why it was restarted"
  wait_for 5 ck_runs_at_least rs/t 3 >/dev/null || fail "checks stopped running"
  expect_eq "$(jt_tfield rs/t restarts)" "$n" "no restart while healthy"
}

test_checks_run_waits_until_the_checks_pass() {
  jt_start
  local check="{\"type\": \"exec\", \"command\": [\"/bin/sh\", \"-c\", \"test -f $T/ready\"], \"interval\": \"200ms\", \"failure_threshold\": 100}"
  jt_job w "$(ck_task t "$check" "$HELPER" sleep 600)" "$(jt_sleeper after)" >"$T/w.json"
  # The second task is a poststart one: it waits for the main task's checks.
  python3 - "$T/w.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["tasks"][1]["lifecycle"] = {"hook": "poststart", "sidecar": True}
json.dump(d, open(sys.argv[1], "w"))
PY
  op run -f "$T/w.json" --timeout 60s >"$T/run.out" 2>&1 &
  local run=$!
  echo "$run" >>"$T/.pids"
  wait_for 10 jt_tstate_is w/t running >/dev/null || fail "not running: $(cat "$T/run.out")"
  wait_for 10 ck_runs_at_least w/t 3 >/dev/null || fail "the check does not run"
  kill -0 "$run" 2>/dev/null || fail "run returned before the check passed: $(cat "$T/run.out")"
  expect_eq "$(jt_tfield w/t health)" "starting" "health while the check has not passed"
  expect_eq "$(jt_tfield w/after state)" "pending" "poststart waits for the main task's checks"
  touch "$T/ready"
  wait "$run" || fail "run failed: $(cat "$T/run.out")"
  expect_contains "$(cat "$T/run.out")" "job w is running" "run says running"
  expect_eq "$(jt_tfield w/t healthy)" "True" "healthy when run returned"
  wait_for 10 jt_tstate_is w/after running >/dev/null || fail "poststart did not start"
}

test_checks_http_inside_the_jobs_network_namespace() {
  if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! unshare -n true 2>/dev/null; then
    echo "skip: network namespaces cannot be made here"; return 0
  fi
  ck_httpd || { echo "skip: busybox httpd is not available"; return 0; }
  nt_node
  mkdir -p "$T/www" && echo ok >"$T/www/healthz"
  # Port 7000 on the namespace's loopback: nothing on the node answers it.
  local check='{"type": "http", "port": 7000, "path": "/healthz", "interval": "200ms"}'
  jt_run_doc "$(nt_job lo '{"mode": "none"}' "$(ck_task h "$check" "$(command -v busybox)" httpd -f -p 127.0.0.1:7000 -h "$T/www")")" \
    --timeout 30s >/dev/null || fail "run: $(op inspect lo/h)"
  expect_eq "$(jt_tfield lo/h health)" "healthy" "healthy inside the namespace"
  expect_eq "$(ck_check_field lo/h last_output)" "200 OK" "the check reached the task's server"
  nsx "$HELPER" connect tcp 127.0.0.1 7000 1000 >/dev/null 2>&1 && fail "port 7000 answers on the node too: the test proves nothing"
  op rm lo >/dev/null || fail "rm"
}
