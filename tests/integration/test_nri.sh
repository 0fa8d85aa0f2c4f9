# NRI (docs/nri.md): plugins built with the C++ NRI plugin library
# (build/test_nri_plugin, tests/helpers/nri/) as external plugins on the
# agent's socket and as pre-installed plugins it launches; the events of a
# job's life in order, adjustments applied to the task, conflicts,
# validators, timeouts with both fail policies, required plugins, crashes
# and restarts, unsolicited updates and evictions, `outpost nri`.
# Helpers are prefixed nr_ (every test file is sourced into one shell).

TEST_NRI="$(dirname "$HELPER")/test_nri_plugin"

# nr_start [EXTRA_NRI_MEMBERS] [EXTRA_CONFIG_MEMBERS]: an agent with NRI on
# a socket under $T, the plugin dir $T/nri-plugins.
nr_start() {
  [ -x "$TEST_NRI" ] || fail "$TEST_NRI is missing (make nri-plugins)"
  mkdir -p "$T/jobs.d" "$T/nri-plugins" "$T/nri-conf"
  write_config "\"jobs_dir\": \"$T/jobs.d\", \"nri\": {\"socket\": \"$T/nri/nri.sock\", \"plugin_dir\": \"$T/nri-plugins\", \"plugin_config_dir\": \"$T/nri-conf\"${1:+, $1}}${2:+, $2}"
  start_agent
}
# nr_plugin IDX NAME [FLAGS...]: an external test plugin logging to
# $T/NAME.log, in the background.
nr_plugin() {
  local idx="$1" name="$2"; shift 2
  "$TEST_NRI" -idx "$idx" -name "$name" -socket-path "$T/nri/nri.sock" -log "$T/$name.log" "$@" \
    >>"$T/$name.out" 2>&1 &
  echo $! >>"$T/.pids"
  echo $!
}
# nr_state NAME: the state `outpost nri` shows for plugin NAME.
nr_state() {
  op --json nri | python3 -c 'import json,sys
for p in json.load(sys.stdin)["plugins"]:
    if p["name"] == sys.argv[1] and p["state"] != "closed": print(p["state"]); break
else: sys.exit(1)' "$1"
}
nr_ready() { [ "$(nr_state "$1")" = ready ]; }
nr_field() {  # NAME FIELD: a field of plugin NAME in `outpost --json nri` (the last listed)
  op --json nri | python3 -c 'import json,sys
ps=[p for p in json.load(sys.stdin)["plugins"] if p["name"] == sys.argv[1]]
v = ps[-1][sys.argv[2]] if ps else ""
print("" if v is None else v)' "$1" "$2"
}
# nr_events NAME: the event names plugin NAME logged, one line.
nr_events() { [ -f "$T/$1.log" ] && awk '{print $1}' "$T/$1.log" | tr '\n' ' ' | sed 's/ $//'; }
nr_logged() { [ -f "$T/$1.log" ] && grep -q -- "$2" "$T/$1.log"; }
nr_job() {  # ID: a job with one sleeper task "t"
  printf '{"id": "%s", "tasks": [{"name": "t", "command": "%s", "args": ["sleep", "600"]}]}\n' "$1" "$HELPER"
}
nr_pid() { local p; p="$(op --json inspect "$1" | json_get pid)" && [ -n "$p" ] && [ "$p" != 0 ] && echo "$p"; }
nr_env_of() { tr '\0' '\n' <"/proc/$1/environ"; }

test_nri_external_plugin_sees_every_event_of_a_jobs_life_in_order() {
  nr_start
  nr_plugin 10 logger -events all >/dev/null
  wait_for 10 nr_ready logger || fail "plugin not ready: $(op nri)"
  expect_eq "$(nr_field logger source)" external "source"
  expect_eq "$(nr_field logger index)" 10 "index"
  nr_job nj >"$T/nj.json"
  expect_exit 0 op run -f "$T/nj.json"
  wait_for 10 nr_pid nj/t >/dev/null || fail "task not running"
  wait_for 10 nr_logged logger PostStartContainer || fail "no PostStartContainer: $(nr_events logger)"
  expect_exit 0 op rm nj
  wait_for 10 nr_logged logger RemovePodSandbox || fail "no RemovePodSandbox: $(nr_events logger)"
  expect_eq "$(nr_events logger)" \
    "Configure Synchronize RunPodSandbox CreateContainer ValidateContainerAdjustment PostCreateContainer StartContainer PostStartContainer StopContainer StopPodSandbox RemoveContainer RemovePodSandbox" \
    "events in order"
  expect_contains "$(grep '^CreateContainer' "$T/logger.log")" " t " "CreateContainer names the task"
}

