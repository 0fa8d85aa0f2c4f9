# Plugin discovery and registration through the real agent and a plugin
# built with the plugin library (build/test_plugin).

TEST_PLUGIN="$(dirname "$HELPER")/test_plugin"

# pl_start_plugin TYPE NAME [ARGS...]: starts test_plugin in
# $T/run/plugins (ARGS: its test modes, --reject, --hang, ...); its
# registration statuses go to $T/plugin-NAME.out.
pl_start_plugin() {
  [ -x "$TEST_PLUGIN" ] || fail "$TEST_PLUGIN is missing (make build/test_plugin)"
  "$TEST_PLUGIN" --type "$1" --name "$2" --versions v1 --dir "$T/run/plugins" --socket-file "$T/plugin-$2.sock" "${@:3}" \
    >"$T/plugin-$2.out" 2>&1 &
  echo $! >>"$T/.pids"
  PLUGIN_PID=$!
}
pl_plugins_say() { op plugins | grep -qF "$1"; }
pl_refusals_at_least() { [ "$(grep -c refused "$T/plugin-$1.out")" -ge "$2" ]; }
pl_socket_not_listed() { ! pl_socket_listed "$1"; }
pl_socket_listed() { op --json plugins | python3 -c 'import json,sys; sys.exit(not any(s["path"] == sys.argv[1] for s in json.load(sys.stdin)["sockets"]))' "$1"; }

test_plugins_unknown_type_is_told_why_and_retried() {
  start_agent
  expect_eq "$(stat -c %a "$T/run/plugins")" "700" "plugins dir mode"
  pl_start_plugin NoSuchType demo
  wait_for 10 grep -q "refused: no handler registered for plugin type NoSuchType" "$T/plugin-demo.out" ||
    fail "plugin not told why: $(cat "$T/plugin-demo.out")"
  # Retried with backoff while the socket is there (0.5 s, then 1 s).
  wait_for 10 pl_refusals_at_least demo 2 || fail "refused attempt not retried"
  local sock; sock="$(cat "$T/plugin-demo.sock")"
  expect_eq "$sock" "$T/run/plugins/demo-$PLUGIN_PID.sock" "the library's socket name"
  expect_exit 0 op plugins
  expect_contains "$OUT" "$sock" "plugins lists the socket"
  expect_contains "$OUT" "no handler registered for plugin type NoSuchType" "plugins says why"
  expect_exit 0 op status
  expect_contains "$OUT" "not registered: no handler registered" "status summarises it"
  expect_exit 0 op events
  expect_contains "$OUT" "plugin_failed" "event of the failed attempt"
  # The plugin removes its own socket on SIGTERM; the agent forgets it.
  kill -TERM "$PLUGIN_PID"
  wait_gone "$PLUGIN_PID" 10 || fail "plugin did not stop on SIGTERM"
  [ ! -e "$sock" ] || fail "plugin left its socket behind"
  wait_for 10 pl_socket_not_listed "$sock" || fail "removed socket still listed"
}

test_plugins_socket_of_another_uid_is_refused() {
  [ "$(id -u)" = 0 ] || { echo "skip: needs root to serve a socket as another uid"; return 0; }
  start_agent
  # A socket served by uid 65534 in the plugins dir: refused before any call.
  chmod 0711 "$T"
  install -d -o 65534 -g 65534 "$T/nobody"
  setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)' "$T/nobody/other.sock" &
  echo $! >>"$T/.pids"
  wait_for 10 test -S "$T/nobody/other.sock" || fail "helper socket not made"
  mv "$T/nobody/other.sock" "$T/run/plugins/other.sock"
  wait_for 10 pl_plugins_say "is served by uid 65534" || fail "another uid's socket not refused: $(op plugins)"
  expect_exit 0 op events
  expect_contains "$OUT" "plugin_refused" "refusal event"
}

