# The oci task driver (examples/plugins/oci-driver, docs/oci-driver.md)
# with Debian's crun, on containers whose root file system is busybox-static
# built by the test. The host has cgroup v2 without controllers next to v1
# (hybrid), which crun refuses: the driver runs in a private mount namespace
# whose /sys/fs/cgroup is an empty tmpfs (so crun sees no cgroups and runs
# with --cgroup-manager=disabled; the host's cgroup mounts are not touched).
# Limits and OOM are proven in the VM (tests/vm/oci_driver.sh). Helpers are
# prefixed oc_.

OCI_DRIVER="$(dirname "$OUTPOST")/outpost-oci-driver"

# oc_rootfs DIR: a busybox root file system (every applet linked in /bin).
oc_rootfs() {
  local bb; bb="$(command -v busybox)" || fail "busybox is missing (tools/deps.sh test)"
  mkdir -p "$1/bin" "$1/etc" "$1/tmp" || fail "rootfs dirs"
  cp "$bb" "$1/bin/busybox" || fail "copy busybox"
  local a
  for a in $("$bb" --list); do [ "$a" = busybox ] || ln -s busybox "$1/bin/$a"; done
  [ -L "$1/bin/sh" ] || fail "no sh applet in $bb"
  echo "root:x:0:0:root:/:/bin/sh" >"$1/etc/passwd"
  echo "inside-rootfs" >"$1/etc/marker"
}

# oc_driver [ARGS...]: starts the driver (plugins dir $T/run/plugins, state
# $T/oci) and waits until `outpost plugins` lists it. Run by NSX when set
# (the network test's node).
oc_driver() {
  [ -x "$OCI_DRIVER" ] || fail "$OCI_DRIVER is missing (make oci-driver)"
  command -v crun >/dev/null || fail "crun is missing (tools/deps.sh test)"
  # slave: mounts made later outside (the job's netns pins) reach it; its
  # tmpfs does not go back.
  ${NSX:-} unshare -m --propagation slave sh -c 'mount -t tmpfs none /sys/fs/cgroup && exec "$@"' oci \
    "$OCI_DRIVER" --plugins-dir "$T/run/plugins" --state-dir "$T/oci" "$@" >>"$T/driver.log" 2>&1 &
  OC_DRIVER=$!
  echo "$OC_DRIVER" >>"$T/.pids"
  wait_for 10 oc_registered || fail "the oci driver did not register: $(op plugins; cat "$T/driver.log")"
}
oc_registered() { op status 2>/dev/null | grep -q "driver.oci .*on"; }
# oc_job ID SCRIPT [EXTRA_CONFIG_MEMBERS] [EXTRA_TASK_MEMBERS]: one oci task "t" running sh -c SCRIPT.
oc_job() {
  printf '{"id": "%s", "tasks": [{"name": "t", "driver": "oci", "command": "/bin/sh", "args": ["-c", "%s"], "config": {"rootfs": "%s"%s}%s}]}\n' \
    "$1" "$2" "$T/rootfs" "${3:+, $3}" "${4:+, $4}"
}
oc_pid() { local p; p="$(op --json inspect "$1" 2>/dev/null | json_get pid)" && [ -n "$p" ] && [ "$p" != 0 ] && echo "$p"; }
oc_logs_have() { op logs "$1" 2>/dev/null | grep -qF -- "$2"; }
oc_err_has() { op logs --stderr "$1" 2>&1 | grep -qF -- "$2"; }
oc_state_is() { [ "$(op --json inspect "$1" 2>/dev/null | json_get state)" = "$2" ]; }

