# Stock Nomad task-driver plugins hosted by the real agent (issue 44;
# docs/nomad-drivers.md): tests/helpers/nomad/test_nomad_driver.py, a Nomad
# driver plugin written for these tests (Python grpcio serving Nomad's
# protos, go-plugin's handshake), is copied into the agent's
# nomad_plugin_dir ($T/nomad-plugins) as an executable named after the
# plugin, configured through nomad_plugins, and driven through outpost's CLI.
# What the plugin was asked is read from its calls log ($T/NAME.calls, one
# JSON line per call; its options --calls and --control come from
# nomad_plugins.NAME.args), and its behaviour is changed between launches
# through its control file ($T/NAME.control). Stubs are generated into
# $T/stubs by each test. Skipped, with the reason, when /usr/bin/python3
# lacks grpc, grpc_tools or msgpack. Helpers are prefixed nd_.

ND_PY=/usr/bin/python3
ND_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../helpers/nomad" && pwd)"
ND_PROTO_DIR="$(cd "$ND_DIR/../../../proto" && pwd)"

# nd_setup: skips the test (returns 1 after "skip: ...") without the Python
# modules; generates the stubs; kills the plugins and their tasks when the
# test ends, after the agent (its plugins carry OUTPOST_TEST_NOMAD_STUBS=$T/stubs in
# their environment, which they inherit from the agent).
nd_setup() {
  if ! "$ND_PY" -c 'import grpc, grpc_tools.protoc, msgpack' 2>/dev/null; then
    echo "skip: $ND_PY cannot import grpc, grpc_tools and msgpack (python3-grpcio, python3-grpc-tools, python3-msgpack: tools/deps.sh test)"
    return 1
  fi
  mkdir -p "$T/nomad-plugins" "$T/stubs"
  "$ND_PY" -m grpc_tools.protoc -I"$ND_PROTO_DIR" --python_out="$T/stubs" --grpc_python_out="$T/stubs" \
    "$ND_PROTO_DIR"/{google_protobuf,nomad_hcl_spec,nomad_structs,nomad_base,nomad_driver,goplugin,grpc_health}.proto \
    >"$T/protoc.log" 2>&1 || fail "protoc: $(cat "$T/protoc.log")"
  export OUTPOST_TEST_NOMAD_STUBS="$T/stubs" OUTPOST_TEST_NOMAD_PROTO_DIR="$ND_PROTO_DIR"
  trap 'cleanup_agents; nd_cleanup' EXIT
}
nd_cleanup() {
  local p
  for p in $(cat "$T"/*.calls 2>/dev/null | "$ND_PY" -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    for k in ("spawned_pid", "recovered_pid"):
        if e.get(k): print(-e[k])
    if e.get("event") == "launch": print(e["pid"])'); do
    kill -9 -- "$p" 2>/dev/null
  done
  for p in $(grep -lsaF "OUTPOST_TEST_NOMAD_STUBS=$T/stubs" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    [ "$p" = "$$" ] || [ "$p" = "$BASHPID" ] || kill -9 "$p" 2>/dev/null
  done
}

# nd_install NAME: the driver, copied into the plugin dir as NAME (a stock
# plugin is a binary dropped there; the file name is the plugin's name).
nd_install() { install -m 0755 "$ND_DIR/test_nomad_driver.py" "$T/nomad-plugins/$1"; }
# nd_entry NAME [ARGS...]: NAME's nomad_plugins member: its args (name,
# calls log, control file, then ARGS) and ND_PLUGIN_CONFIG as its config.
nd_entry() {
  local name="$1" args="" a; shift
  for a in --name "$name" --calls "$T/$name.calls" --control "$T/$name.control" "$@"; do
    args="$args${args:+, }\"$a\""
  done
  printf '"%s": {"args": [%s]%s}' "$name" "$args" "${ND_PLUGIN_CONFIG:+, \"config\": $ND_PLUGIN_CONFIG}"
}
# nd_config ENTRIES [EXTRA]: the agent's config with nomad_plugin_dir and
# nomad_plugins {ENTRIES}, debug logging (the plugins' relayed lines).
nd_config() {
  jt_config "\"nomad_plugin_dir\": \"$T/nomad-plugins\", \"nomad_plugins\": {$1}, \"log_level\": \"debug\"${2:+, $2}"
}
# nd_start [ARGS...]: pydriver installed (with ARGS), the agent started, and
# the driver fingerprinted healthy.
nd_start() {
  nd_install pydriver
  nd_config "$(nd_entry pydriver "$@")"
  start_agent
  nd_wait_healthy pydriver
}
nd_healthy() { op status 2>/dev/null | grep -q "^ *driver\.$1 *on *healthy: Healthy"; }
nd_wait_healthy() {
  wait_for 60 nd_healthy "$1" >/dev/null ||
    fail "driver $1 not fingerprinted healthy within 60 s: $(op status 2>&1 | grep -i -e nomad -e "driver\.$1"); calls: $(tail -n 5 "$T/$1.calls" 2>/dev/null)"
}
nd_status_says() { op status 2>/dev/null | grep -qF -- "$1"; }
nd_control() { printf '%s\n' "$2" >"$T/$1.control"; }

# nd_q MODE NAME [FIELD] FILTER...: the calls log of plugin NAME, the lines
# matching every FILTER: KEY=VALUE (a string field equal to VALUE, other
# fields equal as JSON: true, 14000), KEY!=VALUE, KEY~TEXT (contains).
# MODE count: how many; any: status 0 if one; field: FIELD of the last one.
nd_q() {
  "$ND_PY" - "$T" "$@" <<'PY'
import json, sys
t, mode, name = sys.argv[1], sys.argv[2], sys.argv[3]
rest = sys.argv[4:]
field = rest.pop(0) if mode == "field" else None
def text(v):
    return v if isinstance(v, str) else json.dumps(v)
def match(e, f):
    for op in ("!=", "~", "="):
        if op in f:
            k, v = f.split(op, 1)
            have = e.get(k)
            if op == "=": return have is not None and text(have) == v
            if op == "!=": return have is None or text(have) != v
            return have is not None and v in text(have)
    raise SystemExit("bad filter " + f)
hits = []
try:
    with open("%s/%s.calls" % (t, name)) as f:
        for line in f:
            e = json.loads(line)
            if all(match(e, x) for x in rest):
                hits.append(e)
except FileNotFoundError:
    pass
if mode == "count":
    print(len(hits))
elif mode == "any":
    sys.exit(0 if hits else 1)
else:
    if not hits or field not in hits[-1]:
        sys.exit(1)
    print(text(hits[-1][field]))
PY
}
nd_called() { nd_q any "$@"; }
nd_count_at_least() { [ "$(nd_q count "$1" "${@:3}")" -ge "$2" ]; }
# nd_instances_gone NAME: every process NAME was launched as has exited.
nd_instances_gone() {
  local p
  for p in $("$ND_PY" -c '
import json, sys
for l in sys.stdin:
    e = json.loads(l)
    if e.get("event") == "launch": print(e["pid"])' <"$T/$1.calls" 2>/dev/null); do
    proc_alive "$p" && return 1
  done
  return 0
}
nd_logs_have() { op logs "$1" 2>/dev/null | grep -qF -- "$2"; }

# nd_json STRING: STRING as a JSON string.
nd_json() { local s="${1//\\/\\\\}"; s="${s//\"/\\\"}"; printf '"%s"' "$s"; }
# nd_task NAME COMMAND [ARGS...]: a task run by $ND_DRIVER (default
# pydriver) with config {command, args} plus ND_CONFIG members, and the
# task members ND_EXTRA. A Nomad driver takes its command in its config:
# such a task has no top-level "command" (the one place that says so).
nd_task() {
  local name="$1" cmd="$2" args="" a; shift 2
  for a in "$@"; do args="$args${args:+, }$(nd_json "$a")"; done
  printf '{"name": "%s", "driver": "%s", "config": {"command": %s, "args": [%s]%s}%s}' "$name" \
    "${ND_DRIVER:-pydriver}" "$(nd_json "$cmd")" "$args" "${ND_CONFIG:+, $ND_CONFIG}" "${ND_EXTRA:+, $ND_EXTRA}"
}
# nd_run_sleeper JOB [RUN_ARGS...]: job JOB of one task t sleeping 600 s;
# echoes its pid once it runs.
# (Call it as `pid="$(nd_run_sleeper J)" || fail "$pid"`: it prints why it failed.)
nd_run_sleeper() {
  jt_job "$1" "$(nd_task t /bin/sleep 600)" >"$T/$1.json"
  op run -f "$T/$1.json" "${@:2}" >/dev/null 2>&1 || { echo "run $1: $(op run -f "$T/$1.json" 2>&1)"; return 1; }
  wait_for 30 jt_running_pid "$1/t" || { echo "task $1/t not running: $(op inspect "$1" 2>&1)"; return 1; }
}
# nd_task_id JOB: the TaskConfig id pydriver was last started with for JOB.
nd_task_id() { nd_q field pydriver task_id rpc=StartTask "job_id=$1" spawned_pid~; }

# ---------------------------------------------------------------------------

# The driver itself, without outpost: the fake host plays Nomad's client
# (the loader's launches, the task runner's calls, recovery after kill -9,
# RecoverableError details, refused handshakes).
test_nomad_test_driver_passes_the_fake_nomad_host() {
  nd_setup || return 0
  expect_exit 0 "$ND_PY" "$ND_DIR/fake_host.py" --work "$T/fake" --stubs "$T/stubs"
  expect_contains "$OUT" " passed, 0 failed" "fake host summary"
}

# Loaded as Nomad's loader loads a plugin, configured with its schema's
# defaults, fingerprinted; a task's whole life through it: start with the
# task config encoded as Nomad does, Nomad's dirs and variables, output in
# outpost's logs, the driver's events, stop, removal.
test_nomad_plugin_loaded_and_a_task_lifecycle() {
  nd_setup || return 0
  mkdir "$T/nomad-plugins/subdir"
  echo "not a plugin" >"$T/nomad-plugins/README"  # not executable: skipped, as Nomad's loader does
  nd_start
  # Launched with go-plugin's environment.
  nd_called pydriver event=launch protocol_versions=2 min_port=10000 max_port=25000 client_cert=false socket_dir!= ||
    fail "launch environment: $(grep launch "$T/pydriver.calls")"
  nd_called pydriver rpc=PluginInfo || fail "no PluginInfo"
  nd_called pydriver rpc=ConfigSchema || fail "no ConfigSchema"
  # The long-lived instance: SetConfig with the defaults applied, encoded as
  # go-cty does ({max_tasks = null, shell = "bash"}, keys sorted), and
  # Nomad's agent config (the client's default plugin port range).
  nd_called pydriver rpc=SetConfig has_nomad_config=true plugin_api_version=v0.1.0 \
    msgpack_config=82a96d61785f7461736b73c0a57368656c6ca462617368 client_min_port=14000 client_max_port=14512 ||
    fail "SetConfig of the long-lived instance: $(grep SetConfig "$T/pydriver.calls")"
  local p
  for p in Fingerprint TaskEvents TaskConfigSchema Capabilities GRPCStdio.StreamStdio; do
    nd_called pydriver "rpc=$p" || fail "the agent never called $p: $(cut -c1-200 "$T/pydriver.calls")"
  done
  ! nd_status_says "README" || fail "a non-executable file was loaded: $(op status)"
  expect_exit 0 op status
  expect_contains "$OUT" "driver.pydriver.version=0.1.0" "the fingerprint's attributes in status"
  op --json status | "$ND_PY" -c 'import json,sys; f=json.load(sys.stdin)["features"]["driver.pydriver"]
assert f["enabled"] and "driver.pydriver.shell=bash" in f["detail"], f' ||
    fail "status --json: $(op --json status)"
  # The plugin's stderr (hclog JSON) and stdout (go-plugin's stdio stream) in the agent log, with its name.
  grep -F "plugin configured" "$T/agent.log" | grep -q pydriver || fail "the plugin's log line is not in the agent log"
  wait_for 10 grep -qF "pydriver stdout: configured shell=bash" "$T/agent.log" ||
    fail "the plugin's stdout (StreamStdio) is not in the agent log"

  cat >"$T/lc.json" <<'JSON'
{"id": "lc", "tasks": [{"name": "t", "driver": "pydriver", "config": {
  "command": "/bin/sh",
  "args": ["-c", "echo out task=$NOMAD_TASK_NAME; echo err >&2; test -d \"$NOMAD_TASK_DIR\" && test -d \"$NOMAD_ALLOC_DIR\" && test -d \"$NOMAD_SECRETS_DIR\" && echo dirs-ok; exec sleep 600"],
  "greeting": "hello from ${NOMAD_TASK_NAME}"}}]}
JSON
  expect_exit 0 op run -f "$T/lc.json"
  expect_contains "$OUT" "job lc is running" "run waits until running"
  local pid; pid="$(wait_for 10 jt_running_pid lc/t)" || fail "lc/t has no pid"
  expect_eq "$(nd_q field pydriver spawned_pid rpc=StartTask job_id=lc)" "$pid" "the pid outpost shows is the plugin's task"
  local plugin; plugin="$(nd_q field pydriver pid rpc=StartTask job_id=lc)"
  expect_eq "$(ps -o ppid= -p "$pid" | tr -d ' ')" "$plugin" "the task is the plugin's child"
  # The task config: interpolated, defaults and absent blocks as hcldec
  # makes them, msgpack map keys sorted (85 = map of 5, a4 "args" first).
  nd_q field pydriver decoded rpc=StartTask job_id=lc | "$ND_PY" -c 'import json,sys
d = json.load(sys.stdin)
want = {"command": "/bin/sh", "greeting": "hello from t", "options": None, "port_map": []}
assert {k: d[k] for k in want} == want and d["args"][0] == "-c" and sorted(d) == sorted(list(want) + ["args"]), d' ||
    fail "decoded task config: $(nd_q field pydriver decoded rpc=StartTask job_id=lc)"
  case "$(nd_q field pydriver msgpack_driver_config rpc=StartTask job_id=lc)" in
    85a461726773*) ;;
    *) fail "msgpack_driver_config not a sorted map of 5: $(nd_q field pydriver msgpack_driver_config rpc=StartTask job_id=lc)" ;;
  esac
  # Nomad's TaskConfig: names, the alloc dir laid out, the FIFOs, NOMAD_* variables.
  nd_called pydriver rpc=StartTask job_id=lc name=t job_name=lc task_group_name=lc ||
    fail "ids and names: $(grep StartTask "$T/pydriver.calls" | cut -c1-400)"
  local alloc; alloc="$(nd_q field pydriver alloc_dir rpc=StartTask job_id=lc)"
  local d
  for d in alloc alloc/data alloc/logs alloc/tmp t/local t/secrets t/tmp; do
    [ -d "$alloc/$d" ] || fail "alloc dir: no $alloc/$d"
  done
  [ -p "$(nd_q field pydriver stdout_path rpc=StartTask job_id=lc)" ] || fail "stdout_path is not a FIFO"
  local v
  for v in NOMAD_ALLOC_DIR NOMAD_TASK_DIR NOMAD_SECRETS_DIR NOMAD_TASK_NAME NOMAD_ALLOC_ID NOMAD_JOB_NAME NOMAD_GROUP_NAME; do
    nd_called pydriver rpc=StartTask job_id=lc "env_keys~\"$v\"" || fail "TaskConfig.env has no $v"
  done
  # Output through outpost's log pipes.
  wait_for 10 nd_logs_have lc/t "hello from t" || fail "the greeting is not in the logs: $(op logs lc/t)"
  wait_for 10 nd_logs_have lc/t "out task=t" || fail "the task's output is not in the logs: $(op logs lc/t)"
  nd_logs_have lc/t "dirs-ok" || fail "NOMAD_*_DIR are not the task's dirs: $(op logs lc/t)"
  expect_exit 0 op logs --stderr lc/t
  expect_contains "$OUT" "err" "stderr in the logs"
  # The driver's own events (TaskEvents) among the task's.
  wait_for 10 jt_events_contain lc/t "pydriver started pid $pid" || fail "the driver's event: $(op events lc/t)"
  expect_exit 0 op inspect lc/t
  expect_contains "$OUT" "running" "inspect"
  # Stop: StopTask with outpost's kill signal and timeout.
  local id; id="$(nd_task_id lc)"
  expect_exit 0 op stop lc
  wait_gone "$pid" 10 || fail "task $pid survived the stop"
  nd_called pydriver rpc=StopTask "task_id=$id" signal=SIGTERM timeout_s=5.0 ||
    fail "StopTask: $(grep StopTask "$T/pydriver.calls")"
  expect_exit 0 op rm lc
  wait_for 10 nd_called pydriver rpc=DestroyTask "task_id=$id" || fail "no DestroyTask after rm"
}

# The allocation dir lives as long as the job's tasks do: a stop or restart
# keeps it, a task dropped by an update takes its task dir along, rm takes
# the whole allocation, and a new job of the same name starts afresh (as
# Nomad's client collects a finished allocation's dir).
test_nomad_alloc_dir_goes_with_the_job() {
  nd_setup || return 0
  nd_start
  jt_job ad "$(nd_task a /bin/sleep 600)" "$(nd_task b /bin/sleep 600)" >"$T/ad.json"
  jt_job ad "$(nd_task a /bin/sleep 600)" >"$T/ad1.json"
  expect_exit 0 op run -f "$T/ad.json"
  local alloc; alloc="$(nd_q field pydriver alloc_dir rpc=StartTask job_id=ad)"
  [ -d "$alloc/a/local" ] && [ -d "$alloc/b/secrets" ] || fail "no task dirs in $alloc: $(ls -R "$alloc" 2>&1)"
  echo token >"$alloc/b/secrets/token"
  echo kept >"$alloc/alloc/data/kept"
  echo mine >"$alloc/a/local/mine"
  expect_exit 0 op stop ad
  [ -f "$alloc/alloc/data/kept" ] && [ -f "$alloc/b/secrets/token" ] || fail "a stop removed the tasks' data"
  expect_exit 0 op start ad
  expect_exit 0 op run -f "$T/ad1.json" --timeout 15s
  expect_contains "$OUT" "removed: b" "the update drops b"
  wait_for 10 test ! -e "$alloc/b" || fail "b's task dir outlived its removal from the job: $(ls "$alloc")"
  [ -f "$alloc/a/local/mine" ] && [ -f "$alloc/alloc/data/kept" ] || fail "the update removed what a still uses"
  expect_exit 0 op rm ad
  [ ! -e "$alloc" ] || fail "the alloc dir outlived the job: $(ls -R "$alloc" 2>&1)"
  expect_exit 0 op run -f "$T/ad1.json"
  [ -d "$alloc/a/local" ] || fail "the new job has no task dir"
  [ ! -e "$alloc/alloc/data/kept" ] && [ ! -e "$alloc/a/local/mine" ] || fail "the new job found the old one's data"
  expect_exit 0 op rm ad
}

# A task's config is checked against the driver's TaskConfigSchema when the
# job is submitted: every error with its JSON path, nothing stored, the
# plugin never asked to start anything.
test_nomad_task_config_errors_at_submission() {
  nd_setup || return 0
  nd_start
  cat >"$T/bad.json" <<'JSON'
{"id": "bad", "tasks": [{"name": "t", "driver": "pydriver", "config": {
  "args": "x", "greting": "hi", "bogus": 1,
  "options": [{"workdir": "/"}, {"workdir": "/tmp"}],
  "port_map": [{"port": 80}]}}]}
JSON
  expect_exit 2 op run -f "$T/bad.json"
  local e
  for e in 'tasks[0].config.command: required attribute missing' \
    'tasks[0].config.args: expected list of string, got string "x"' \
    'tasks[0].config.greting: unknown field (did you mean "greeting"?)' \
    'tasks[0].config.bogus: unknown field' \
    'tasks[0].config.options[1]: only one options block is allowed' \
    'tasks[0].config.port_map[0].label: required attribute missing'; do
    expect_contains "$OUT" "$e" "submission error"
  done
  cat >"$T/var.json" <<'JSON'
{"id": "var", "tasks": [{"name": "t", "driver": "pydriver", "config": {"command": "/bin/true", "greeting": "${NOMAD_NOPE}"}}]}
JSON
  expect_exit 2 op run -f "$T/var.json"
  # shellcheck disable=SC2016  # a literal ${...}
  expect_contains "$OUT" 'tasks[0].config.greeting: unknown variable "NOMAD_NOPE" in ${...}' "unknown variable"
  expect_exit 1 op inspect bad
  expect_exit 1 op inspect var
  expect_eq "$(jt_job_ids)" "" "nothing stored"
  expect_eq "$(nd_q count pydriver rpc=StartTask)" 0 "StartTask calls"
}

# A plugin config its ConfigSchema rejects: the plugin is stopped, never
# configured, and `outpost status` shows every error by path.
test_nomad_plugin_config_rejected_by_its_schema() {
  nd_setup || return 0
  nd_install pydriver
  nd_config "$(ND_PLUGIN_CONFIG='{"shell": ["x"], "max_tasks": "many", "bogus": 1}' nd_entry pydriver)"
  start_agent
  wait_for 60 nd_status_says 'nomad_plugins.pydriver.config.bogus: unknown field' >/dev/null ||
    fail "status does not show the config errors: $(op status)"
  expect_exit 0 op status
  local e
  for e in 'nomad_plugins.pydriver.config.shell: expected string, got array' \
    'nomad_plugins.pydriver.config.max_tasks: expected number, got string "many"' \
    'nomad_plugins.pydriver.config.bogus: unknown field'; do
    expect_contains "$OUT" "$e" "status shows the error"
  done
  expect_not_contains "$OUT" "driver.pydriver on" "the driver is not registered"
  wait_for 10 nd_instances_gone pydriver || fail "a pydriver process still runs"
  expect_eq "$(nd_q count pydriver rpc=SetConfig)" 0 "SetConfig calls"
}

# A plugin config the schema takes but the plugin's SetConfig refuses (as
# the skeleton driver refuses shells it does not know): stopped, and why.
test_nomad_plugin_refusing_its_config_is_stopped() {
  nd_setup || return 0
  nd_install pydriver
  nd_config "$(ND_PLUGIN_CONFIG='{"shell": "zsh"}' nd_entry pydriver)"
  start_agent
  wait_for 60 nd_status_says 'invalid shell "zsh"' >/dev/null || fail "status does not say why: $(op status)"
  expect_exit 0 op status
  expect_contains "$OUT" "pydriver" "the plugin named"
  expect_not_contains "$OUT" "driver.pydriver on" "the driver is not registered"
  nd_called pydriver rpc=SetConfig error="invalid shell" || fail "SetConfig was not what refused it"
  wait_for 10 nd_instances_gone pydriver || fail "a pydriver process still runs"
}

# The plugin crashes with a task running: a new instance is launched, the
# task recovered into it from the stored handle (RecoverTask), the task
# keeps running, and its later exit is still seen.
test_nomad_plugin_crash_with_a_task_running() {
  nd_setup || return 0
  nd_start
  local pid; pid="$(nd_run_sleeper cr)" || fail "$pid"
  local id; id="$(nd_task_id cr)"
  local old; old="$(nd_q field pydriver pid rpc=StartTask job_id=cr)"
  local state; state="$(nd_q field pydriver driver_state rpc=StartTask job_id=cr)"
  kill -9 "$old"
  wait_for 60 nd_called pydriver rpc=RecoverTask result=recovered "recovered_pid=$pid" "pid!=$old" ||
    fail "the task was not recovered into a new instance: $(grep -e RecoverTask -e launch "$T/pydriver.calls" | cut -c1-300)"
  # The handle given back is the one StartTask returned, its driver state byte for byte.
  expect_eq "$(nd_q field pydriver driver_state rpc=RecoverTask "pid!=$old")" "$state" "RecoverTask's driver_state"
  expect_eq "$(nd_q field pydriver handle_version rpc=RecoverTask "pid!=$old")" 1 "handle version"
  proc_alive "$pid" || fail "the task died with its plugin"
  expect_eq "$(jt_running_pid cr/t)" "$pid" "same process after the plugin's crash"
  expect_eq "$(jt_tfield cr/t restarts)" 0 "restarts"
  nd_wait_healthy pydriver
  wait_for 20 nd_called pydriver rpc=WaitTask "task_id=$id" "pid!=$old" || fail "no WaitTask on the new instance"
  grep -F "pydriver" "$T/agent.log" | grep -q "killed by SIGKILL" || fail "the plugin's death is not logged"
  # Its exit, after the recovery: seen (the new instance cannot know the status) and the policy applies.
  kill -TERM "$pid"
  wait_for 20 jt_events_contain cr/t "exit status unknown" || fail "the exit was not seen: $(op events cr/t)"
  wait_for 30 jt_started_again cr/t "$pid" || fail "not restarted after its exit: $(op events cr/t)"
}

# A plugin that keeps dying is launched again with growing delays.
test_nomad_plugin_that_keeps_dying_is_restarted_with_backoff() {
  nd_setup || return 0
  nd_start
  local live; live="$(nd_q field pydriver pid event=launch)"  # the last launched: the long-lived instance
  local before; before="$(nd_q count pydriver event=launch)"
  nd_control pydriver "--exit-after 1"
  kill -9 "$live"
  wait_for 120 nd_count_at_least pydriver $((before + 4)) event=launch ||
    fail "not relaunched 4 times: $(grep -e launch -e exit "$T/pydriver.calls" | cut -c1-200)"
  grep -q "panic: exit-after" "$T/agent.log" || fail "the plugin's panic line is not in the agent log"
  "$ND_PY" - "$T/pydriver.calls" "$before" <<'PY' || fail "no backoff between launches"
import json, sys
launches = [json.loads(l) for l in open(sys.argv[1])]
t = [e["mono_ns"] / 1e9 for e in launches if e.get("event") == "launch"][int(sys.argv[2]):]
gaps = [b - a for a, b in zip(t, t[1:])]
print("gaps between launches (s):", ["%.2f" % g for g in gaps])
assert gaps[2] >= gaps[0] + 0.5, gaps
PY
  ! nd_healthy pydriver || fail "a driver dying at every call is shown healthy"
}

# The agent restarts: the plugin stops with it, the task runs on, and the
# next agent's plugin recovers it; a worker crash too.
test_nomad_agent_restart_recovers_tasks() {
  nd_setup || return 0
  nd_start
  # The plugin answers StartTask with a DriverNetwork made of the config's
  # port_map blocks: inspect shows it, and after the restart too.
  local pid; pid="$(ND_CONFIG='"port_map": [{"label": "http", "port": 8080}, {"label": "db", "port": 5432}]' \
    nd_run_sleeper ar)" || fail "$pid"
  local want="network:    127.0.0.1, ports db=5432 http=8080"
  expect_contains "$(op inspect ar/t)" "$want" "inspect JOB/TASK shows the driver's network"
  expect_contains "$(op task inspect ar.t)" "$want" "task inspect shows the driver's network"
  expect_eq "$(op --json inspect ar/t | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["task"]["network"], sort_keys=True))')" \
    '{"address": "127.0.0.1", "ports": {"db": 5432, "http": 8080}}' "inspect --json: task.network"
  local old; old="$(nd_q field pydriver pid rpc=StartTask job_id=ar)"
  kill -TERM "$AGENT_PID"
  wait_gone "$AGENT_PID" 20 || fail "the agent did not stop"
  wait_gone "$old" 10 || fail "the plugin outlived the agent's stop"
  proc_alive "$pid" || fail "the task stopped with the agent"
  start_agent
  nd_wait_healthy pydriver
  wait_for 30 jt_tstate_is ar/t running || fail "not recovered: $(op inspect ar)"
  expect_eq "$(jt_running_pid ar/t)" "$pid" "same process after the agent's restart"
  expect_contains "$(op inspect ar/t)" "$want" "the driver's network kept in the task's record"
  nd_called pydriver rpc=RecoverTask result=recovered "recovered_pid=$pid" || fail "no RecoverTask"
  local w; w="$(op status --json | json_get pid)"
  kill -9 "$w"
  wait_for 20 pl_worker_other_than "$w" || fail "no new worker"
  wait_for 30 jt_tstate_is ar/t running || fail "not running after a worker crash: $(op inspect ar)"
  expect_eq "$(jt_running_pid ar/t)" "$pid" "same process after the worker crash"
  nd_wait_healthy pydriver
  expect_exit 0 op stop ar
  wait_gone "$pid" 10 || fail "the recovered task survived its stop"
}

# A handle the new instance cannot recover: the task is lost (DestroyTask
# force, as Nomad does), says why, and is started again.
test_nomad_unrecoverable_task_is_lost_and_restarted() {
  nd_setup || return 0
  nd_start
  local pid; pid="$(nd_run_sleeper ul)" || fail "$pid"
  local id; id="$(nd_task_id ul)"
  local old; old="$(nd_q field pydriver pid rpc=StartTask job_id=ul)"
  nd_control pydriver "--no-recover"
  kill -9 "$old"
  wait_for 60 nd_called pydriver rpc=RecoverTask error=no-recover "task_id=$id" || fail "no failed RecoverTask"
  wait_for 30 nd_called pydriver rpc=DestroyTask "task_id=$id" force=true || fail "no DestroyTask(force) of the lost task"
  wait_for 30 jt_events_contain ul/t "failed to recover task" || fail "the events do not say why: $(op events ul/t)"
  wait_for 30 jt_started_again ul/t "$pid" || fail "not started again: $(op events ul/t)"
  nd_called pydriver rpc=StartTask job_id=ul "task_id!=$id" spawned_pid~ || fail "no new StartTask"
}

# StartTask's RecoverableError: recoverable (RETRY) goes through the restart
# policy; not recoverable (FATAL) fails the task for good.
test_nomad_start_errors_retry_and_fatal() {
  nd_setup || return 0
  nd_start
  local ND_EXTRA='"restart": {"policy": "on-failure", "delay": "1s"}'
  nd_control pydriver "--start-error retry"
  jt_job rj "$(nd_task t /bin/sleep 600)" >"$T/rj.json"
  op run -f "$T/rj.json" --detach >/dev/null 2>&1
  wait_for 30 nd_count_at_least pydriver 2 rpc=StartTask job_id=rj || fail "a retryable start was not retried"
  jt_events_contain rj/t "start refused: simulated retryable failure" || fail "the reason: $(op events rj/t)"
  nd_control pydriver ""
  wait_for 30 jt_tstate_is rj/t running || fail "not running once the driver takes it: $(op inspect rj)"
  # A fatal (not recoverable) error cannot heal by retrying: `outpost run`
  # fails at once, as for a command that does not exist; the restart
  # policy still decides what follows (on-failure: back off and retry, as
  # outpost does for every start failure).
  nd_control pydriver "--start-error fatal"
  jt_job fj "$(nd_task t /bin/sleep 600)" >"$T/fj.json"
  expect_exit 1 op run -f "$T/fj.json" --timeout 60s
  expect_contains "$OUT" "start refused: simulated fatal failure" "run names the plugin's reason"
  expect_eq "$(nd_q count pydriver rpc=StartTask job_id=fj)" 1 "StartTask calls before run gave up"
  jt_events_contain fj/t "start refused: simulated fatal failure" || fail "the reason: $(op events fj/t)"
}

# The plugin dies in the middle of StartTask, after it started the task's
# process: the start fails and is retried, and that process does not leak.
test_nomad_plugin_dying_mid_start_leaks_nothing() {
  nd_setup || return 0
  nd_start
  nd_control pydriver "--crash-after-spawn"
  local ND_EXTRA='"restart": {"policy": "on-failure", "delay": "1s"}'
  jt_job ms "$(nd_task t /bin/sleep 600)" >"$T/ms.json"
  op run -f "$T/ms.json" --detach >/dev/null 2>&1
  wait_for 30 nd_called pydriver rpc=StartTask job_id=ms crashed=true || fail "the plugin did not crash in StartTask"
  local orphan; orphan="$(nd_q field pydriver spawned_pid rpc=StartTask job_id=ms crashed=true)"
  nd_control pydriver ""
  wait_for 60 jt_tstate_is ms/t running || fail "not started once the plugin is back: $(op inspect ms)"
  wait_for 20 proc_gone "$orphan" || fail "the process of the failed start ($orphan) leaked"
  [ "$(jt_running_pid ms/t)" != "$orphan" ] || fail "the leaked process is shown as the task"
}

# What the plugin's Capabilities rule out is refused by outpost, clearly,
# without calling the plugin.
test_nomad_capability_gaps() {
  nd_setup || return 0
  nd_start --no-signals
  local pid; pid="$(nd_run_sleeper cg)" || fail "$pid"
  expect_exit 1 op exec cg/t -- /bin/echo hi
  expect_contains "$OUT" "driver pydriver does not support exec" "exec refused"
  expect_exit 1 op signal cg/t HUP
  expect_contains "$OUT" "driver pydriver does not support" "signal refused"
  expect_contains "$OUT" "signal" "signal refused"
  expect_eq "$(nd_q count pydriver 'rpc~Exec')" 0 "exec calls reaching the plugin"
  expect_eq "$(nd_q count pydriver rpc=SignalTask)" 0 "signal calls reaching the plugin"
}

# `outpost exec` and exec health checks through ExecTask when the plugin
# says it can; signals through SignalTask.
test_nomad_exec_and_signal_through_the_plugin() {
  nd_setup || return 0
  nd_start --exec
  local ND_EXTRA='"checks": [{"type": "exec", "command": ["/bin/true"], "interval": "200ms"}]'
  local pid; pid="$(nd_run_sleeper ex)" || fail "$pid"
  # shellcheck disable=SC2016  # expanded by the task's shell
  expect_exit 3 op exec ex/t -- /bin/sh -c 'echo in-task $NOMAD_TASK_NAME; exit 3'
  expect_contains "$OUT" "in-task t" "the command ran in the task's environment"
  nd_called pydriver 'rpc~ExecTask' || fail "not through ExecTask"
  wait_for 20 jt_events_contain ex/t " healthy " || fail "the exec check did not pass: $(op events ex/t)"
  expect_exit 0 op signal ex/t TERM
  wait_for 10 nd_called pydriver rpc=SignalTask signal=SIGTERM || fail "not through SignalTask as SIGTERM: $(grep SignalTask "$T/pydriver.calls" 2>&1)"
  wait_gone "$pid" 10 || fail "the signal did not reach the task"
}

# Stats through TaskStats, the driver's events through TaskEvents.
test_nomad_stats_and_events() {
  nd_setup || return 0
  nd_start
  local pid; pid="$(nd_run_sleeper st)" || fail "$pid"
  expect_exit 0 op --json stats st/t
  printf '%s\n' "$OUT" | head -n 1 | "$ND_PY" -c 'import json,sys; s=json.loads(sys.stdin.readline())
assert s["measured"] and s["rss_bytes"] > 0 and s["pid"] == int(sys.argv[1]), s' "$pid" || fail "stats: $OUT"
  nd_called pydriver rpc=TaskStats || fail "not through TaskStats"
  wait_for 10 jt_events_contain st/t "pydriver started pid $pid" || fail "events: $(op events st/t)"
}

# Plugins whose handshake outpost cannot speak (go-plugin's net/rpc,
# AutoMTLS) or whose API versions it does not know are refused, each named
# with why in `outpost status`; the others load.
test_nomad_unsupported_plugins_refused_clearly() {
  nd_setup || return 0
  local n
  for n in pydriver netdrv tlsdrv oldapi; do nd_install "$n"; done
  nd_config "$(nd_entry pydriver), $(nd_entry netdrv --netrpc), $(nd_entry tlsdrv --mtls), $(nd_entry oldapi --api-versions v9.9.9)"
  start_agent
  nd_wait_healthy pydriver
  # Each is refused when its handshake or PluginInfo arrives, in any order.
  wait_for 60 nd_status_says "v9.9.9" >/dev/null || fail "oldapi not refused by version: $(op status)"
  wait_for 60 nd_status_says "AutoMTLS" >/dev/null || fail "tlsdrv not refused: $(op status)"
  wait_for 60 nd_status_says "gRPC plugins only" >/dev/null || fail "netdrv not refused: $(op status)"
  expect_exit 0 op status
  expect_contains "$OUT" "netdrv" "netrpc plugin named"
  expect_contains "$OUT" "outpost hosts gRPC plugins only" "netrpc refused"
  expect_contains "$OUT" "tlsdrv" "mTLS plugin named"
  expect_contains "$OUT" "AutoMTLS" "mTLS refused"
  expect_contains "$OUT" "oldapi" "API version plugin named"
  for n in netdrv tlsdrv oldapi; do
    expect_not_contains "$OUT" "driver.$n on" "$n not registered"
    wait_for 10 nd_instances_gone "$n" || fail "a $n process still runs"
  done
}

# A slow first fingerprint: a job submitted meanwhile waits and starts once
# the driver is fingerprinted, using no restart; a plugin writing more to
# its stdout than a pipe holds still works (the agent drains the stream).
test_nomad_slow_fingerprint_and_stdout_flood() {
  nd_setup || return 0
  nd_install pydriver
  nd_config "$(nd_entry pydriver --slow-fingerprint 3 --stdout-flood 256)"
  start_agent
  jt_job sf "$(nd_task t /bin/sleep 600)" >"$T/sf.json"
  op run -f "$T/sf.json" --detach >/dev/null 2>&1 || fail "sf refused: $(op run -f "$T/sf.json" --detach 2>&1)"
  nd_wait_healthy pydriver
  wait_for 30 jt_tstate_is sf/t running || fail "sf did not start: $(op inspect sf)"
  expect_eq "$(jt_tfield sf/t restarts)" 0 "restarts"
  grep -qF "pydriver stdout flood" "$T/agent.log" || fail "the flood did not go through the agent"
}

# ---- grpc-go and go-plugin ----------------------------------------------------

# nd_go_available: tests/helpers/go/nomad_driver (hashicorp/go-plugin and
# grpc-go, as stock Nomad drivers) is built; says why the test is skipped
# when it is not.
nd_go_available() {
  ND_GO="$(dirname "$OUTPOST")/go/nomad_driver"
  [ -x "$ND_GO" ] && return 0
  echo "skip: $ND_GO not built (make go-peers; tools/deps.sh test installs Debian's Go packages)"
  return 1
}
nd_go_called() { grep -qxF -- "$1" "$T/go.calls" 2>/dev/null; }
nd_stderr_has() { op logs --stderr "$1" 2>&1 | grep -qxF -- "$2"; }  # the task's stderr goes to stderr
# nd_go_plugin_pid: the pid of the driver's current instance (the last launch the agent logged).
nd_go_plugin_pid() { grep -F "nomad plugin launched plugin=godriver" "$T/agent.log" | tail -n 1 | sed 's/.* pid=//'; }

# A driver served by go-plugin itself: its handshake line (with go-plugin's
# empty certificate field), its JSON log relayed, grpc-go answering every
# call of a task's life, and a crash of the plugin with the task running
# (RecoverTask from the stored handle on the new instance).
test_nomad_go_plugin_driver_task_life_and_crash_recovery() {
  nd_go_available || return 0
  mkdir -p "$T/nomad-plugins"
  install -m 0755 "$ND_GO" "$T/nomad-plugins/godriver"
  jt_config "\"nomad_plugin_dir\": \"$T/nomad-plugins\", \"nomad_plugins\": {\"godriver\": {\"args\": [\"-calls\", \"$T/go.calls\"]}}, \"log_level\": \"debug\""
  start_agent
  wait_for 60 nd_status_says "healthy: Healthy (grpc-go)" >/dev/null ||
    fail "godriver not fingerprinted: $(op status 2>&1 | grep -i -e nomad -e godriver); $(tail -n 5 "$T/agent.log")"
  grep -F "plugin=godriver" "$T/agent.log" | grep -qF "plugin address" || fail "go-plugin's log line not relayed: $(grep -F godriver "$T/agent.log")"
  jt_job g '{"name": "t", "driver": "godriver", "config": {"command": "echo out=$NOMAD_TASK_NAME; echo err >&2; exec sleep 600"}}' >"$T/g.json"
  expect_exit 0 op run -f "$T/g.json"
  local pid; pid="$(wait_for 30 jt_running_pid g/t)" || fail "g/t not running: $(op inspect g/t 2>&1)"
  wait_for 10 nd_logs_have g/t "out=t" || fail "no stdout through the FIFO: $(op logs g/t 2>&1)"
  wait_for 10 nd_stderr_has g/t "err" || fail "no stderr through the FIFO: $(op logs --stderr g/t 2>&1)"
  expect_contains "$(op inspect g/t)" "command:    (in the driver's config)" "inspect of a task that runs its driver's config"
  # The Go driver has no TaskStats: grpc-go answers UNIMPLEMENTED.
  expect_contains "$(op stats g/t 2>&1)" "driver godriver does not support TaskStats" "stats of a driver without TaskStats"
  local id; id="$(sed -n 's/^StartTask //p' "$T/go.calls" | tail -n 1)"
  [ -n "$id" ] || fail "no StartTask: $(cat "$T/go.calls")"
  wait_for 10 nd_go_called "WaitTask $id" || fail "no WaitTask: $(cat "$T/go.calls")"
  local old; old="$(nd_go_plugin_pid)"
  kill -9 "$old"
  wait_for 30 nd_go_called "RecoverTask $id" || fail "no RecoverTask: $(cat "$T/go.calls"); $(grep -F godriver "$T/agent.log" | tail -n 5)"
  [ "$(nd_go_plugin_pid)" != "$old" ] || fail "no new instance"
  proc_alive "$pid" || fail "the task died with its plugin"
  wait_for 10 jt_tstate_is g/t running || fail "not running after the recovery: $(op inspect g/t 2>&1)"
  expect_eq "$(jt_running_pid g/t)" "$pid" "same process after the plugin's crash"
  expect_eq "$(jt_tfield g/t restarts)" 0 "restarts"
  expect_exit 0 op stop g
  nd_go_called "StopTask $id" || fail "no StopTask: $(cat "$T/go.calls")"
  wait_gone "$pid" 10 || fail "the task survived its stop"
}

# outpost's encoding of task configs against Nomad's own libraries: the Go
# driver's -check schema has a node of every hclspec kind (shaped like the
# container drivers' configs), and for each task the driver decodes the
# config's JSON (given to it in the task's env too) with hcl/v2's JSON parser
# and hcldec, encodes it with go-cty's msgpack.Marshal, as Nomad's client
# does, and compares the bytes with what outpost sent; then it decodes them
# as a driver does (go-msgpack into a struct with codec tags).
test_nomad_go_plugin_task_configs_encode_as_nomads_libraries_do() {
  nd_go_available || return 0
  mkdir -p "$T/nomad-plugins"
  install -m 0755 "$ND_GO" "$T/nomad-plugins/godriver"
  jt_config "\"nomad_plugin_dir\": \"$T/nomad-plugins\", \"nomad_plugins\": {\"godriver\": {\"args\": [\"-calls\", \"$T/go.calls\", \"-check\"]}}"
  start_agent
  wait_for 60 nd_status_says "healthy: Healthy (grpc-go)" >/dev/null || fail "godriver not fingerprinted: $(op status 2>&1 | grep -i godriver)"
  # No plugin config: SetConfig carries the plugin schema's defaults.
  nd_go_called "SetConfigCheck match" || fail "SetConfig's defaults differ from Nomad's: $(grep SetConfigCheck "$T/go.calls")"
  local full minimal variants sizes types
  full='{"command": "exec sleep 600", "image": "busybox:1.36", "args": ["-c", "echo ${NOMAD_TASK_NAME}", 7, 2.5, true, "$${HOME}"],
    "port_map": [{"http": 8080, "db": "5432"}], "labels": [{"b": "2", "a": "1"}], "memory_hard_limit": 512,
    "force_pull": "true", "ratio": 1.5, "big": "18446744073709551617", "frac": 0.1,
    "nums": [0, -1, 1e3, 9007199254740993, 1.25e-5, "123456789012345678901234567890", -0.5, 4294967296, -2147483649, 255, 256, 65536, -33, -129, 0.30000000000000004],
    "tags": ["b", "a", "b", "c"], "anyv": {"k": ["x", 1, true], "n": null, "o": {"z": 1}},
    "obj": {"a": "s", "b": "3", "extra": 1}, "tup": ["t", "2", "false"], "opt": null, "dns": ["1.1.1.1"],
    "auth": {"username": "u", "password": "p"}, "logging": {"config": [{"max-size": "10m"}]},
    "mount": [{"type": "bind", "target": "/x", "source": "/y", "readonly": true}, {"target": "/t"}],
    "volume": [{"source": "b", "target": "/b"}, {"source": "a", "target": "/a"}, {"source": "a", "target": "/a"}],
    "ports": {"http": {"to": 80}, "db": {"static": 5432}}, "env_extra": {"X": "1", "Y": 2, "Z": true},
    "pair_first": "p", "pair_second": "2", "gc": {"image": false}, "//": "a comment"}'
  minimal='{"command": "exec sleep 600"}'
  variants='{"command": "exec sleep 600", "mount": {"target": "/one"}, "auth": [{"username": "only"}],
    "tags": [], "args": [], "port_map": [], "nums": [1e-7, 3.4028234663852886e38, 0.3, 1e21, 100000000000000000000000],
    "anyv": [1, "a"], "labels": [{}], "env_extra": {}, "memory_hard_limit": "1e3"}'
  sizes='{"command": "exec sleep 600", "args": ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "b0", "b1", "b2", "b3", "b4", "b5", "b6"],
    "image": "registry.example.com/a/very/long/name/of/an/image:with-a-tag-of-its-own-that-is-long", "opt": "héllo ✓ 日本",
    "tags": ["z", "é", "A", "10", "9", "", " "], "anyv": [[[{"deep": [1, [2, [3]]]}]]],
    "volume": [{"source": "x"}, {"source": "x", "target": "/x"}, {"source": "B"}, {"source": "a", "target": ""}],
    "ports": {"z": {}, "a": {"to": 1}, "m": {"to": "2"}}, "labels": [{"k1": "v", "k2": "v", "k3": "v", "k4": "v", "k5": "v",
    "k6": "v", "k7": "v", "k8": "v", "k9": "v", "k10": "v", "k11": "v", "k12": "v", "k13": "v", "k14": "v", "k15": "v", "k16": "v"}]}'
  types='{"command": "exec sleep 600", "nset": [3, 1, 2, 1, 10, -5, 0.5, "7"], "bset": [true, false, true],
    "mln": {"b": [2, 1], "a": ["3"]}, "lobj": [{"a": "x", "b": [1, 2]}, {"a": "y", "b": []}], "many": {"a": 1, "b": "x", "c": true},
    "lany": [1, "2", false], "lls": [["a"], [], ["b", 1]],
    "sobj": [{"k": "b", "n": 2}, {"k": "a", "n": 10}, {"k": "a", "n": 9}, {"k": "b", "n": 2}, {"k": "ab", "n": 1}]}'
  local name cfg
  for name in full minimal variants sizes types; do
    cfg="${!name}"
    python3 -c 'import json,sys; c=json.loads(sys.argv[2]); print(json.dumps({"id": sys.argv[1], "tasks": [{"name": "t", "driver": "godriver", "config": c, "env": {"GO_CHECK_JSON": sys.argv[2], "GO_CHECK_NAME": sys.argv[1]}}]}))' \
      "cfg-$name" "$cfg" >"$T/$name.json" || fail "job $name"
    expect_exit 0 op run -f "$T/$name.json"
  done
  for name in full minimal variants sizes types; do
    wait_for 30 grep -q "^DecodeCheck cfg-$name " "$T/go.calls" || fail "no check of $name: $(cat "$T/go.calls"); $(op inspect "cfg-$name/t" 2>&1)"
    nd_go_called "ConfigCheck cfg-$name match" ||
      fail "$name: outpost's encoding differs from Nomad's: $(grep "^ConfigCheck cfg-$name " "$T/go.calls")"
    nd_go_called "DecodeCheck cfg-$name ok" || fail "$name: a driver cannot decode it: $(grep "^DecodeCheck cfg-$name " "$T/go.calls")"
  done
}

# What Nomad's client refuses (hcl/v2 and hcldec, asked through the Go
# driver's -decide), outpost refuses when the job is submitted, naming the
# field; what it takes, outpost takes. The plugin is given a config of its
# own here, and SetConfig's bytes are compared with Nomad's encoding of it.
test_nomad_go_plugin_task_configs_refused_where_nomads_libraries_refuse_them() {
  nd_go_available || return 0
  mkdir -p "$T/nomad-plugins"
  install -m 0755 "$ND_GO" "$T/nomad-plugins/godriver"
  # The plugin's own config too, compared at SetConfig.
  local pcfg='{"extra_labels": ["a", 2, true], "volumes": {"selinuxlabel": "Z"}, "client_timeout": "5s", "recover_stopped": "1"}'
  jt_config "$(python3 -c 'import json,sys; print("\"nomad_plugin_dir\": %s, \"nomad_plugins\": %s" % (json.dumps(sys.argv[1]),
    json.dumps({"godriver": {"args": ["-calls", sys.argv[2], "-check", "-plugin-config", sys.argv[3]], "config": json.loads(sys.argv[3])}})))' \
    "$T/nomad-plugins" "$T/go.calls" "$pcfg")"
  start_agent
  wait_for 60 nd_status_says "healthy: Healthy (grpc-go)" >/dev/null || fail "godriver not fingerprinted: $(op status 2>&1 | grep -i godriver)"
  nd_go_called "SetConfigCheck match" || fail "SetConfig differs from Nomad's encoding: $(grep SetConfigCheck "$T/go.calls")"
  local i=0 cfg field verdict out
  while IFS='|' read -r field cfg; do
    [ -n "$cfg" ] || continue
    i=$((i + 1))
    verdict="$("$ND_GO" -decide "$cfg")"
    case "$verdict" in error:*) ;; *) fail "case $i: Nomad's libraries take $cfg ($verdict): not a case for this test" ;; esac
    # (the config as written: a member given twice stays twice)
    printf '{"id": "bad%s", "tasks": [{"name": "t", "driver": "godriver", "config": %s}]}\n' "$i" "$cfg" >"$T/bad$i.json"
    out="$(op run -f "$T/bad$i.json" 2>&1)" && fail "case $i: outpost took $cfg, which Nomad refuses: $verdict"
    expect_contains "$out" "$field" "case $i ($cfg): the field named"
    op inspect "bad$i" >/dev/null 2>&1 && fail "case $i: the refused job was stored"
  done <<'CASES'
tasks[0].config.nmae|{"command": "x", "nmae": 1}
tasks[0].config.args|{"command": "x", "args": 5}
tasks[0].config.command|{}
tasks[0].config.auth|{"command": "x", "auth": [{"username": "a"}, {"username": "b"}]}
tasks[0].config.mount[0].target|{"command": "x", "mount": [{}]}
tasks[0].config.force_pull|{"command": "x", "force_pull": "yes"}
tasks[0].config.obj|{"command": "x", "obj": {"a": "s"}}
tasks[0].config.tup|{"command": "x", "tup": ["a"]}
tasks[0].config.mount|{"command": "x", "mount": [{"target": "1"}, {"target": "2"}, {"target": "3"}, {"target": "4"}, {"target": "5"}, {"target": "6"}, {"target": "7"}, {"target": "8"}, {"target": "9"}]}
tasks[0].config.port_map[0]|{"command": "x", "port_map": [{"http": "abc"}]}
tasks[0].config.ports|{"command": "x", "ports": {}}
tasks[0].config.volume[0].source|{"command": "x", "volume": [{"target": "/t"}]}
tasks[0].config.env_extra|{"command": "x", "env_extra": {"a": [1]}}
tasks[0].config.workers|{"command": "x", "workers": "many"}
tasks[0].config.image: given twice|{"command": "x", "image": "a", "image": "b"}
tasks[0].config.auth: given twice|{"command": "x", "auth": {"username": "a"}, "auth": {"password": "b"}}
CASES
  [ "$i" -eq 16 ] || fail "ran $i cases"
  # And one both take, stored and started.
  [ "$("$ND_GO" -decide '{"command": "exec sleep 600", "mount": {"target": "/one"}}')" = ok ] || fail "Nomad refuses the good case"
  python3 -c 'import json; print(json.dumps({"id": "good", "tasks": [{"name": "t", "driver": "godriver", "config": {"command": "exec sleep 600", "mount": {"target": "/one"}}}]}))' >"$T/good.json"
  expect_exit 0 op run -f "$T/good.json"
}