test_nri_adjustments_are_applied_to_the_task() {
  nr_start
  nr_plugin 10 adj -events CreateContainer -adjust-env NRI_A=one -adjust-annotation nri.example/k=v \
    -adjust-rlimit RLIMIT_NOFILE=1000:2000 -adjust-args "$HELPER,sleep,601" >/dev/null
  nr_plugin 20 seen -events all >/dev/null
  wait_for 10 nr_ready adj || fail "adj not ready"
  wait_for 10 nr_ready seen || fail "seen not ready"
  nr_job aj >"$T/aj.json"
  expect_exit 0 op run -f "$T/aj.json"
  local pid
  pid="$(wait_for 10 nr_pid aj/t)" || fail "task not running"
  expect_contains "$(nr_env_of "$pid")" "NRI_A=one" "env from the plugin"
  expect_eq "$(tr '\0' ' ' <"/proc/$pid/cmdline")" "$HELPER sleep 601 " "args from the plugin"
  expect_contains "$(grep 'Max open files' "/proc/$pid/limits")" "1000                 2000" "rlimit from the plugin"
  # The next plugin saw the request as the first one left it.
  expect_contains "$(grep '^CreateContainer' "$T/seen.log")" "NRI_A=one" "plugin 20 saw plugin 10's env"
  expect_contains "$(grep '^CreateContainer' "$T/seen.log")" "nri.example/k=v" "plugin 20 saw the annotation"
  local nri
  nri="$(op --json inspect aj/t | json_get task.nri)"
  expect_contains "$nri" "10-adj: adjusted" "inspect reports what plugin 10 did"
  expect_contains "$nri" "20-seen: no change" "inspect reports plugin 20"
  wait_for 10 jt_events_contain aj/t "10-adj: adjusted" || fail "no nri event: $(op events aj/t)"
}

test_nri_conflicting_plugins_fail_the_start_with_upstreams_message() {
  nr_start
  nr_plugin 10 a -events CreateContainer -adjust-env SAME=a >/dev/null
  nr_plugin 20 b -events CreateContainer -adjust-env SAME=b >/dev/null
  wait_for 10 nr_ready a || fail "a not ready"
  wait_for 10 nr_ready b || fail "b not ready"
  printf '{"id": "cj", "tasks": [{"name": "t", "command": "%s", "args": ["sleep", "600"], "restart": {"policy": "never"}}]}\n' \
    "$HELPER" >"$T/cj.json"
  op run -f "$T/cj.json" --detach >/dev/null 2>&1
  wait_for 10 jt_events_contain cj/t 'plugins "20-b" and "10-a" both tried to set Env SAME' \
    || fail "no conflict error: $(op events cj/t)"
}

test_nri_validator_rejects_the_adjustment() {
  nr_start
  nr_plugin 10 a -events CreateContainer -adjust-env X=1 >/dev/null
  nr_plugin 90 v -reject "no env please" >/dev/null
  wait_for 10 nr_ready a || fail "a not ready"
  wait_for 10 nr_ready v || fail "v not ready"
  printf '{"id": "vj", "tasks": [{"name": "t", "command": "%s", "args": ["sleep", "600"], "restart": {"policy": "never"}}]}\n' \
    "$HELPER" >"$T/vj.json"
  op run -f "$T/vj.json" --detach >/dev/null 2>&1
  wait_for 10 jt_events_contain vj/t 'validator "90-v" rejected container adjustment, reason: no env please' \
    || fail "no rejection: $(op events vj/t)"
  nr_logged v ValidateContainerAdjustment || fail "validator not called"
}

test_nri_bad_registration_is_refused_with_upstreams_message() {
  nr_start
  # A raw client: the plugin library itself refuses such names before it
  # would register.
  local raw
  raw="$here/nri_raw_client.py"
  expect_eq "$(python3 "$raw" "$T/nri/nri.sock" short 1)" 'error 2: invalid plugin index "1", must be 2 digits' "index"
  expect_eq "$(python3 "$raw" "$T/nri/nri.sock" 'bad/name' 10)" \
    "error 2: invalid plugin name \"bad/name\": contains invalid character '/'" "name"
  expect_eq "$(python3 "$raw" "$T/nri/nri.sock" rawok 10)" ok "a good registration"
  nr_state short >/dev/null && fail "a badly indexed plugin is listed as connected"
  return 0
}