test_oci_container_is_isolated_logs_and_leaves_nothing() {
  oc_rootfs "$T/rootfs"
  start_agent
  oc_driver
  expect_exit 0 op plugins
  expect_contains "$OUT" "TaskDriver oci" "listed"
  expect_exit 0 op status
  expect_contains "$OUT" "driver.oci.runtime=" "the runtime in the fingerprint"
  echo "host-only" >"$T/host-file"
  oc_job c 'echo out-$(hostname); cat /etc/marker; ls '"$T"' 2>/dev/null || echo no-host-dir; touch /x 2>/dev/null || echo rootfs-ro; echo pid-$$; echo to-stderr >&2; exec sleep 600' \
    '"readonly_rootfs": true, "hostname": "box"' >"$T/c.json"
  expect_exit 0 op run -f "$T/c.json" --detach
  wait_for 20 oc_logs_have c/t "pid-1" || fail "no output: $(op logs c/t; op inspect c; cat "$T/driver.log")"
  expect_exit 0 op logs c/t
  expect_contains "$OUT" "out-box" "its own hostname"
  expect_contains "$OUT" "inside-rootfs" "its own root"
  expect_contains "$OUT" "no-host-dir" "the host's files are not there"
  expect_contains "$OUT" "rootfs-ro" "read-only root"
  wait_for 10 oc_err_has c/t "to-stderr" || fail "stderr not in the logs: $(op logs --stderr c/t 2>&1)"
  local pid; pid="$(oc_pid c/t)" || fail "no pid"
  [ "$(readlink "/proc/$pid/ns/pid")" != "$(readlink /proc/self/ns/pid)" ] || fail "not in a pid namespace of its own"
  [ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] || fail "not in a mount namespace of its own"
  expect_eq "$(ps -o ppid= -p "$pid" | tr -d ' ')" "$OC_DRIVER" "the container's init is the driver's child"
  # crun 1.8.1's exec from a chroot (the fresh-machine test runs in one)
  # lands in the chroot's root, not the container's (docs/oci-driver.md).
  if [ "$(stat -L -c %d:%i /)" = "$(stat -L -c %d:%i /proc/1/root/ 2>/dev/null)" ]; then
    expect_exit 0 op exec c/t -- cat /etc/marker
    expect_contains "$OUT" "inside-rootfs" "exec runs in the container"
  else
    echo "in a chroot: exec's root not checked"
  fi
  expect_exit 0 op inspect c
  expect_contains "$OUT" "running" "running"
  [ -f "$T/oci/bundles/c.t/config.json" ] || fail "no bundle: $(ls -R "$T/oci")"
  python3 - "$T/oci/bundles/c.t/config.json" <<'PY' || fail "bundle: $(cat "$T/oci/bundles/c.t/config.json")"
import json, sys
s = json.load(open(sys.argv[1]))
ns = [n["type"] for n in s["linux"]["namespaces"]]
assert set(["pid", "ipc", "uts", "mount"]) <= set(ns), ns
assert "network" not in ns, ns  # mode host: the node's network
assert s["root"]["readonly"] is True
assert s["process"]["noNewPrivileges"] is True
assert "CAP_SYS_ADMIN" not in s["process"]["capabilities"]["bounding"]
assert any(m["destination"] == "/proc" for m in s["mounts"])
assert any(r.get("allow") is False for r in s["linux"]["resources"]["devices"])
PY
  expect_exit 0 op stop c
  wait_gone "$pid" 15 || fail "container $pid survived the stop"
  expect_exit 0 op rm c
  wait_for 10 test ! -e "$T/oci/bundles/c.t" || fail "bundle left: $(ls -R "$T/oci/bundles")"
  expect_exit 0 ls -A "$T/oci/crun"
  expect_eq "$OUT" "" "no runtime state left"
  grep -q " $T/oci" /proc/mounts && fail "mounts left: $(grep "$T" /proc/mounts)"
  return 0
}