test_plugins_dir_checked_and_configurable() {
  mkdir -m 0777 "$T/open-plugins"
  write_config "\"plugins_dir\": \"$T/open-plugins\""
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json" --check
  expect_contains "$OUT" "plugins_dir: '$T/open-plugins'" "the unsafe dir is named"
  expect_contains "$OUT" "writable by other users" "and why"
  write_config "\"plugins_dir\": \"$T/run/fifo/p\""
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json" --check
  expect_contains "$OUT" "plugins_dir \"$T/run/fifo/p\" is inside runtime_dir" "fifo dir conflict"
  write_config "\"plugins_dir\": \"$T/my-plugins\""
  start_agent
  expect_eq "$(stat -c %a "$T/my-plugins")" "700" "configured plugins dir made 0700"
  expect_exit 0 op --json plugins
  expect_eq "$(printf '%s' "$OUT" | json_get plugins_dir)" "$T/my-plugins" "plugins dir in the listing"
}

# A task run by an external driver (test_plugin as a TaskDriver): started
# through it with outpost's FIFOs (logs work as for exec), stopped through
# it, and recovered through it after the worker is killed.
test_plugins_task_driver_runs_stops_and_recovers_tasks() {
  jt_start
  pl_start_plugin TaskDriver testdrv
  wait_for 10 grep -q "^registered" "$T/plugin-testdrv.out" || fail "driver not registered: $(op plugins)"
  expect_exit 0 op status
  expect_contains "$OUT" "driver.testdrv on   healthy: Healthy" "the driver in status"
  # Output through the FIFOs outpost made.
  local JT_EXTRA='"driver": "testdrv"'
  jt_job lj "$(jt_task t "$HELPER" lines 3 out)" >"$T/lj.json"
  expect_exit 0 op run -f "$T/lj.json" --detach
  wait_for 10 pl_logs_have lj/t "out3" || fail "the driver's task output did not reach its log: $(op logs lj/t)"
  # A long-running task: stopped through the driver.
  jt_job sj "$(jt_task t "$HELPER" sleep 600)" >"$T/sj.json"
  expect_exit 0 op run -f "$T/sj.json" --detach
  local pid; pid="$(wait_for 10 jt_running_pid sj/t)" || fail "driver task not running"
  [ "$(ps -o ppid= -p "$pid" | tr -d ' ')" = "$PLUGIN_PID" ] || fail "task $pid is not the driver's child ($PLUGIN_PID): $(ps -o pid,ppid,args -p "$pid")"
  # The driver's own events (TaskEvents) reach the task's events.
  wait_for 10 jt_events_contain sj/t "pid $pid" || fail "the driver's event is not in the task's events: $(op events sj/t)"
  # The worker dies: the new one recovers the task through the driver.
  local w; w="$(op status --json | json_get pid)"
  kill -9 "$w"
  wait_for 20 pl_worker_other_than "$w" || fail "no new worker"
  wait_for 10 jt_tstate_is sj/t running || fail "task not recovered: $(op inspect sj)"
  expect_eq "$(jt_running_pid sj/t)" "$pid" "same process after recovery"
  expect_exit 0 op stop sj
  wait_gone "$pid" 10 || fail "driver task $pid survived the stop"
  # The driver's ConfigSchema decides what `config` it takes.
  JT_EXTRA='"driver": "testdrv", "config": {"note": "hi", "bogus": 1}'
  jt_job cj "$(jt_task t "$HELPER" sleep 1)" >"$T/cj.json"
  expect_exit 2 op run -f "$T/cj.json" --detach
  expect_contains "$OUT" 'tasks[0].config.bogus: unknown field for driver testdrv (it takes: note, refuse)' "config checked"
  # A job naming a driver that is not registered is accepted; the CLI
  # says its task waits (a misspelt name shows at once).
  JT_EXTRA='"driver": "nosuch"'
  jt_job nj "$(jt_task t "$HELPER" sleep 1)" >"$T/nj.json"
  expect_exit 0 op run -f "$T/nj.json" --detach
  expect_contains "$OUT" 'task t waits: driver nosuch is not registered; it starts once the driver is available' \
    "the wait is told"
}
pl_unknown_because() {
  local out; out="$(op inspect "$1")" || return 1
  [[ "$out" == *"t                unknown"* && "$out" == *"driver $2 is disconnected"* ]]
}
pl_logs_have() { op logs "$1" 2>/dev/null | grep -qF "$2"; }
pl_worker_other_than() { local p; p="$(op status --json 2>/dev/null | json_get pid)" && [ -n "$p" ] && [ "$p" != "$1" ]; }