test_nri_plugin_timeout_closes_it_and_the_task_starts_with_fail_policy_ignore() {
  nr_start '"request_timeout": "500ms"'
  nr_plugin 10 slow -events CreateContainer -hang-on CreateContainer >/dev/null
  wait_for 10 nr_ready slow || fail "slow not ready"
  nr_job tj >"$T/tj.json"
  expect_exit 0 op run -f "$T/tj.json"
  wait_for 10 nr_pid tj/t >/dev/null || fail "task did not start"
  expect_contains "$(op --json inspect tj/t | json_get task.nri)" "10-slow: skipped: closed: CreateContainer timed out after 500 ms" \
    "inspect says the plugin was skipped and why"
  nr_ready slow && fail "the plugin that timed out is still ready"
  return 0
}

test_nri_plugin_timeout_fails_the_start_with_fail_policy_fail() {
  nr_start '"request_timeout": "500ms", "plugins": {"slow": {"fail_policy": "fail"}}'
  nr_plugin 10 slow -events CreateContainer -hang-on CreateContainer >/dev/null
  wait_for 10 nr_ready slow || fail "slow not ready"
  printf '{"id": "fj", "tasks": [{"name": "t", "command": "%s", "args": ["sleep", "600"], "restart": {"policy": "never"}}]}\n' \
    "$HELPER" >"$T/fj.json"
  op run -f "$T/fj.json" --detach >/dev/null 2>&1
  wait_for 10 jt_events_contain fj/t 'NRI plugin 10-slow (fail_policy "fail")' || fail "start did not fail: $(op events fj/t)"
}

test_nri_required_plugin_holds_the_start_until_it_registers() {
  nr_start '"required_plugins": ["gate"]'
  nr_job rj >"$T/rj.json"
  op run -f "$T/rj.json" --detach >/dev/null 2>&1
  wait_for 10 jt_events_contain rj/t "waiting for required NRI plugin(s): gate" || fail "no waiting event: $(op events rj/t)"
  nr_pid rj/t >/dev/null && fail "task started without its required plugin"
  expect_contains "$(op nri)" "required, not ready (tasks wait): gate" "outpost nri names the missing plugin"
  nr_plugin 10 gate -events CreateContainer >/dev/null
  wait_for 15 nr_pid rj/t >/dev/null || fail "task did not start once the plugin registered: $(op events rj/t)"
}

test_nri_preinstalled_plugin_is_launched_with_fd3_and_restarted_when_it_crashes() {
  mkdir -p "$T/nri-plugins" "$T/nri-conf"
  cat >"$T/nri-plugins/30-pre" <<SH
#!/bin/sh
env >"$T/pre.env"
echo "pre starting" >&2
exec "$TEST_NRI" -events all -log "$T/pre.log" -crash-on StartContainer
SH
  chmod +x "$T/nri-plugins/30-pre"
  printf 'not launched\n' >"$T/nri-plugins/badname"
  chmod +x "$T/nri-plugins/badname"
  echo "some: config" >"$T/nri-conf/pre.conf"
  nr_start
  wait_for 10 nr_ready pre || fail "pre-installed plugin not ready: $(op nri)"
  expect_eq "$(nr_field pre source)" launched "source"
  expect_eq "$(grep -c '^NRI_' "$T/pre.env")" 3 "exactly three NRI_ variables"
  expect_contains "$(cat "$T/pre.env")" "NRI_PLUGIN_SOCKET=3" "fd 3"
  expect_contains "$(cat "$T/pre.env")" "NRI_PLUGIN_NAME=pre" "name"
  expect_contains "$(cat "$T/pre.env")" "NRI_PLUGIN_IDX=30" "index"
  expect_contains "$(op nri)" 'badname: invalid plugin name "badname", idx-pluginname expected' "bad file reported"
  grep -q "^Configure.* config=13" "$T/pre.log" || fail "config file (13 bytes) not sent in Configure: $(head -2 "$T/pre.log")"
  local first
  first="$(nr_field pre pid)"
  nr_job pj >"$T/pj.json"
  op run -f "$T/pj.json" --detach >/dev/null 2>&1
  wait_for 10 nr_pid pj/t >/dev/null || fail "task did not start"
  # The plugin exits at StartContainer; the launcher starts it again.
  wait_for 15 sh -c "[ \"\$($OUTPOST --socket $SOCK --json nri | python3 -c 'import json,sys; print([p for p in json.load(sys.stdin)[\"plugins\"] if p[\"name\"]==\"pre\" and p[\"state\"]==\"ready\"][-1][\"pid\"])' 2>/dev/null)\" != \"$first\" ]" \
    || fail "crashed plugin not restarted: $(op nri)"
  grep -q "nri plugin: pre starting.*plugin=30-pre" "$T/agent.log" || fail "plugin stderr not in the agent log"
}

