# Kubelet device plugins hosted by the real agent (issue 43; docs/devices.md):
# tests/helpers/devices/test_device_plugin.py, a device plugin written for
# these tests (Python grpcio serving the kubelet's deviceplugin/v1beta1 and
# pluginregistration/v1 from proto/, behaving as the kubelet's sample
# plugin and NVIDIA's do), registers with the agent through
# <device_plugins_dir>/kubelet.sock ($T/kubelet/device-plugins) or through
# kubelet_plugins_dir ($T/kubelet/plugins_registry), and tasks ask for its
# devices with resources.devices. What the plugin was asked is read from its
# calls log ($T/NAME.calls, one JSON line per RPC and event); its devices,
# their health and its answers are changed live through its control file
# ($T/NAME.control). Stubs are generated into $T/stubs by each test.
# Skipped, with the reason, when /usr/bin/python3 lacks grpc or grpc_tools.
# Helpers are prefixed dv_.
#
# The agent's side these tests read (they fail until it lands):
#   outpost devices          RESOURCE  DEVICE  HEALTH  TASK  PLUGIN, one row
#                            per device; HEALTH healthy|unhealthy, TASK
#                            JOB/TASK or -
#   outpost --json devices   {"resources": [{"name", "endpoint", "connected",
#                            "devices": [{"id", "health", "task"}]}]}
#   outpost inspect J/T      a line "devices:    RESOURCE: ID, ID"
#   events                   device_plugin_registered, device_health,
#                            device_allocation_failed

DV_PY=/usr/bin/python3
DV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../helpers/devices" && pwd)"
DV_PROTO_DIR="$(cd "$DV_DIR/../../../proto" && pwd)"
DV_RES=example.com/dev