# Jobs naming a driver plugin that is not registered yet (from jobs.d and
# through the API: boards start plugins and jobs in any order) are
# accepted; their tasks wait as pending with the reason, and start once the
# driver registers.
test_plugins_jobs_wait_for_their_driver_plugin() {
  jt_start
  local JT_EXTRA='"driver": "latedrv"'
  jt_job dj "$(jt_task t "$HELPER" sleep 600)" >"$T/jobs.d/dj.json"
  jt_job aj "$(jt_task t "$HELPER" sleep 600)" >"$T/aj.json"
  expect_exit 0 op run -f "$T/aj.json" --detach
  expect_contains "$OUT" 'task t waits: driver latedrv is not registered' "run says the task waits"
  wait_for 10 jt_tstate_is dj/t pending || fail "jobs.d job not pending: $(op ps)"
  jt_tstate_is aj/t pending || fail "API job not pending: $(op ps)"
  expect_exit 0 op inspect aj
  expect_contains "$OUT" 'driver latedrv is not registered' "inspect says why"
  jt_events_contain dj/t 'waiting' || fail "no waiting event: $(op events dj/t)"
  pl_start_plugin TaskDriver latedrv
  wait_for 10 jt_tstate_is dj/t running || fail "jobs.d job did not start once its driver registered: $(op ps)"
  wait_for 10 jt_tstate_is aj/t running || fail "API job did not start once its driver registered: $(op ps)"
  local j pid
  for j in dj aj; do
    pid="$(jt_running_pid $j/t)"
    [ "$(ps -o ppid= -p "$pid" | tr -d ' ')" = "$PLUGIN_PID" ] || fail "task $pid of $j is not the driver's child"
    expect_eq "$(jt_tfield $j/t restarts)" 0 "$j: the wait used no restart"
  done
}

# pl_driver_job ID DRIVER: job ID of one long-running task "t" run by DRIVER.
pl_driver_job() {
  local JT_EXTRA="\"driver\": \"$2\""
  jt_job "$1" "$(jt_task t "$HELPER" sleep 600)" >"$T/$1.json"
  op run -f "$T/$1.json" --detach >/dev/null || fail "run $1: $(op run -f "$T/$1.json" --detach 2>&1)"
}
# pl_driver_away GRACE DRIVER JOB: an agent with plugin_grace_period GRACE,
# test_plugin as task driver DRIVER, JOB's task t running on it (its pid in
# PL_TASK_PID), then the driver killed -9.
pl_driver_away() {
  jt_start "\"plugin_grace_period\": \"$1\""
  pl_start_plugin TaskDriver "$2"
  wait_for 10 grep -q "^registered" "$T/plugin-$2.out" || fail "driver not registered: $(op plugins)"
  pl_driver_job "$3" "$2"
  PL_TASK_PID="$(wait_for 10 jt_running_pid "$3/t")" || fail "driver task not running"
  kill -9 "$PLUGIN_PID"
}

# The driver plugin dies: its task shows "unknown" with why during the
# grace period, then is lost (exit status unknown) and its restart policy
# applies.
test_plugins_task_of_a_vanished_driver_is_unknown_then_lost() {
  pl_driver_away 3s gonedrv gj
  local pid="$PL_TASK_PID"
  # (One look at both: under load the 3 s grace period may end between two.)
  wait_for 10 pl_unknown_because gj gonedrv || fail "task not unknown, with why, once its driver went: $(op inspect gj)"
  wait_for 20 jt_events_contain gj/t 'exit status unknown: driver "gonedrv" had no connected instance for 3s' ||
    fail "task not lost after the grace period: $(op events gj/t)"
  kill -9 "$pid" 2>/dev/null
  true
}