test_nri_unsolicited_update_and_eviction_apply_to_the_running_task() {
  nr_start
  nr_job uj >"$T/uj.json"
  expect_exit 0 op run -f "$T/uj.json"
  local pid id
  pid="$(wait_for 10 nr_pid uj/t)" || fail "task not running"
  id="$(op --json inspect uj/t | json_get task_id)"
  nr_plugin 10 upd -events all -evict-on Synchronize:"$id" >/dev/null
  wait_for 10 jt_events_contain uj/t "evicted by NRI plugin 10-upd" || fail "no eviction: $(op events uj/t)"
  grep -q "^Synchronize pods=1 containers=1" "$T/upd.log" || fail "Synchronize did not list the running task: $(head -3 "$T/upd.log")"
}

test_nri_old_plugin_gets_notifications_through_state_change() {
  nr_start
  nr_plugin 10 old -events all -old >/dev/null
  wait_for 10 nr_ready old || fail "old not ready"
  nr_job oj >"$T/oj.json"
  expect_exit 0 op run -f "$T/oj.json"
  wait_for 10 nr_logged old "^PostStartContainer" || fail "no PostStartContainer through StateChange: $(nr_events old)"
  expect_eq "$(nr_field old state_change)" True "listed as an old plugin"
  # Its Unimplemented answer to the dedicated RPC is how it says it is old,
  # not a failure.
  expect_eq "$(nr_field old failures)" 0 "failures"
  expect_eq "$(nr_field old last_error)" "" "last error"
}

test_nri_garbage_answer_closes_the_plugin_and_the_task_starts() {
  nr_start
  nr_plugin 10 junk -events CreateContainer -garbage-on CreateContainer >/dev/null
  wait_for 10 nr_ready junk || fail "junk not ready"
  nr_job gj >"$T/gj.json"
  expect_exit 0 op run -f "$T/gj.json"
  wait_for 10 nr_pid gj/t >/dev/null || fail "task did not start"
  expect_contains "$(op --json inspect gj/t | json_get task.nri)" "10-junk: skipped: closed: protocol error" "reported"
}

test_nri_refuses_an_adjustment_the_driver_cannot_apply() {
  nr_start
  nr_plugin 10 dev -events CreateContainer -adjust-device /dev/null >/dev/null
  wait_for 10 nr_ready dev || fail "dev not ready"
  printf '{"id": "dj", "tasks": [{"name": "t", "command": "%s", "args": ["sleep", "600"], "restart": {"policy": "never"}}]}\n' \
    "$HELPER" >"$T/dj.json"
  op run -f "$T/dj.json" --detach >/dev/null 2>&1
  wait_for 10 jt_events_contain dj/t "NRI plugin 10-dev adjusted Devices /dev/null: the exec driver cannot apply devices" \
    || fail "no refusal: $(op events dj/t)"
}

test_nri_job_waiting_for_a_required_plugin_can_be_removed() {
  nr_start '"required_plugins": ["gate"]'
  nr_job wj >"$T/wj.json"
  op run -f "$T/wj.json" --detach >/dev/null 2>&1
  wait_for 10 jt_events_contain wj/t "waiting for required NRI plugin(s): gate" || fail "no waiting event"
  expect_exit 0 timeout 20 "$OUTPOST" --socket "$SOCK" rm wj
  expect_eq "$(jt_job_ids)" "" "the job is gone"
  nr_plugin 10 gate -events all >/dev/null
  wait_for 10 nr_ready gate || fail "gate not ready"
  # The start that waited does not come back once the plugin is there.
  nr_job other >"$T/other.json"
  expect_exit 0 op run -f "$T/other.json"
  expect_eq "$(jt_job_ids)" "other" "only the new job"
  local n
  n="$(grep -c "task started task=wj" "$T/agent.log")"
  expect_eq "$n" 0 "the removed job's task never started"
}