test_oci_config_errors_name_the_field() {
  oc_rootfs "$T/rootfs"
  start_agent
  oc_driver
  # At submission, through the driver's ConfigSchema.
  printf '{"id": "a", "tasks": [{"name": "t", "driver": "oci", "command": "/bin/sh", "config": {"readonly_rootfs": "yes", "mounts": [{"source": "/tmp", "destination": "rel", "mode": 1}, {"source": "/tmp"}, "x"], "devices": ["dev/null"]}}]}' >"$T/a.json"
  expect_exit 2 op run -f "$T/a.json" --detach
  expect_contains "$OUT" "tasks[0].config.readonly_rootfs: expected bool for driver oci" "type checked"
  expect_contains "$OUT" "tasks[0].config.rootfs: required by driver oci" "rootfs required"
  expect_contains "$OUT" 'tasks[0].config.mounts[0].destination: must be an absolute path, got "rel"' "nested field checked"
  expect_contains "$OUT" "tasks[0].config.mounts[0].mode: unknown field (it takes: source, destination, type, options)" "nested unknown field"
  expect_contains "$OUT" "tasks[0].config.mounts[1].destination: required" "nested required field"
  expect_contains "$OUT" "tasks[0].config.mounts[2]: expected an object" "list items checked"
  expect_contains "$OUT" "tasks[0].config.devices[0]: must be an absolute path" "list of paths checked"
  # At start, by the driver: what needs the node to tell.
  oc_job b 'true' '"mounts": [{"source": "/nonexistent-src", "destination": "/d"}], "capabilities": ["CAP_NOPE"]' >"$T/b.json"
  expect_exit 0 op run -f "$T/b.json" --detach
  wait_for 20 sh -c "'$OUTPOST' --socket '$SOCK' events b | grep -q 'config.mounts\[0\].source: /nonexistent-src does not exist on this node'" ||
    fail "start error not shown: $(op events b)"
  expect_exit 0 op events b
  expect_contains "$OUT" 'config.capabilities[0]: unknown capability "CAP_NOPE"' "capability checked"
  # Nothing of the failed start is left.
  expect_eq "$(ls -A "$T/oci/bundles" 2>/dev/null)" "" "no bundle left"
}

test_oci_missing_runtime_is_undetected_with_the_reason() {
  start_agent
  [ -x "$OCI_DRIVER" ] || fail "$OCI_DRIVER is missing"
  "$OCI_DRIVER" --plugins-dir "$T/run/plugins" --state-dir "$T/oci" --runtime /nonexistent/crun >>"$T/driver.log" 2>&1 &
  echo $! >>"$T/.pids"
  wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' status | grep -q 'driver.oci .*undetected'" || fail "not undetected: $(op status)"
  expect_exit 0 op status
  expect_contains "$OUT" "OCI runtime /nonexistent/crun is not an executable file" "the reason"
  expect_exit 0 op plugins
  expect_contains "$OUT" "driver undetected: OCI runtime /nonexistent/crun is not an executable file" "in plugins"
}

# The fingerprint comes from a container the driver really creates (and
# deletes), not from --version alone. oc_fake_runtime stands for crun on a
# node where it cannot create any container: it answers --version and its
# create fails with crun's message for a host with cgroup v1 and v2 side by
# side, until $T/runtime-ok exists; then create starts a sleeping process
# (the container's init) and writes its pid, and delete kills it. Every
# command it gets is appended to $T/runtime-calls.
oc_fake_runtime() {
  mkdir -p "$T/fake"
  cat >"$T/fake/crun" <<SH
#!/bin/sh
echo "\$*" >>"$T/runtime-calls"
log=""; pidfile=""; cmd=""; prev=""; id=""
for a in "\$@"; do
  case "\$a" in --log=*) log="\${a#--log=}" ;; esac
  [ "\$prev" = --pid-file ] && pidfile="\$a"
  case "\$a" in --version|create|delete|start|kill|state) [ -z "\$cmd" ] && cmd="\$a" ;; esac
  prev="\$a"; id="\$a"
done
case "\$cmd" in
  --version) echo "crun version 1.8.1"; echo "commit: test double" ;;
  create)
    if [ ! -e "$T/runtime-ok" ]; then
      echo "cgroups in hybrid mode not supported, drop all controllers from cgroupv2" >>"\$log"
      exit 1
    fi
    sleep 600 </dev/null >/dev/null 2>&1 &
    echo \$! >"\$pidfile"; echo "\$id \$!" >>"$T/fake-inits"; echo \$! >>"$T/.pids" ;;
  delete)
    pid=\$(awk -v id="\$id" '\$1 == id {print \$2}' "$T/fake-inits" 2>/dev/null | tail -n 1)
    [ -n "\$pid" ] && kill -9 "\$pid" 2>/dev/null
    echo "\$id" >>"$T/fake-deleted" ;;
  *) echo "unexpected: \$*" >&2; exit 1 ;;