# A driver plugin that is away (killed, within its grace period) is not an
# agent that cannot be reached: every command that needs the driver says
# which driver and exits 4 (README, exit codes); the agent answers (no
# "closed the connection"), and exit 3 stays for "no agent on the socket".
test_plugins_unavailable_driver_has_its_own_exit_code() {
  pl_driver_away 120s awaydrv aw
  local pid="$PL_TASK_PID"
  wait_for 10 jt_tstate_is aw/t unknown || fail "task not unknown once its driver went: $(op inspect aw)"
  local cmd
  for cmd in "signal aw/t HUP" "task signal aw.t HUP" "task stats aw.t" "stats aw/t"; do
    # shellcheck disable=SC2086
    expect_exit 4 op $cmd
    expect_contains "$OUT" "driver awaydrv is disconnected" "$cmd: the driver named"
    expect_not_contains "$OUT" "closed the connection" "$cmd: not told as a lost agent"
  done
  # The test driver cannot exec at all: that, not "no agent".
  expect_exit 1 op exec aw/t -- echo hi
  expect_contains "$OUT" "driver awaydrv cannot run commands in tasks" "exec"
  # inspect shows the task, unknown, and why its usage is missing: it did its job.
  expect_exit 0 op inspect aw/t
  expect_not_contains "$OUT" "outpost:" "inspect: nothing on stderr"
  expect_contains "$OUT" "usage:      unavailable: driver awaydrv is disconnected" "inspect's usage line"
  expect_eq "$(op --json inspect aw/t | json_get usage_error)" "driver awaydrv is disconnected" "inspect --json"
  expect_exit 0 op task inspect aw.t
  expect_contains "$OUT" "state:      unknown" "task inspect's state"
  expect_contains "$OUT" "reason:     driver awaydrv is disconnected" "task inspect's reason"
  expect_exit 0 op logs aw/t
  expect_exit 3 "$OUTPOST" --socket "$T/no-agent.sock" signal aw/t HUP
  expect_contains "$OUT" "no agent is running" "no agent is still exit 3"
  kill -9 "$pid" 2>/dev/null
  true
}

# A driver that refuses a start: its reason reaches inspect and the events,
# and the task's restart policy applies to the failed start.
test_plugins_rejected_start_shows_the_drivers_reason() {
  jt_start
  pl_start_plugin TaskDriver rejdrv --reject "no capacity here"
  wait_for 10 grep -q "^registered" "$T/plugin-rejdrv.out" || fail "driver not registered: $(op plugins)"
  local JT_EXTRA='"driver": "rejdrv", "restart": {"policy": "on-failure", "attempts": 1, "delay": "1s", "interval": "1m"}'
  jt_job rj "$(jt_task t "$HELPER" sleep 600)" >"$T/rj.json"
  op run -f "$T/rj.json" --detach >/dev/null 2>&1
  wait_for 10 jt_events_contain rj/t "no capacity here" || fail "the driver's reason is not in the events: $(op events rj/t)"
  wait_for 15 jt_events_contain rj/t "restart limit reached" || fail "the restart policy did not apply: $(op events rj/t)"
  expect_exit 0 op inspect rj
  expect_contains "$OUT" "no capacity here" "inspect shows the driver's reason"
}