# nr_count NAME: how many entries `outpost nri` lists for plugin NAME.
nr_count() {
  op --json nri | python3 -c 'import json,sys
print(sum(1 for p in json.load(sys.stdin)["plugins"] if p["name"] == sys.argv[1]))' "$1"
}
nr_restarts_at_least() { [ "$(nr_field "$1" restarts)" -ge "$2" ] 2>/dev/null; }
nr_closed() { [ "$(nr_field "$1" state)" = closed ]; }

test_nri_required_plugin_with_fail_policy_fail_hung_at_run_pod_sandbox_fails_the_start() {
  # 10-logger stands for containerd's stock logger started with -events all
  # and then stopped with SIGSTOP: connected, every request to it times out.
  nr_start '"required_plugins": ["logger"], "plugins": {"logger": {"fail_policy": "fail", "request_timeout": "500ms"}}'
  local pid
  pid="$(nr_plugin 10 logger -events all)"
  wait_for 10 nr_ready logger || fail "logger not ready: $(op nri)"
  kill -STOP "$pid"
  printf '{"id": "sj", "tasks": [{"name": "t", "command": "%s", "args": ["sleep", "600"], "restart": {"policy": "never"}}]}\n' \
    "$HELPER" >"$T/sj.json"
  op run -f "$T/sj.json" --detach >/dev/null 2>&1
  wait_for 10 jt_events_contain sj/t 'NRI plugin 10-logger (fail_policy "fail"): closed: RunPodSandbox timed out after 500 ms' \
    || fail "the start did not fail at RunPodSandbox: $(op events sj/t)"
  nr_pid sj/t >/dev/null && fail "the task started without its required plugin"
  expect_eq "$(grep -c "task started task=sj" "$T/agent.log")" 0 "the task never started"
  kill -9 "$pid"
}

test_nri_required_plugin_hung_at_run_pod_sandbox_makes_the_start_wait_for_its_restart() {
  # 10-logger stands for containerd's stock logger installed in the plugin
  # dir with -events all, stopped with SIGSTOP once ready: the agent closes
  # it at its first timeout, kills it and launches it again.
  mkdir -p "$T/nri-plugins"
  cat >"$T/nri-plugins/10-logger" <<SH
#!/bin/sh
exec "$TEST_NRI" -events all -log "$T/logger.log"
SH
  chmod +x "$T/nri-plugins/10-logger"
  nr_start '"required_plugins": ["logger"], "plugins": {"logger": {"request_timeout": "500ms"}}'
  wait_for 10 nr_ready logger || fail "logger not ready: $(op nri)"
  local first
  first="$(nr_field logger pid)"
  kill -STOP "$first"
  nr_job wj >"$T/wj.json"
  op run -f "$T/wj.json" --detach >/dev/null 2>&1
  wait_for 10 jt_events_contain wj/t "waiting for required NRI plugin(s): logger" \
    || fail "the start did not wait for its required plugin: $(op events wj/t)"
  wait_for 20 nr_pid wj/t >/dev/null || fail "the task did not start once the plugin was back: $(op events wj/t); $(op nri)"
  [ "$(nr_field logger pid)" != "$first" ] || fail "the hung plugin was not launched again"
  # The instance launched again learnt the pod in Synchronize, then got
  # the container.
  grep -q "^Synchronize pods=1 containers=0" "$T/logger.log" || fail "no pod in the new Synchronize: $(cat "$T/logger.log")"
  grep -q "^CreateContainer t id=wj.t " "$T/logger.log" || fail "the new instance got no CreateContainer: $(cat "$T/logger.log")"
  expect_contains "$(op events wj/t)" "10-logger: skipped: closed: RunPodSandbox timed out after 500 ms" \
    "the waiting event says why"
}