esac
SH
  chmod +x "$T/fake/crun"
}
# Every container the fake runtime created (id and init pid in
# $T/fake-inits) was deleted and its init is gone. A probe may be running
# when the test looks (each fingerprint ask at least 10 s after the last
# probe starts the next): it is done within the wait.
oc_probes_all_deleted() {
  local id pid
  while read -r id pid; do
    grep -qx -- "$id" "$T/fake-deleted" 2>/dev/null || return 1
    ! kill -0 "$pid" 2>/dev/null || return 1
  done <"$T/fake-inits"
}
oc_status_says() { op status 2>/dev/null | grep -F "driver.oci" | grep -qF -- "$1"; }
test_oci_fingerprint_probes_the_runtime_with_a_container() {
  start_agent
  [ -x "$OCI_DRIVER" ] || fail "$OCI_DRIVER is missing"
  oc_fake_runtime
  "$OCI_DRIVER" --plugins-dir "$T/run/plugins" --state-dir "$T/oci" --runtime "$T/fake/crun" >>"$T/driver.log" 2>&1 &
  echo $! >>"$T/.pids"
  wait_for 10 oc_status_says "unhealthy" || fail "not unhealthy: $(op status | grep driver; cat "$T/driver.log")"
  local why="crun cannot create containers here: cgroups in hybrid mode not supported, drop all controllers from cgroupv2"
  expect_exit 0 op status
  expect_contains "$OUT" "driver.oci   off  unhealthy: $why" "status: unhealthy with the runtime's own message"
  expect_contains "$OUT" "driver.oci.version=crun version 1.8.1" "what --version said"
  expect_exit 0 op plugins
  expect_contains "$OUT" "driver unhealthy: $why" "plugins says it"
  grep -q -- "--cgroup-manager=disabled create --bundle $T/oci/probe/" "$T/runtime-calls" ||
    fail "no probe container created as for a task without a cgroup: $(cat "$T/runtime-calls")"
  # The runtime is fixed: a later ask of the agent (every 30 s) starts a new
  # probe, whose result the next ask gets, without a restart of the driver.
  touch "$T/runtime-ok"
  wait_for 100 oc_status_says "healthy: Healthy" || fail "not healthy after the fix: $(op status | grep driver)"
  expect_exit 0 op status
  expect_contains "$OUT" "driver.oci.probe=ok" "the probe passed"
  [ "$(grep -c ' delete --force probe-' "$T/runtime-calls")" -ge 2 ] || fail "probe containers not deleted: $(cat "$T/runtime-calls")"
  [ -s "$T/fake-inits" ] || fail "test setup: no probe container was created"
  wait_for 10 oc_probes_all_deleted ||
    fail "a probe container was not deleted or its init was left running: $(cat "$T/fake-inits" "$T/fake-deleted")"
  expect_eq "$(ls -A "$T/oci/probe/root" 2>/dev/null)" "" "no probe container left"
}

# On this kind of host (cgroup v1 and cgroup2 at /sys/fs/cgroup/unified side
# by side) the real crun refuses every container outside a namespace that
# hides the cgroup mounts: the driver says so, in crun's words.
test_oci_real_crun_on_a_hybrid_host_is_unhealthy() {
  if ! grep -q ' /sys/fs/cgroup/unified .* - cgroup2 ' /proc/self/mountinfo ||
    ! grep -q ' /sys/fs/cgroup/[a-z]* .* - cgroup cgroup ' /proc/self/mountinfo; then
    echo "skip: this host's cgroups are not hybrid (cgroup v1 and cgroup2 side by side)"
    return 0
  fi
  command -v crun >/dev/null || fail "crun is missing (tools/deps.sh test)"
  start_agent
  "$OCI_DRIVER" --plugins-dir "$T/run/plugins" --state-dir "$T/oci" >>"$T/driver.log" 2>&1 &
  echo $! >>"$T/.pids"
  wait_for 10 oc_status_says "unhealthy" || fail "not unhealthy: $(op status | grep driver; cat "$T/driver.log")"
  expect_exit 0 op plugins
  expect_contains "$OUT" "driver unhealthy: crun cannot create containers here: cgroups in hybrid mode not supported" \
    "crun's own message"
}