# A driver that never answers a call: the call ends at its deadline, and
# the agent answers everything else meanwhile.
test_plugins_hung_driver_call_times_out_without_blocking() {
  jt_start
  pl_start_plugin TaskDriver hangdrv --hang TaskStats
  wait_for 10 grep -q "^registered" "$T/plugin-hangdrv.out" || fail "driver not registered: $(op plugins)"
  local JT_EXTRA='"driver": "hangdrv"'
  jt_job hj "$(jt_task t "$HELPER" sleep 600)" >"$T/hj.json"
  expect_exit 0 op run -f "$T/hj.json" --detach
  wait_for 10 jt_running_pid hj/t >/dev/null || fail "driver task not running"
  op stats hj/t >"$T/stats.out" 2>&1 &
  local stats=$!
  wait_for 10 grep -q "^hanging TaskStats" "$T/plugin-hangdrv.out" || fail "the stats call did not reach the driver"
  local t0; t0="$(date +%s%N)"
  expect_exit 0 op status
  expect_exit 0 op ps
  local ms=$((($(date +%s%N) - t0) / 1000000))
  [ "$ms" -lt 3000 ] || fail "status and ps took ${ms} ms while a driver call hung"
  kill -0 "$stats" 2>/dev/null || fail "stats returned before the hung call's deadline: $(cat "$T/stats.out")"
  wait "$stats"  # stats shows dashes and says why; its exit status is not the point
  grep -qi "deadline\|timed out\|timeout" "$T/stats.out" || fail "stats did not say it timed out: $(cat "$T/stats.out")"
  expect_exit 0 op stop hj
}

# `outpost plugins check`: the conformance checks pass for exec, and for
# the test plugin's driver (skipping what its Capabilities rule out); an
# unknown driver is named with the known ones.
test_plugins_check_exec_and_plugin_driver() {
  jt_start
  op plugins check exec >"$T/chk-exec.out" 2>&1
  local c
  for c in start-wait stop-sigint stop-sigkill stop-timeout-0 signal recover-idempotent destroy-running \
    bad-command bad-user stats inspect exec; do
    grep -q "^PASS $c " "$T/chk-exec.out" || fail "exec: check $c did not pass: $(cat "$T/chk-exec.out")"
  done
  # destroy-kills-all needs the task's cgroup: it passes where the agent has
  # cgroup v2 (the VM test vm/conformance_exec) and is skipped where it has
  # none (always here: the test config's cgroup root is outside cgroup2).
  op status >"$T/chk-status.out" 2>&1
  if grep -q "cgroup2 *off" "$T/chk-status.out"; then
    grep -q "^SKIP destroy-kills-all: no cgroup v2 on this node" "$T/chk-exec.out" ||
      fail "exec: destroy-kills-all not skipped without cgroup v2: $(cat "$T/chk-exec.out")"
  else
    grep -q "^PASS destroy-kills-all " "$T/chk-exec.out" || fail "exec: destroy-kills-all did not pass: $(cat "$T/chk-exec.out")"
  fi
  [ "$(grep -c '^\(PASS\|SKIP\|FAIL\) ' "$T/chk-exec.out")" = 13 ] || fail "exec: not 13 checks: $(cat "$T/chk-exec.out")"
  grep -q "^driver exec: " "$T/chk-exec.out" || fail "no summary: $(cat "$T/chk-exec.out")"
  expect_exit 1 op plugins check nosuch
  expect_contains "$OUT" 'nosuch' "the unknown driver named"
  pl_start_plugin TaskDriver chkdrv
  wait_for 10 grep -q "^registered" "$T/plugin-chkdrv.out" || fail "driver not registered: $(op plugins)"
  op plugins check chkdrv >"$T/chk.out" 2>&1
  cat "$T/chk.out"
  expect_contains "$(cat "$T/chk.out")" "SKIP exec: driver chkdrv cannot exec in tasks" "exec skipped per capability"
  grep -q "^driver chkdrv: " "$T/chk.out" || fail "no summary: $(cat "$T/chk.out")"
  # The example driver (examples/plugin-driver, the library's defaults):
  # every check it does not rule out passes, stops by SIGTERM included.
  local ex; ex="$(dirname "$HELPER")/example_driver"
  [ -x "$ex" ] || fail "$ex is missing (make build/example_driver)"
  OUTPOST_TASK_DIR="$T/extasks" "$ex" "$T/run/plugins" >"$T/example.out" 2>&1 &
  echo $! >>"$T/.pids"
  wait_for 10 pl_plugins_say "example" || fail "the example driver did not register: $(op plugins; cat "$T/example.out")"
  expect_exit 0 op plugins check example
  expect_not_contains "$OUT" "FAIL " "the example driver's checks"
  expect_contains "$OUT" "PASS stop-sigint " "the example driver's checks"
  expect_contains "$OUT" "PASS start-wait " "the example driver's checks"
}