test_nri_every_event_describes_the_container_as_create_container_left_it() {
  # 20-seen stands for the stock logger (-events all), which prints every
  # event's container; 10-adj for a plugin adding an annotation. The task
  # has no OCI hook (with one, the annotations were kept for the hooks).
  nr_start
  nr_plugin 10 adj -events CreateContainer -adjust-annotation nri.example/added=yes >/dev/null
  nr_plugin 20 seen -events all >/dev/null
  wait_for 10 nr_ready adj || fail "adj not ready"
  wait_for 10 nr_ready seen || fail "seen not ready"
  printf '{"id": "an", "annotations": {"job.example/j": "1"}, "tasks": [{"name": "t", "annotations": {"task.example/t": "2"}, "command": "%s", "args": ["sleep", "600"]}]}\n' \
    "$HELPER" >"$T/an.json"
  expect_exit 0 op run -f "$T/an.json"
  wait_for 10 nr_logged seen "^PostStartContainer" || fail "no PostStartContainer: $(nr_events seen)"
  # A plugin connecting now gets the running task in Synchronize.
  nr_plugin 30 late -events all >/dev/null
  wait_for 10 nr_ready late || fail "late not ready"
  expect_exit 0 op rm an
  wait_for 10 nr_logged seen "^RemoveContainer" || fail "no RemoveContainer: $(nr_events seen)"
  local create ann created
  create="$(grep '^CreateContainer t ' "$T/seen.log")"
  ann="ann=job.example/j=1,nri.example/added=yes,task.example/t=2"
  expect_contains "$create" "$ann" "CreateContainer as plugin 10 left it"
  created="$(echo "$create" | sed -n 's/.* created=\([0-9]*\).*/\1/p')"
  [ -n "$created" ] && [ "$created" != 0 ] || fail "no created_at in CreateContainer: $create"
  local ev line
  for ev in PostCreateContainer StartContainer PostStartContainer StopContainer RemoveContainer; do
    line="$(grep "^$ev t " "$T/seen.log")"
    expect_contains "$line" "$ann created=$created" "$ev"
  done
  expect_contains "$(grep '^SyncContainer t ' "$T/late.log")" "$ann created=$created" "Synchronize"
}

# After the worker is killed, the new one describes a recovered task with
# its annotations too (they are in its record): 10-seen, pre-installed with
# -events all, stands for the stock logger.
test_nri_a_recovered_task_keeps_its_annotations_in_nri_events() {
  mkdir -p "$T/nri-plugins"
  cat >"$T/nri-plugins/10-seen" <<SH
#!/bin/sh
exec "$TEST_NRI" -events all -log "$T/seen.log"
SH
  chmod +x "$T/nri-plugins/10-seen"
  nr_start
  wait_for 10 nr_ready seen || fail "seen not ready: $(op nri)"
  printf '{"id": "an", "annotations": {"job.example/j": "1"}, "tasks": [{"name": "t", "annotations": {"task.example/t": "2"}, "command": "%s", "args": ["sleep", "600"]}]}\n' \
    "$HELPER" >"$T/an.json"
  expect_exit 0 op run -f "$T/an.json"
  local w; w="$(op status --json | json_get pid)"
  kill -9 "$w"
  wait_for 20 new_worker_answers "$w" >/dev/null || fail "no new worker"
  wait_for 10 nr_ready seen || fail "seen not ready again: $(op nri)"
  expect_exit 0 op rm an
  wait_for 10 nr_logged seen "^RemoveContainer" || fail "no RemoveContainer: $(nr_events seen)"
  local ev
  for ev in SyncContainer StopContainer RemoveContainer; do
    expect_contains "$(grep "^$ev t " "$T/seen.log" | tail -n 1)" "ann=job.example/j=1,task.example/t=2" "$ev after the recovery"
  done
}

test_nri_outpost_nri_lists_each_plugin_once_with_its_restarts() {
  # 20-dies stands for a pre-installed stock plugin that dies at every
  # start (here at Synchronize); ext for an external one killed and started
  # again twice (a job with restart "always" does that).
  mkdir -p "$T/nri-plugins"
  cat >"$T/nri-plugins/20-dies" <<SH
#!/bin/sh
exec "$TEST_NRI" -events all -crash-on Synchronize
SH
  chmod +x "$T/nri-plugins/20-dies"
  nr_start
  local i pid
  for i in 1 2 3; do
    pid="$(nr_plugin 10 ext -events all)"
    wait_for 10 nr_ready ext || fail "ext not ready (connection $i): $(op nri)"
    [ "$i" = 3 ] && break
    kill -9 "$pid"
    wait_for 10 nr_closed ext || fail "ext not closed (connection $i): $(op nri)"
  done
  wait_for 20 nr_restarts_at_least dies 2 || fail "dies not restarted twice: $(op nri)"
  expect_eq "$(nr_count dies)" 1 "one entry for the launched plugin"
  expect_eq "$(nr_count ext)" 1 "one entry for the external plugin"
  expect_eq "$(nr_field ext restarts)" 2 "the external plugin's reconnects"
  expect_eq "$(nr_field ext state)" ready "the external plugin's current connection"
  [ -n "$(nr_field dies last_error)" ] || fail "no last error for the dying plugin: $(op nri)"
  expect_contains "$(op nri | grep '^10-ext ')" "  restarts 2  " "outpost nri shows the restarts"
}