test_oci_recovers_after_kill_9_of_agent_and_driver() {
  oc_rootfs "$T/rootfs"
  start_agent
  oc_driver
  oc_job r 'echo started; exec sleep 600' >"$T/r.json"
  expect_exit 0 op run -f "$T/r.json" --detach
  wait_for 20 oc_logs_have r/t started || fail "not started: $(op inspect r)"
  local pid; pid="$(oc_pid r/t)" || fail "no pid"
  # The agent's worker dies: the new one recovers the task.
  local w; w="$(op status --json | json_get pid)"
  kill -9 "$w"
  wait_for 20 pl_worker_other_than "$w" || fail "no new worker"
  wait_for 20 oc_state_is r/t running || fail "not recovered after the agent: $(op inspect r)"
  expect_eq "$(oc_pid r/t)" "$pid" "same pid after the agent's restart"
  # The driver dies: the task is unknown, then recovered from crun's state.
  kill -9 "$OC_DRIVER"
  wait_for 20 sh -c "'$OUTPOST' --socket '$SOCK' inspect r | grep -q 'driver oci is disconnected'" || fail "not told: $(op inspect r)"
  kill -0 "$pid" || fail "the container died with its driver"
  # exec needs the driver: its own exit code and the driver named (not 3,
  # "no agent").
  expect_exit 4 op exec r/t -- echo away
  expect_contains "$OUT" "driver oci is disconnected" "exec while the driver is away"
  oc_driver
  wait_for 20 oc_state_is r/t running || fail "not recovered after the driver: $(op inspect r)"
  expect_eq "$(oc_pid r/t)" "$pid" "same pid after the driver's restart"
  expect_exit 0 op exec r/t -- echo still-here
  expect_contains "$OUT" "still-here" "exec after recovery"
  expect_exit 0 op stop r
  wait_gone "$pid" 15 || fail "recovered container survived the stop"
  expect_exit 0 op rm r
  wait_for 10 test ! -e "$T/oci/bundles/r.t" || fail "bundle left after rm"
}