# A driver that refuses a task's config (InvalidArgument) fails `outpost
# run` at once: retrying the same config cannot heal it.
test_plugins_run_fails_at_once_when_the_driver_refuses_the_config() {
  jt_start
  pl_start_plugin TaskDriver cfgdrv
  wait_for 10 grep -q "^registered" "$T/plugin-cfgdrv.out" || fail "driver not registered: $(op plugins)"
  local JT_EXTRA='"driver": "cfgdrv", "config": {"refuse": "mode 7 is not supported"}'
  jt_job rc "$(jt_task t "$HELPER" sleep 600)" >"$T/rc.json"
  local t0=$EPOCHREALTIME
  expect_exit 1 op run -f "$T/rc.json" --timeout 120s
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a < 60) }' || fail "run waited for its timeout: $OUT"
  expect_contains "$OUT" "rc/t: start failed: driver cfgdrv: StartTask: config.refuse: mode 7 is not supported" \
    "the driver's refusal, the task named once"
  expect_contains "$OUT" "retrying cannot fix this" "run says why it did not wait"
  expect_not_contains "$OUT" "is not running after" "not the timeout"
  # The same config without the refusal runs.
  jt_job ok "$(JT_EXTRA='"driver": "cfgdrv", "config": {"note": "fine"}' jt_task t "$HELPER" sleep 600)" >"$T/ok.json"
  expect_exit 0 op run -f "$T/ok.json" --timeout 60s
}

# An exec health check of a task of a driver plugin runs through the
# driver's ExecTask, in the task's context (its workdir), and turns the
# task unhealthy and healthy as for the exec driver.
test_plugins_exec_check_runs_through_the_plugin_driver() {
  jt_start
  pl_start_plugin TaskDriver ckdrv --exec
  wait_for 10 grep -q "^registered" "$T/plugin-ckdrv.out" || fail "driver not registered: $(op plugins)"
  local check="{\"type\": \"exec\", \"command\": [\"/bin/sh\", \"-c\", \"test -f $T/ready && echo ready in \$PWD || { echo not ready; exit 3; }\"], \"interval\": \"200ms\", \"failure_threshold\": 2}"
  mkdir "$T/wd"
  jt_job ck "$(JT_EXTRA="\"driver\": \"ckdrv\", \"workdir\": \"$T/wd\", \"checks\": [$check]" jt_task t "$HELPER" sleep 600)" |
    op run -f - --detach >/dev/null || fail "submit ck"
  wait_for 20 ck_health_is ck/t unhealthy >/dev/null || fail "not unhealthy: $(op inspect ck/t)"
  expect_eq "$(ck_check_field ck/t last_output)" "exit code 3: not ready" "the check's output"
  grep -q "^exec ck.t /bin/sh$" "$T/plugin-ckdrv.out" || fail "the driver did not run the check: $(cat "$T/plugin-ckdrv.out")"
  touch "$T/ready"
  wait_for 20 ck_health_is ck/t healthy >/dev/null || fail "not healthy: $(op inspect ck/t)"
  expect_eq "$(ck_check_field ck/t last_output)" "ready in $T/wd" "the check ran in the task's workdir"
  wait_for 5 ck_event ck healthy "check exec /bin/sh: ready in $T/wd" >/dev/null || fail "no healthy event: $(op events ck)"
}