# dv_setup: skips the test (returns 1 after "skip: ...") without the Python
# modules; generates the stubs; kills the plugins (and whatever carries their
# environment) when the test ends, after the agent.
dv_setup() {
  if ! "$DV_PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null; then
    echo "skip: $DV_PY cannot import grpc and grpc_tools (python3-grpcio, python3-grpc-tools: tools/deps.sh test)"
    return 1
  fi
  mkdir -p "$T/stubs"
  "$DV_PY" -m grpc_tools.protoc -I"$DV_PROTO_DIR" --python_out="$T/stubs" --grpc_python_out="$T/stubs" \
    "$DV_PROTO_DIR"/{deviceplugin,pluginregistration}.proto >"$T/protoc.log" 2>&1 || fail "protoc: $(cat "$T/protoc.log")"
  export OUTPOST_TEST_DEVICE_STUBS="$T/stubs" OUTPOST_TEST_DEVICE_PROTO_DIR="$DV_PROTO_DIR"
  trap 'cleanup_agents; dv_cleanup' EXIT
}
dv_cleanup() {
  local p
  for p in $(grep -lsaF "OUTPOST_TEST_DEVICE_STUBS=$T/stubs" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    [ "$p" = "$$" ] || [ "$p" = "$BASHPID" ] || kill -9 "$p" 2>/dev/null
  done
}

# dv_start [EXTRA_CONFIG]: the agent (jobs.d, the kubelet dirs under $T),
# and its kubelet.sock there.
dv_start() {
  jt_start "${1:-}"
  wait_for 10 test -S "$T/kubelet/device-plugins/kubelet.sock" >/dev/null ||
    fail "no kubelet.sock in $T/kubelet/device-plugins: $(ls -la "$T/kubelet/device-plugins" 2>&1)"
}

# dv_plugin NAME [ARGS...]: the test plugin in the background, its socket
# NAME.sock, its calls log $T/NAME.calls, control file $T/NAME.control and
# stderr $T/NAME.log; ARGS after the defaults (--mode kubelet-sock,
# resource example.com/dev, device dev0). Its pid in DV_PID.
dv_plugin() {
  local name="$1"; shift
  "$DV_PY" "$DV_DIR/test_device_plugin.py" --dir "$T/kubelet/device-plugins" \
    --registry-dir "$T/kubelet/plugins_registry" --socket "$name.sock" \
    --calls "$T/$name.calls" --control "$T/$name.control" "$@" >>"$T/$name.log" 2>&1 &
  DV_PID=$!
  echo "$DV_PID" >>"$T/.pids"
}
dv_control() { printf '%s\n' "$2" >"$T/$1.control"; }

# dv_q MODE NAME [FIELD] FILTER...: the calls log of plugin NAME, the lines
# matching every FILTER: KEY=VALUE (a string field equal to VALUE, other
# fields equal as JSON: true, ["dev0"]), KEY!=VALUE, KEY~TEXT (contains).
# MODE count: how many; any: status 0 if one; field: FIELD of the last one.
dv_q() {
  "$DV_PY" - "$T" "$@" <<'PY'
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
dv_count_at_least() { [ "$(dv_q count "$1" "${@:3}")" -ge "$2" ]; }
dv_count_above() { [ "$(dv_q count "$1" "${@:3}")" -gt "$2" ]; }
dv_registered() { dv_q any "$1" event=register ok=true; }                               # kubelet.sock
dv_notified() { dv_q any "$1" rpc=NotifyRegistrationStatus plugin_registered=true; }    # plugins_registry
dv_calls() { tail -n "${2:-5}" "$T/$1.calls" 2>/dev/null | cut -c1-300; }

# dv_row RESOURCE DEVICE: its row of `outpost devices`; dv_col RESOURCE
# DEVICE N: its Nth column (3 HEALTH, 4 TASK).
dv_row() { op devices 2>/dev/null | awk -v r="$1" -v d="$2" '$1 == r && $2 == d'; }
dv_col() { dv_row "$1" "$2" | awk -v n="$3" '{print $n}'; }
dv_health_is() { [ "$(dv_col "$1" "$2" 3)" = "$3" ]; }
dv_holder_is() { [ "$(dv_col "$1" "$2" 4)" = "$3" ]; }
dv_no_row() { op devices >/dev/null 2>&1 && [ -z "$(dv_row "$1" "$2")" ]; }
# dv_resource RESOURCE FIELD: a field of the resource in `outpost --json
# devices` (name, endpoint, connected: true/false); status 1 if not listed.
dv_resource() {
  op --json devices 2>/dev/null | "$DV_PY" -c 'import json, sys
for r in json.load(sys.stdin)["resources"]:
    if r["name"] == sys.argv[1]:
        v = r[sys.argv[2]]
        print(json.dumps(v) if isinstance(v, bool) else v); break
else: sys.exit(1)' "$1" "$2"
}
dv_connected() { [ "$(dv_resource "$1" connected)" = true ]; }
dv_disconnected() { [ "$(dv_resource "$1" connected)" = false ]; }
dv_not_listed() { op --json devices >/dev/null 2>&1 && ! dv_resource "$1" name >/dev/null; }
# dv_json_device RESOURCE DEVICE FIELD: a device's field in `--json devices`.
dv_json_device() {
  op --json devices 2>/dev/null | "$DV_PY" -c 'import json, sys
for r in json.load(sys.stdin)["resources"]:
    for d in r["devices"] if r["name"] == sys.argv[1] else []:
        if d["id"] == sys.argv[2]:
            v = d[sys.argv[3]]; print("" if v is None else v); sys.exit(0)
sys.exit(1)' "$1" "$2" "$3"
}
# dv_event TYPE TEXT: an event of TYPE whose message contains TEXT.
dv_event() {
  op --json events 2>/dev/null | "$DV_PY" -c 'import json, sys
for line in sys.stdin:
    line = line.strip()
    if line:
        e = json.loads(line)
        if e.get("type") == sys.argv[1] and sys.argv[2] in e.get("message", ""): sys.exit(0)
sys.exit(1)' "$1" "$2"
}
dv_events_of() { op --json events 2>/dev/null | grep -F "\"$1\"" | tail -n 5; }

# dv_task NAME COUNT CMD [ARGS...]: a task asking COUNT devices of
# ${DV_RESOURCE:-example.com/dev}, with the members DV_EXTRA.
dv_task() {
  local name="$1" n="$2"; shift 2
  JT_EXTRA="\"resources\": {\"devices\": {\"${DV_RESOURCE:-$DV_RES}\": $n}}${DV_EXTRA:+, $DV_EXTRA}" jt_task "$name" "$@"
}
# dv_submit JOB TASK_JSON: submitted, not waited for.
dv_submit() {
  jt_job "$1" "$2" >"$T/$1.json"
  op run -f "$T/$1.json" --detach >"$T/$1.run" 2>&1 || fail "run $1: $(cat "$T/$1.run")"
}
dv_reason_has() { jt_tfield "$1" reason 2>/dev/null | grep -qF -- "$2"; }
# dv_up NAME [ARGS...]: dv_plugin, registered through kubelet.sock, its
# devices listed (the last one of --devices, default dev0, in `outpost devices`).
dv_up() {
  dv_plugin "$@"
  local name="$1"
  wait_for 20 dv_registered "$name" >/dev/null || fail "$name not registered: $(dv_calls "$name"); $(tail -n 3 "$T/$name.log")"
  local devs="dev0" res="$DV_RES" a prev=""
  for a in "${@:2}"; do
    [ "$prev" = --devices ] && devs="$a"
    [ "$prev" = --resource ] && res="$a"
    prev="$a"
  done
  local last="${devs##*,}"
  last="${last%%@*}"; last="${last%%:*}"
  wait_for 10 dv_row "$res" "$last" >/dev/null || fail "$res $last not in outpost devices: $(op devices 2>&1)"
}
dv_sorted() { tr ',' '\n' | sort | paste -sd, -; }
dv_logs_have() { op logs "$1" 2>/dev/null | grep -qF -- "$2"; }

# ---------------------------------------------------------------------------

# The plugin itself, without outpost: the fake kubelet plays the kubelet's
# device manager and plugin watcher against it in its three modes.
test_devices_test_plugin_passes_the_fake_kubelet() {
  dv_setup || return 0
  local out rc=0
  out="$("$DV_PY" "$DV_DIR/fake_kubelet.py" --work "$T/fake" --stubs "$T/stubs" 2>&1)" || rc=$?
  # The failed checks first: a summary line shows only the start of a message.
  [ "$rc" = 0 ] || fail "fake_kubelet.py exited $rc: $(grep -E '^FAIL|Traceback|Error' <<<"$out" | head -5) -- whole output: $out"
  expect_contains "$out" " passed, 0 failed" "fake kubelet summary"
}

# Register on kubelet.sock, as the kubelet's sample plugin and NVIDIA's do:
# the endpoint relative to the dir, GetDevicePluginOptions inside the call,
# then ListAndWatch; the devices in `outpost devices`.
test_devices_kubelet_sock_registration_lists_the_devices() {
  dv_setup || return 0
  dv_start
  local dp="$T/kubelet/device-plugins"
  # The kubelet's stub skips Register when the dir holds a DEPRECATION file.
  [ ! -e "$dp/DEPRECATION" ] || fail "the agent made $dp/DEPRECATION: stock plugins built on the kubelet's stub then never register"
  dv_up dp --devices "dev0,dev1@0"
  dv_q any dp rpc=GetDevicePluginOptions || fail "no GetDevicePluginOptions: $(dv_calls dp)"
  local opts reg
  opts="$(dv_q field dp mono_ns rpc=GetDevicePluginOptions)"
  reg="$(dv_q field dp mono_ns event=register ok=true)"
  [ "$opts" -lt "$reg" ] || fail "GetDevicePluginOptions came after Register returned (the kubelet calls it inside Register)"
  expect_eq "$(dv_q field dp endpoint event=register ok=true)" "dp.sock" "the endpoint sent"
  wait_for 10 dv_q any dp rpc=ListAndWatch >/dev/null || fail "no ListAndWatch: $(dv_calls dp)"
  wait_for 10 dv_health_is $DV_RES dev1 healthy || fail "dev1 not healthy: $(op devices 2>&1)"
  expect_exit 0 op devices
  printf '%s\n' "$OUT" | head -n 1 | grep -qE '^RESOURCE +DEVICE +HEALTH +TASK +PLUGIN *$' || fail "header: $OUT"
  [ "$(printf '%s\n' "$OUT" | awk -v r=$DV_RES '$1 == r' | wc -l)" = 2 ] || fail "not one row per device: $OUT"
  expect_eq "$(dv_row $DV_RES dev0 | awk '{print $3, $4}')" "healthy -" "dev0: healthy, held by no task"
  expect_eq "$(dv_resource $DV_RES endpoint)" "$dp/dp.sock" "the endpoint in --json devices"
  expect_eq "$(dv_resource $DV_RES connected)" true "connected"
  expect_eq "$(dv_json_device $DV_RES dev1 health)" healthy "dev1's health in --json"
  wait_for 10 dv_event device_plugin_registered $DV_RES >/dev/null || fail "no device_plugin_registered event: $(op events 2>&1 | tail -n 5)"
}

# A board boots the plugin before the agent: it waits for the dir and
# kubelet.sock and registers once the agent made them.
test_devices_plugin_started_before_the_agent_registers_once_kubelet_sock_appears() {
  dv_setup || return 0
  dv_plugin early --devices dev0
  wait_for 20 dv_q any early event=launch >/dev/null || fail "the plugin did not start: $(cat "$T/early.log")"
  dv_registered early && fail "registered with no agent running"
  dv_start
  wait_for 20 dv_registered early >/dev/null || fail "not registered once the agent was up: $(dv_calls early); $(tail -n 3 "$T/early.log")"
  wait_for 10 dv_health_is $DV_RES dev0 healthy || fail "dev0 not listed healthy: $(op devices 2>&1)"
}

# The pluginwatcher path: a registration socket in kubelet_plugins_dir
# answering GetInfo with type DevicePlugin, its service on another socket
# (absolute endpoint) or on the same one (empty endpoint).
test_devices_registry_registration_with_a_separate_and_the_same_socket() {
  dv_setup || return 0
  dv_start
  mkdir -m 0750 "$T/dp-sockets"
  dv_plugin rg --mode registry --socket-dir "$T/dp-sockets" --registry-socket rg.sock --resource example.com/rg --devices a,b
  local rg=$DV_PID
  dv_plugin ss --mode registry-same-socket --registry-socket ss.sock --resource example.com/ss --devices c
  wait_for 20 dv_notified rg >/dev/null || fail "rg: no NotifyRegistrationStatus(true): $(dv_calls rg); $(op plugins 2>&1)"
  wait_for 20 dv_notified ss >/dev/null || fail "ss: no NotifyRegistrationStatus(true): $(dv_calls ss); $(op plugins 2>&1)"
  local n
  for n in rg ss; do
    dv_q any $n rpc=GetInfo || fail "$n: no GetInfo"
    dv_q any $n rpc=GetDevicePluginOptions || fail "$n: no GetDevicePluginOptions"
    wait_for 10 dv_q any $n rpc=ListAndWatch >/dev/null || fail "$n: no ListAndWatch"
  done
  wait_for 10 dv_health_is example.com/rg b healthy || fail "rg's devices: $(op devices 2>&1)"
  wait_for 10 dv_health_is example.com/ss c healthy || fail "ss's devices: $(op devices 2>&1)"
  expect_eq "$(dv_resource example.com/rg endpoint)" "$T/dp-sockets/rg.sock" "rg: the endpoint GetInfo gave"
  expect_eq "$(dv_resource example.com/ss endpoint)" "$T/kubelet/plugins_registry/ss.sock" "ss: the registration socket itself"
  wait_for 10 dv_event device_plugin_registered example.com/rg >/dev/null || fail "no device_plugin_registered event for rg"
  dv_event device_plugin_registered example.com/ss || fail "no device_plugin_registered event for ss"
  # One registration engine for both transports: outpost plugins lists it.
  op --json plugins | "$DV_PY" -c 'import json, sys
ps = [p for p in json.load(sys.stdin)["plugins"] if p["type"] == "DevicePlugin" and p["name"] == "example.com/rg"]
assert ps and any(i["connected"] for i in ps[0]["instances"]), ps' || fail "outpost plugins: $(op plugins 2>&1)"
  # The registration socket removed (the plugin stops): deregistered, its
  # devices unhealthy at once, as when the kubelet's stream ends.
  kill -TERM "$rg"
  wait_gone "$rg" 10 || fail "rg did not stop"
  wait_for 10 dv_disconnected example.com/rg >/dev/null || fail "rg still connected: $(op --json devices 2>&1)"
  dv_health_is example.com/rg a unhealthy || fail "rg's devices not unhealthy: $(op devices 2>&1)"
  dv_health_is example.com/ss c healthy || fail "the other plugin's devices changed: $(op devices 2>&1)"
}

# Register refused in the kubelet's order and words; the pluginwatcher path
# refused in ValidatePlugin's.
test_devices_registration_is_refused_with_the_kubelets_words() {
  dv_setup || return 0
  dv_start
  dv_plugin bv --resource example.com/bv --register-version v1
  dv_plugin bn --resource x
  dv_plugin be --resource example.com/be --register-endpoint ../escape.sock
  dv_plugin rv --mode registry-same-socket --registry-socket rv.sock --resource example.com/rv --info-versions v1,v2
  dv_plugin rn --mode registry-same-socket --registry-socket rn.sock --resource example.com/rn --info-name x
  local n
  for n in bv bn be; do
    wait_for 20 dv_q any $n event=register ok=false >/dev/null || fail "$n: Register not refused: $(dv_calls $n)"
  done
  expect_eq "$(dv_q field bv error event=register ok=false)" \
    'requested API version "v1" is not supported by kubelet. Supported version is ["v1beta1"]' "the version's refusal"
  expect_eq "$(dv_q field bv code event=register ok=false)" UNKNOWN "its status code (a Go error)"
  expect_eq "$(dv_q field bn error event=register ok=false)" 'the ResourceName "x" is invalid' "the name's refusal"
  expect_contains "$(dv_q field be error event=register ok=false)" "../escape.sock" "an endpoint leading out of the dir, named"
  dv_q any be rpc=GetDevicePluginOptions && fail "the agent dialled an endpoint leading out of its dir"
  for n in rv rn; do
    wait_for 20 dv_q any $n rpc=NotifyRegistrationStatus plugin_registered=false >/dev/null ||
      fail "$n: not told it was refused: $(dv_calls $n)"
  done
  expect_contains "$(dv_q field rv error rpc=NotifyRegistrationStatus)" \
    "manager version, v1beta1, is not among plugin supported versions [v1 v2]" "the versions' refusal"
  expect_contains "$(dv_q field rn error rpc=NotifyRegistrationStatus)" \
    'invalid name of device plugin socket: the ResourceName "x" is invalid' "the name's refusal"
  for n in example.com/bv x example.com/be example.com/rv example.com/rn; do
    dv_not_listed "$n" || fail "refused $n listed: $(op devices 2>&1)"
  done
}

# CSI and DRA plugins in kubelet_plugins_dir: no handler, told so in the
# kubelet's words, retried while the socket is there, and shown as waiting
# sockets in `outpost plugins`.
test_devices_csi_and_dra_plugins_are_refused_and_retried() {
  dv_setup || return 0
  dv_start
  dv_plugin csi --mode registry-same-socket --registry-socket csi.sock --resource example.com/csi --info-type CSIPlugin
  dv_plugin dra --mode registry-same-socket --registry-socket dra.sock --resource example.com/dra --info-type DRAPlugin
  local n t
  for n in csi dra; do
    t=CSIPlugin; [ $n = dra ] && t=DRAPlugin
    wait_for 20 dv_q any $n rpc=NotifyRegistrationStatus plugin_registered=false >/dev/null ||
      fail "$n: not told: $(dv_calls $n)"
    expect_contains "$(dv_q field $n error rpc=NotifyRegistrationStatus)" "no handler registered for plugin type" "$n: why"
    expect_contains "$(dv_q field $n error rpc=NotifyRegistrationStatus)" "$t" "$n: the type named"
    wait_for 15 dv_count_at_least $n 2 rpc=NotifyRegistrationStatus plugin_registered=false >/dev/null ||
      fail "$n: the refused registration was not retried"
    op --json plugins | "$DV_PY" -c 'import json, sys
s = [s for s in json.load(sys.stdin)["sockets"] if s["path"] == sys.argv[1]]
assert s and "no handler registered for plugin type" in (s[0]["last_error"] or "") and sys.argv[2] in s[0]["last_error"], s' \
      "$T/kubelet/plugins_registry/$n.sock" "$t" || fail "$n: not a waiting socket with its error: $(op plugins 2>&1)"
    dv_not_listed example.com/$n || fail "$n listed as a resource: $(op devices 2>&1)"
  done
  expect_exit 0 op plugins
  expect_contains "$OUT" "$T/kubelet/plugins_registry/csi.sock" "outpost plugins names the CSI socket"
}

# ListAndWatch: every message is the whole list; a device is healthy only
# when its health is exactly "Healthy"; changes show at once.
test_devices_health_flips_show_in_outpost_devices() {
  dv_setup || return 0
  dv_start
  dv_up hp --devices dev0,dev1
  wait_for 10 dv_health_is $DV_RES dev1 healthy || fail "dev1 not healthy: $(op devices 2>&1)"
  dv_control hp "--devices dev0,dev1:Unhealthy"
  wait_for 10 dv_health_is $DV_RES dev1 unhealthy || fail "dev1 not unhealthy: $(op devices 2>&1)"
  dv_health_is $DV_RES dev0 healthy || fail "dev0 changed: $(op devices 2>&1)"
  expect_eq "$(dv_json_device $DV_RES dev1 health)" unhealthy "dev1 in --json"
  wait_for 10 dv_event device_health dev1 >/dev/null || fail "no device_health event for dev1: $(dv_events_of device_health)"
  dv_control hp "--devices dev0,dev1"
  wait_for 10 dv_health_is $DV_RES dev1 healthy || fail "dev1 not healthy again: $(op devices 2>&1)"
  # Anything but exactly "Healthy" is unhealthy (the kubelet's rule).
  dv_control hp "--devices dev0:healthy,dev1"
  wait_for 10 dv_health_is $DV_RES dev0 unhealthy || fail "\"healthy\" taken as Healthy: $(op devices 2>&1)"
  # A device left out of the list is gone; a new one appears.
  dv_control hp "--devices dev1,dev2"
  wait_for 10 dv_health_is $DV_RES dev2 healthy || fail "dev2 not listed: $(op devices 2>&1)"
  dv_no_row $DV_RES dev0 || fail "dev0 still listed: $(op devices 2>&1)"
}

# The plugin dies (kill -9: its stream ends): its devices turn unhealthy,
# a task holding one keeps it; started again, it registers again and the
# devices are healthy again.
test_devices_plugin_restart_re_registers_and_the_devices_are_healthy_again() {
  dv_setup || return 0
  dv_start
  dv_up rp --devices dev0,dev1
  dv_submit a "$(dv_task t 1 "$HELPER" sleep 600)"
  local pid; pid="$(wait_for 20 jt_running_pid a/t)" || fail "a/t not running: $(op inspect a 2>&1)"
  wait_for 10 dv_holder_is $DV_RES dev0 a/t || fail "a/t holds no dev0: $(op devices 2>&1)"
  kill -9 "$DV_PID"
  wait_for 10 dv_disconnected $DV_RES >/dev/null || fail "still connected: $(op --json devices 2>&1)"
  wait_for 10 dv_health_is $DV_RES dev1 unhealthy || fail "devices not unhealthy: $(op devices 2>&1)"
  dv_health_is $DV_RES dev0 unhealthy || fail "dev0 not unhealthy: $(op devices 2>&1)"
  dv_holder_is $DV_RES dev0 a/t || fail "a/t lost its device with the plugin: $(op devices 2>&1)"
  proc_alive "$pid" || fail "a/t died with the plugin"
  local regs; regs="$(dv_q count rp event=register ok=true)"
  dv_plugin rp --devices dev0,dev1
  wait_for 20 dv_count_above rp "$regs" event=register ok=true >/dev/null || fail "not registered again: $(dv_calls rp)"
  wait_for 10 dv_health_is $DV_RES dev0 healthy || fail "dev0 not healthy again: $(op devices 2>&1)"
  wait_for 10 dv_health_is $DV_RES dev1 healthy || fail "dev1 not healthy again: $(op devices 2>&1)"
  dv_connected $DV_RES || fail "not connected again: $(op --json devices 2>&1)"
  dv_holder_is $DV_RES dev0 a/t || fail "a/t lost its device: $(op devices 2>&1)"
  expect_eq "$(jt_running_pid a/t)" "$pid" "a/t ran on"
  expect_eq "$(dv_q count rp rpc=Allocate)" 1 "no Allocate for a task that holds its device"
}

# The agent restarts: kubelet.sock is made again, the plugin (watching the
# dir, as NVIDIA's does) registers again; a running task keeps its device
# (the checkpoint), and a task waiting for the only device keeps waiting.
test_devices_agent_restart_keeps_allocations_and_the_plugin_registers_again() {
  dv_setup || return 0
  dv_start
  dv_up ar --devices dev0
  dv_submit a "$(dv_task t 1 "$HELPER" sleep 600)"
  local pid; pid="$(wait_for 20 jt_running_pid a/t)" || fail "a/t not running: $(op inspect a 2>&1)"
  dv_submit b "$(dv_task t 1 "$HELPER" sleep 600)"
  wait_for 10 dv_reason_has b/t "resource $DV_RES: 0 of 1 healthy devices free, 1 needed" ||
    fail "b/t does not wait for the device: $(op inspect b 2>&1)"
  local regs created
  regs="$(dv_q count ar event=register ok=true)"
  created="$(dv_q count ar event=restart "why=kubelet.sock created")"
  kill -TERM "$AGENT_PID"
  wait_gone "$AGENT_PID" 20 || fail "the agent did not stop"
  start_agent
  wait_for 20 dv_count_above ar "$created" event=restart "why=kubelet.sock created" >/dev/null ||
    fail "the plugin did not see kubelet.sock made again: $(dv_calls ar)"
  wait_for 20 dv_count_above ar "$regs" event=register ok=true >/dev/null || fail "not registered again: $(dv_calls ar)"
  wait_for 10 dv_health_is $DV_RES dev0 healthy || fail "dev0 not healthy after the restart: $(op devices 2>&1)"
  dv_holder_is $DV_RES dev0 a/t || fail "a/t lost its device across the agent restart: $(op devices 2>&1)"
  expect_eq "$(jt_running_pid a/t)" "$pid" "a/t ran on"
  wait_for 10 dv_reason_has b/t "resource $DV_RES: 0 of 1 healthy devices free, 1 needed" ||
    fail "b/t does not wait after the restart: $(op inspect b 2>&1)"
  jt_tstate_is b/t pending || fail "b/t is not pending: $(op inspect b 2>&1)"
  expect_eq "$(dv_q count ar rpc=Allocate)" 1 "one Allocate: the device was not given again"
}

# Too few healthy devices: the task waits, pending, saying why, and starts
# once there are enough; no plugin for its resource: it waits too.
test_devices_too_few_devices_the_task_waits_then_starts() {
  dv_setup || return 0
  dv_start
  dv_up tf --devices dev0,dev1:Unhealthy
  wait_for 10 dv_health_is $DV_RES dev1 unhealthy || fail "dev1 not unhealthy: $(op devices 2>&1)"
  dv_submit w "$(dv_task t 2 "$HELPER" sleep 600)"
  wait_for 10 dv_reason_has w/t "resource $DV_RES: 1 of 1 healthy devices free, 2 needed" ||
    fail "w/t does not say why it waits: $(op inspect w 2>&1)"
  jt_tstate_is w/t pending || fail "w/t not pending: $(op inspect w 2>&1)"
  expect_exit 0 op inspect w
  expect_contains "$OUT" "resource $DV_RES: 1 of 1 healthy devices free, 2 needed" "the NOTE of inspect"
  local DV_RESOURCE=example.com/none
  dv_submit n "$(dv_task t 1 "$HELPER" sleep 600)"
  wait_for 10 dv_reason_has n/t "no device plugin for resource example.com/none" || fail "n/t: $(op inspect n 2>&1)"
  DV_RESOURCE=$DV_RES
  expect_eq "$(dv_q count tf rpc=Allocate)" 0 "no Allocate while too few"
  dv_control tf "--devices dev0,dev1"
  wait_for 20 jt_tstate_is w/t running || fail "w/t did not start once dev1 turned healthy: $(op inspect w 2>&1)"
  expect_eq "$(dv_q count tf rpc=Allocate)" 1 "one Allocate"
  expect_eq "$(dv_q field tf devices_ids rpc=Allocate | tr -d '[]" ' | dv_sorted)" "dev0,dev1" "both devices allocated"
  expect_exit 0 op inspect w/t
  expect_contains "$OUT" "devices:    $DV_RES: dev0, dev1" "inspect shows the task's devices"
  dv_holder_is $DV_RES dev0 w/t && dv_holder_is $DV_RES dev1 w/t || fail "the holder: $(op devices 2>&1)"
  expect_eq "$(dv_q count tf rpc=PreStartContainer)" 0 "no PreStartContainer unless the options ask"
}

# Allocate fails: the start fails with the plugin's message, and nothing is
# allocated (the device is free for the next task).
test_devices_allocate_failure_fails_the_start_with_the_plugins_message() {
  dv_setup || return 0
  dv_start
  dv_up af --devices dev0
  dv_control af "--allocate-fail 'dev0: firmware not loaded'"
  local DV_EXTRA='"restart": {"policy": "never"}'
  dv_submit f "$(dv_task t 1 "$HELPER" sleep 600)"
  wait_for 20 jt_events_contain f/t "dev0: firmware not loaded" || fail "the plugin's message is not in the events: $(op events f/t 2>&1)"
  wait_for 10 dv_event device_allocation_failed "dev0: firmware not loaded" >/dev/null ||
    fail "no device_allocation_failed event: $(dv_events_of device_allocation_failed)"
  jt_running_pid f/t >/dev/null && fail "f/t runs without its device"
  expect_exit 0 op inspect f
  expect_contains "$OUT" "dev0: firmware not loaded" "inspect says why"
  dv_holder_is $DV_RES dev0 - || fail "dev0 held after a failed Allocate: $(op devices 2>&1)"
  dv_control af ""
  DV_EXTRA=
  dv_submit g "$(dv_task t 1 "$HELPER" sleep 600)"
  wait_for 20 jt_running_pid g/t >/dev/null || fail "g/t did not get the device: $(op inspect g 2>&1)"
  dv_holder_is $DV_RES dev0 g/t || fail "dev0 not g's: $(op devices 2>&1)"
}

# PreStartContainer (asked for by the options) before every start, the
# restarts included, with the task's devices; Allocate once.
test_devices_pre_start_container_before_every_start() {
  dv_setup || return 0
  dv_start
  dv_up ps --devices dev0 --pre-start
  mkdir "$T/stamps"
  local DV_EXTRA='"restart": {"policy": "on-failure", "attempts": 2, "delay": "0s", "interval": "1m"}'
  dv_submit p "$(dv_task t 1 /bin/sh -c "$HELPER timestamp $T/stamps/\$\$; exit 1")"
  wait_for 30 jt_events_contain p/t "restart limit reached" || fail "p/t did not run its 3 starts: $(op events p/t 2>&1)"
  expect_eq "$(ls "$T/stamps" | wc -l)" 3 "three starts"
  expect_eq "$(dv_q count ps rpc=PreStartContainer)" 3 "one PreStartContainer per start"
  expect_eq "$(dv_q count ps rpc=PreStartContainer 'devices_ids=["dev0"]')" 3 "each with the task's devices"
  expect_eq "$(dv_q count ps rpc=Allocate)" 1 "Allocate once: the device is kept across restarts"
  # Each call before its start, and after the previous one.
  "$DV_PY" - "$T/ps.calls" "$T"/stamps/* <<'PY' || fail "PreStartContainer not before every start"
import json, sys
pre = sorted(json.loads(l)["mono_ns"] for l in open(sys.argv[1]) if '"PreStartContainer"' in l)
alloc = [json.loads(l)["mono_ns"] for l in open(sys.argv[1]) if '"rpc": "Allocate"' in l]
starts = sorted(int(open(f).read()) for f in sys.argv[2:])
assert alloc[0] < pre[0], (alloc, pre)
for i, (p, s) in enumerate(zip(pre, starts)):
    assert p < s and (i == 0 or starts[i - 1] < p), (pre, starts)
PY
}

# GetPreferredAllocation (offered by the options) chooses, among the
# available devices, in the plugin's order.
test_devices_preferred_allocation_is_honoured() {
  dv_setup || return 0
  dv_start
  dv_up pa --devices dev0,dev1,dev2,dev3 --preferred dev2,dev0,dev3,dev1
  dv_submit p "$(dv_task t 2 "$HELPER" sleep 600)"
  wait_for 20 jt_running_pid p/t >/dev/null || fail "p/t not running: $(op inspect p 2>&1)"
  expect_eq "$(dv_q field pa available rpc=GetPreferredAllocation | tr -d '[]" ' | dv_sorted)" "dev0,dev1,dev2,dev3" "available"
  expect_eq "$(dv_q field pa allocation_size rpc=GetPreferredAllocation)" 2 "allocation_size"
  expect_eq "$(dv_q field pa must_include rpc=GetPreferredAllocation)" "[]" "must_include"
  expect_eq "$(dv_q field pa devices_ids rpc=Allocate)" '["dev2", "dev0"]' "Allocate with the plugin's choice"
  local d
  for d in dev2 dev0; do dv_holder_is $DV_RES $d p/t || fail "$d not p's: $(op devices 2>&1)"; done
  for d in dev1 dev3; do dv_holder_is $DV_RES $d - || fail "$d taken: $(op devices 2>&1)"; done
  dv_submit q "$(dv_task t 1 "$HELPER" sleep 600)"
  wait_for 20 jt_running_pid q/t >/dev/null || fail "q/t not running: $(op inspect q 2>&1)"
  expect_eq "$(dv_q field pa available rpc=GetPreferredAllocation | tr -d '[]" ' | dv_sorted)" "dev1,dev3" "only the free ones offered"
  expect_eq "$(dv_q field pa devices_ids rpc=Allocate)" '["dev3"]' "the second task's Allocate"
}

# The plugin's answer reaches an exec task: envs in its environment (its own
# env wins), mounts and device nodes with the same path inside and out
# accepted, annotations and the devices in `outpost inspect`.
test_devices_allocate_response_reaches_an_exec_task() {
  dv_setup || return 0
  dv_start
  mkdir "$T/data"
  echo "data-seen" >"$T/data/file"
  dv_up ev --devices dev0 --envs "DEV_IDS={ids},DEV_STATIC=plugin,DEV_OTHER=x" \
    --annotations "example.com/dev-ids=ids-{ids}" --mounts "$T/data:$T/data:ro" --device-nodes "/dev/null:/dev/null:rw"
  local DV_EXTRA='"env": {"DEV_STATIC": "task"}'
  dv_submit e "$(dv_task t 1 /bin/sh -c "env; cat $T/data/file; exec sleep 600")"
  local pid; pid="$(wait_for 20 jt_running_pid e/t)" || fail "e/t not running: $(op inspect e 2>&1)"
  local env; env="$(tr '\0' '\n' <"/proc/$pid/environ")"
  expect_contains "$env" "DEV_IDS=dev0" "the plugin's env"
  expect_contains "$env" "DEV_OTHER=x" "the plugin's env"
  expect_contains "$env" "DEV_STATIC=task" "the task's own env wins"
  expect_not_contains "$env" "DEV_STATIC=plugin" "the task's own env wins"
  wait_for 10 dv_logs_have e/t "DEV_IDS=dev0" || fail "the env is not in the task's output: $(op logs e/t 2>&1)"
  wait_for 10 dv_logs_have e/t "data-seen" || fail "the mount's file: $(op logs e/t 2>&1)"
  expect_exit 0 op inspect e/t
  expect_contains "$OUT" "devices:    $DV_RES: dev0" "inspect's devices line"
  expect_contains "$OUT" "example.com/dev-ids=ids-dev0" "inspect shows the plugin's annotation"
  expect_eq "$(dv_q field ev response rpc=Allocate | "$DV_PY" -c 'import json,sys; r=json.load(sys.stdin); print(len(r["mounts"]), len(r["devices"]))')" \
    "1 1" "the answer had a mount and a device"
}

# NRI plugins see the plugin's annotations and envs in CreateContainer (the
# devices step runs before it).
test_devices_nri_sees_the_annotations_and_envs() {
  dv_setup || return 0
  mkdir -p "$T/jobs.d"
  nr_start
  wait_for 10 test -S "$T/kubelet/device-plugins/kubelet.sock" >/dev/null || fail "no kubelet.sock"
  nr_plugin 10 seen -events CreateContainer >/dev/null
  wait_for 10 nr_ready seen || fail "the NRI plugin is not ready: $(op nri 2>&1)"
  dv_up nv --devices dev0 --envs "DEV_IDS={ids}" --annotations "example.com/dev-ids=ids-{ids}"
  dv_submit n "$(dv_task t 1 "$HELPER" sleep 600)"
  wait_for 20 jt_running_pid n/t >/dev/null || fail "n/t not running: $(op inspect n 2>&1)"
  wait_for 10 nr_logged seen "^CreateContainer t " || fail "no CreateContainer: $(cat "$T/seen.log" 2>&1)"
  local line; line="$(grep '^CreateContainer t ' "$T/seen.log")"
  expect_contains "$line" "example.com/dev-ids=ids-dev0" "the annotation in CreateContainer"
  expect_contains "$line" "DEV_IDS=dev0" "the env in CreateContainer"
}

# The exec driver runs tasks in the host's mount namespace: a device node or
# mount whose path inside differs from the host's is refused by field. The
# task, waiting for its next start, keeps its device and is named JOB/TASK
# as its holder (as a running one is, not by its internal id); stopped, it
# frees it.
test_devices_exec_driver_refuses_paths_that_differ() {
  dv_setup || return 0
  dv_start
  dv_up dd --devices dev0 --device-nodes "/dev/null:/dev/nullx:rw"
  local DV_EXTRA='"restart": {"policy": "always", "delay": "10m"}'
  dv_submit d "$(dv_task t 1 "$HELPER" sleep 600)"
  wait_for 20 jt_events_contain d/t \
    "devices[0]: host_path /dev/null and container_path /dev/nullx differ: the exec driver runs tasks in the host's mount namespace" ||
    fail "no refusal naming the field: $(op events d/t 2>&1)"
  jt_tstate_is d/t backoff || fail "d/t is not waiting for its restart: $(op inspect d/t 2>&1)"
  dv_holder_is $DV_RES dev0 d/t || fail "dev0's holder is not d/t: $(op devices 2>&1)"
  expect_eq "$(dv_json_device $DV_RES dev0 task)" d/t "--json devices names the holder JOB/TASK"
  expect_exit 0 op stop d
  wait_for 10 dv_holder_is $DV_RES dev0 - || fail "dev0 not freed once d/t ended for good: $(op devices 2>&1)"
  mkdir "$T/a"
  dv_control dd "--device-nodes '' --mounts $T/a:$T/b"
  DV_EXTRA='"restart": {"policy": "never"}'
  dv_submit m "$(dv_task t 1 "$HELPER" sleep 600)"
  wait_for 20 jt_events_contain m/t "mounts[0]: host_path $T/a and container_path $T/b differ" ||
    fail "no refusal naming the mount: $(op events m/t 2>&1)"
}

# A task keeps its devices across its restarts (the same IDs, no second
# Allocate) and frees them when removed: the next task takes them.
test_devices_kept_across_restarts_and_freed_when_removed() {
  dv_setup || return 0
  dv_start
  dv_up kr --devices dev0
  local DV_EXTRA='"restart": {"policy": "always", "delay": "0s"}'
  dv_submit a "$(dv_task t 1 "$HELPER" sleep 600)"
  local pid; pid="$(wait_for 20 jt_running_pid a/t)" || fail "a/t not running: $(op inspect a 2>&1)"
  DV_EXTRA=
  dv_submit b "$(dv_task t 1 "$HELPER" sleep 600)"
  wait_for 10 dv_reason_has b/t "0 of 1 healthy devices free, 1 needed" || fail "b/t does not wait: $(op inspect b 2>&1)"
  kill -9 "$pid"
  wait_for 20 jt_pid_changed a/t "$pid" >/dev/null || fail "a/t not restarted: $(op events a/t 2>&1)"
  dv_holder_is $DV_RES dev0 a/t || fail "a/t lost its device in the restart: $(op devices 2>&1)"
  expect_eq "$(dv_q count kr rpc=Allocate)" 1 "no second Allocate for a restart"
  jt_tstate_is b/t pending || fail "b/t got the device during a's restart: $(op inspect b 2>&1)"
  expect_exit 0 op inspect a/t
  expect_contains "$OUT" "devices:    $DV_RES: dev0" "a/t's devices"
  expect_exit 0 op rm a
  wait_for 20 jt_running_pid b/t >/dev/null || fail "b/t did not take the freed device: $(op inspect b 2>&1); $(op devices 2>&1)"
  dv_holder_is $DV_RES dev0 b/t || fail "dev0 not b's: $(op devices 2>&1)"
  expect_eq "$(dv_q count kr rpc=Allocate)" 2 "b's Allocate"
}

# ---- grpc-go ---------------------------------------------------------------

# dv_go_plugin NAME ARGS...: tests/helpers/go/device_plugin (grpc-go, as
# stock device plugins) in the background, its calls log $T/NAME.calls; pid
# in DV_PID. dv_go_available says why it is skipped when it is not built.
dv_go_available() {
  DV_GO="$(dirname "$OUTPOST")/go/device_plugin"
  [ -x "$DV_GO" ] && return 0
  echo "skip: $DV_GO not built (make go-peers; tools/deps.sh test installs Debian's Go packages)"
  return 1
}
dv_go_plugin() {
  local name="$1"; shift
  "$DV_GO" -dir "$T/kubelet/device-plugins" -socket "$name.sock" -calls "$T/$name.calls" "$@" >>"$T/$name.log" 2>&1 &
  DV_PID=$!
  echo "$DV_PID" >>"$T/.pids"
}
dv_go_called() { grep -qxF -- "$2" "$T/$1.calls" 2>/dev/null; }

# A device plugin on grpc-go: its Register on kubelet.sock (grpc-go's client
# against outpost's server), the plugin watcher's GetInfo and
# NotifyRegistrationStatus, and a task's start through its server
# (ListAndWatch, GetPreferredAllocation, Allocate, PreStartContainer), a
# health flip on the open stream.
test_devices_grpc_go_plugin_registers_both_ways_and_serves_a_task() {
  dv_go_available || return 0
  mkdir -p "$T/kubelet/plugins_registry"
  dv_start
  dv_go_plugin go -resource example.com/go
  local pid=$DV_PID
  wait_for 20 dv_go_called go "Register ok" || fail "no Register: $(cat "$T/go.calls" "$T/go.log" 2>&1)"
  wait_for 10 dv_row example.com/go dev1 >/dev/null || fail "example.com/go not listed: $(op devices 2>&1)"
  dv_go_called go ListAndWatch || fail "no ListAndWatch: $(cat "$T/go.calls")"
  DV_RESOURCE=example.com/go dv_submit g "$(DV_RESOURCE=example.com/go dv_task t 1 /bin/sh -c 'echo ids=$GO_DEV_IDS; exec sleep 600')"
  wait_for 20 jt_running_pid g/t >/dev/null || fail "g/t not running: $(op inspect g/t 2>&1); $(cat "$T/go.calls")"
  wait_for 10 dv_logs_have g/t "ids=dev1" || fail "the task did not get Allocate's env: $(op logs g/t 2>&1)"
  dv_go_called go "GetPreferredAllocation dev0 dev1" || fail "no preferred allocation asked: $(cat "$T/go.calls")"
  dv_go_called go "Allocate dev1" || fail "not the preferred device allocated: $(cat "$T/go.calls")"
  dv_go_called go "PreStartContainer dev1" || fail "no PreStartContainer: $(cat "$T/go.calls")"
  dv_holder_is example.com/go dev1 g/t || fail "dev1 not g/t's: $(op devices 2>&1)"
  expect_contains "$(op inspect g/t)" "example.com/go-ids=dev1" "Allocate's annotation on the task"
  kill -USR1 "$pid"
  wait_for 10 dv_health_is example.com/go dev0 unhealthy || fail "the health flip not seen: $(op devices 2>&1)"
  dv_go_plugin reg -resource example.com/goreg -registry "$T/kubelet/plugins_registry"
  wait_for 20 dv_go_called reg "NotifyRegistrationStatus registered=true " ||
    fail "not registered through plugins_registry: $(cat "$T/reg.calls" "$T/reg.log" 2>&1)"
  wait_for 10 dv_health_is example.com/goreg dev0 healthy || fail "example.com/goreg not listed: $(op devices 2>&1)"
  expect_eq "$(dv_resource example.com/goreg endpoint)" "$T/kubelet/plugins_registry/reg.sock" "its endpoint"
}