# Both ways of starting: `create` + `start` (the default) and `run --detach`
# (--run-detached). In each: the container's exact exit code, and a start
# the runtime refuses is an event naming the runtime's command and leaves
# nothing. With create + start even a container that exits at once (before
# the runtime returns) reports it; with run --detach the runtime reaps such a
# container itself (docs/oci-driver.md), so there it exits only once the
# task is listed running (the runtime has returned): on a file the test makes.
oc_task_field() { op --json task inspect "$1" 2>/dev/null | json_get "$2"; }
oc_exited() { [ "$(oc_task_field "$1" state)" = exited ]; }
test_oci_both_start_modes_report_exit_codes_and_refused_starts() {
  oc_rootfs "$T/rootfs"
  start_agent
  local mode cmd
  for mode in create run; do
    rm -f "$T/rootfs/go"
    if [ "$mode" = create ]; then
      oc_driver
      cmd="crun create"
      oc_job "q$mode" 'echo quick; exit 3' '' '"restart": {"policy": "never"}' >"$T/q.json"
    else
      oc_driver --run-detached
      cmd="crun run"
      oc_job "q$mode" 'echo quick; until [ -e /go ]; do sleep 0.05; done; exit 3' '' '"restart": {"policy": "never"}' >"$T/q.json"
    fi
    expect_exit 0 op run -f "$T/q.json" --detach
    if [ "$mode" = run ]; then
      wait_for 20 oc_state_is "q$mode/t" running || fail "run: not running: $(op inspect "q$mode")"
      touch "$T/rootfs/go"
    fi
    wait_for 20 oc_exited "q$mode/t" || fail "$mode: no exit reported: $(op inspect "q$mode"; cat "$T/driver.log")"
    expect_eq "$(oc_task_field "q$mode/t" exit_code)" "3" "$mode: the exact exit code"
    wait_for 10 oc_logs_have "q$mode/t" quick || fail "$mode: output lost: $(op logs "q$mode/t")"
    printf '{"id": "x%s", "tasks": [{"name": "t", "driver": "oci", "command": "/bin/no-such-program", "restart": {"policy": "never"}, "config": {"rootfs": "%s"}}]}\n' \
      "$mode" "$T/rootfs" >"$T/x.json"
    expect_exit 0 op run -f "$T/x.json" --detach
    wait_for 20 sh -c "'$OUTPOST' --socket '$SOCK' events x$mode | grep -qF '$cmd: '" ||
      fail "$mode: refused start not told with '$cmd: ': $(op events "x$mode"; cat "$T/driver.log")"
    expect_exit 0 op rm "q$mode"
    expect_exit 0 op rm "x$mode"
    wait_for 10 sh -c "[ -z \"\$(ls -A '$T/oci/bundles')\" ]" || fail "$mode: bundles left: $(ls -A "$T/oci/bundles")"
    expect_eq "$(ls -A "$T/oci/crun")" "" "$mode: no runtime state left"
    kill "$OC_DRIVER"
    wait_gone "$OC_DRIVER" 10 || fail "driver did not stop"
  done
}

# The OCI runtime runs the hooks from config.json (the job's, hooks.d's):
# each once, none by the agent.
test_oci_hooks_run_by_the_runtime_once() {
  oc_rootfs "$T/rootfs"
  mkdir -p "$T/hooks.d"
  local rec="$T/hook-runs"
  local h='{"path": "/bin/sh", "args": ["sh", "-c", "echo STAGE >> '"$rec"'"]}'
  local hooks="\"hooks\": {\"createRuntime\": [${h/STAGE/createRuntime}], \"createContainer\": [${h/STAGE/createContainer}], \"startContainer\": [{\"path\": \"/bin/sh\", \"args\": [\"sh\", \"-c\", \"echo startContainer-in-\$(cat /etc/marker) >> /rec/runs\"]}], \"poststop\": [${h/STAGE/poststop}]}"
  mkdir -p "$T/recdir"
  start_agent
  oc_driver
  oc_job hk 'exec sleep 600' '"mounts": [{"source": "'"$T/recdir"'", "destination": "/rec"}]' "$hooks" >"$T/hk.json"
  expect_exit 0 op run -f "$T/hk.json" --detach
  wait_for 20 oc_state_is hk/t running || fail "not running: $(op inspect hk; cat "$T/driver.log")"
  wait_for 10 grep -q startContainer "$T/recdir/runs" || fail "startContainer did not run in the container"
  expect_eq "$(cat "$T/recdir/runs")" "startContainer-in-inside-rootfs" "startContainer ran once, inside the container"
  expect_eq "$(tr '\n' ' ' <"$rec")" "createRuntime createContainer " "create hooks ran once each"
  expect_exit 0 op events hk/t
  expect_not_contains "$OUT" " hook " "no hook run by the agent"
  expect_exit 0 op stop hk
  expect_exit 0 op rm hk
  wait_for 10 grep -q poststop "$rec" || fail "poststop did not run at the delete: $(cat "$rec")"
  expect_eq "$(tr '\n' ' ' <"$rec")" "createRuntime createContainer poststop " "each hook once"
  return 0
}

test_oci_conformance_checks_pass() {
  oc_rootfs "$T/rootfs"
  start_agent
  oc_driver
  local work="$T/run/conformance"
  mkdir -p "$work"
  op plugins check oci --config "{\"rootfs\": \"$T/rootfs\", \"mounts\": [{\"source\": \"$work\", \"destination\": \"$work\"}]}" \
    >"$T/chk.out" 2>&1
  cat "$T/chk.out"
  grep -q "^FAIL " "$T/chk.out" && fail "a check failed: $(cat "$T/chk.out")"
  local c
  for c in start-wait stop-sigint stop-sigkill stop-timeout-0 signal recover-idempotent destroy-running \
    bad-command bad-user stats inspect exec; do
    grep -q "^PASS $c " "$T/chk.out" || fail "check $c did not pass: $(cat "$T/chk.out")"
  done
  expect_exit 1 op plugins check oci --config '{"rootfs": 5}'
  expect_contains "$OUT" "config.rootfs: expected string for driver oci" "--config checked"
}

# An NRI plugin adds a bind mount and a device: the container sees both.
test_oci_nri_mount_and_device_reach_the_container() {
  oc_rootfs "$T/rootfs"
  mkdir -p "$T/shared"
  echo "from-nri-mount" >"$T/shared/file"
  nr_start
  oc_driver
  nr_plugin 10 adder -adjust-mount "$T/shared:/nri-data:rbind,ro" -adjust-device /dev/zero >/dev/null
  wait_for 10 nr_ready adder || fail "plugin not ready: $(op nri)"
  oc_job n 'cat /nri-data/file; ls -l /dev/zero; head -c 4 /dev/zero | wc -c; touch /nri-data/x 2>/dev/null || echo mount-ro; exec sleep 600' >"$T/n.json"
  expect_exit 0 op run -f "$T/n.json" --detach
  wait_for 20 oc_logs_have n/t "mount-ro" || fail "no output: $(op logs n/t; op inspect n; op events n)"
  expect_exit 0 op logs n/t
  expect_contains "$OUT" "from-nri-mount" "the NRI bind mount"
  expect_contains "$OUT" "1,   5" "the NRI device node (char 1:5)"
  expect_contains "$OUT" "4" "the device readable (allowed)"
  python3 - "$T/oci/bundles/n.t/config.json" <<'PY' || fail "bundle: $(cat "$T/oci/bundles/n.t/config.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert any(m["destination"] == "/nri-data" and "ro" in m["options"] for m in s["mounts"]), s["mounts"]
assert any(d["path"] == "/dev/zero" and d["major"] == 1 and d["minor"] == 5 for d in s["linux"]["devices"])
assert any(r.get("allow") and r.get("major") == 1 and r.get("minor") == 5 for r in s["linux"]["resources"]["devices"])
PY
  expect_exit 0 op rm n
  return 0
}

# A job on a bridge network: the container joins the job's namespace (by
# path), gets the job's address, and reaches loopback in it.
test_oci_container_joins_the_jobs_bridge_network() {
  oc_rootfs "$T/rootfs"
  nt_node
  # The pins' dir a shared mount before the driver's namespace is made (as
  # the agent makes it at the first pin), so that the pins reach the driver.
  nsx mkdir -p "$T/netns" && nsx mount --bind "$T/netns" "$T/netns" && nsx mount --make-shared "$T/netns" ||
    fail "shared netns dir"
  NSX="nsenter -t $NT_NODE -n -m -r -w --" oc_driver
  printf '{"id": "w", "network": {"mode": "bridge"}, "tasks": [{"name": "t", "driver": "oci", "command": "/bin/sh", "args": ["-c", "ip -o -4 addr show; echo ip=$OUTPOST_IP; exec sleep 600"], "config": {"rootfs": "%s"}}]}' \
    "$T/rootfs" >"$T/w.json"
  expect_exit 0 op run -f "$T/w.json" --detach
  wait_for 30 oc_logs_have w/t "ip=" || fail "no output: $(op logs w/t; op inspect w; cat "$T/driver.log")"
  local ip; ip="$(op logs w/t | sed -n 's/^ip=//p')"
  [ -n "$ip" ] || fail "no OUTPOST_IP: $(op logs w/t)"
  expect_exit 0 op logs w/t
  expect_contains "$OUT" "inet $ip/" "the job's address inside the container"
  local pid; pid="$(oc_pid w/t)" || fail "no pid"
  expect_eq "$(readlink "/proc/$pid/ns/net")" "net:[$(nsx stat -L -c %i "$T/netns/outpost-w")]" "joined the pinned namespace"
  expect_exit 0 op rm w
  return 0
}

# oc_away_job ID GRACE: an agent with plugin_grace_period GRACE, the oci
# driver and job ID (task t, long-running), then the driver killed -9 and
# the task unknown because of it; the container's pid in OC_AWAY_PID.
oc_job_gone() { ! op inspect "$1" >/dev/null 2>&1; }
oc_away_job() {
  oc_rootfs "$T/rootfs"
  write_config "\"plugin_grace_period\": \"$2\""
  start_agent
  oc_driver
  oc_job "$1" 'echo started; exec sleep 600' >"$T/$1.json"
  expect_exit 0 op run -f "$T/$1.json" --detach
  wait_for 20 oc_logs_have "$1/t" started || fail "not started: $(op inspect "$1")"
  OC_AWAY_PID="$(oc_pid "$1/t")" || fail "no pid"
  kill -9 "$OC_DRIVER"
  wait_for 20 sh -c "'$OUTPOST' --socket '$SOCK' inspect $1 | grep -q 'driver oci is disconnected'" ||
    fail "not told: $(op inspect "$1")"
}

# A removal while the oci driver is away (killed -9, within its grace
# period) is pending, not done; once the driver is back the agent carries it
# out, and nothing of the container is left: no process, no crun state, no
# bundle (before, `rm` said "job a removed" and the container ran on).
test_oci_rm_while_the_driver_is_away_is_pending_then_nothing_is_left() {
  oc_away_job a 120s
  local pid="$OC_AWAY_PID"
  expect_exit 4 op rm a --timeout 1s
  expect_contains "$OUT" "the removal of job a is pending" "rm while the driver is away"
  expect_not_contains "$OUT" "removed" "rm while the driver is away"
  kill -0 "$pid" || fail "test setup: the container died with its driver"
  [ -d "$T/oci/bundles/a.t" ] || fail "the bundle went while the driver was away"
  oc_driver
  wait_for 20 oc_job_gone a || fail "job a not removed once the driver was back: $(op ps)"
  wait_gone "$pid" 15 || fail "the container survived its removal"
  [ -e "$T/oci/bundles/a.t" ] && fail "bundle left after the removal"
  [ -e "$T/oci/crun/a.t" ] && fail "crun state left after the removal"
  true
}

# A driver given up on (its grace period over): the removal goes on without
# it. When it registers again (a new process, which tracks nothing yet), it
# lists the bundles in its state dir; the agent destroys the one no task
# record accounts for, and says so in an event.
test_oci_a_container_no_record_accounts_for_is_destroyed_when_its_driver_is_back() {
  oc_away_job g 2s
  local pid="$OC_AWAY_PID"
  op rm g --timeout 1s >"$T/rm.out" 2>&1
  local rc=$?
  [ $rc = 0 ] || [ $rc = 4 ] || fail "rm g exited $rc: $(cat "$T/rm.out")"
  wait_for 20 oc_job_gone g || fail "job g not removed after its driver's grace period: $(op ps)"
  kill -0 "$pid" || fail "test setup: the container ended without its driver"
  [ -d "$T/oci/bundles/g.t" ] || fail "test setup: the bundle is gone"
  oc_driver
  wait_gone "$pid" 20 || fail "the returning driver's container of a removed job still runs"
  wait_for 10 test ! -e "$T/oci/bundles/g.t" || fail "bundle of a removed job left"
  [ -e "$T/oci/crun/g.t" ] && fail "crun state of a removed job left"
  wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' events | grep -qF 'no task record accounts for it: destroyed by its driver oci'" ||
    fail "no event about it: $(op events)"
  true
}
