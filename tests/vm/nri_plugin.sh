#!/bin/sh
# A pre-installed NRI plugin under busybox init (docs/nri.md): the agent,
# restarted with NRI on, launches /opt/nri/plugins/10-vmnri (built with the
# C++ NRI plugin library); the plugin's CreateContainer adjustment sets a
# task's memory.max and an environment variable (the cgroup file and the
# task's environment show them), and its UpdateContainers, sent once the
# task runs, changes memory.max live (same pid). The config is put back
# and the agent restarted at the end, for the tests after this one.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"

PLUGIN=/usr/bin/test_nri_plugin
[ -x "$PLUGIN" ] || skip "no test_nri_plugin in the image (tools/vmtest --extra build/test_nri_plugin)"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

restart_agent() {
  before=$(outpost_pids | tr '\n' ' ')
  for p in $before; do
    [ "$(ppid_of "$p")" = 1 ] && kill -9 "$p"
  done
  for p in $before; do kill -9 "$p" 2>/dev/null; done
  respawned() { agent_init_pid "$before" >/dev/null && outpost status >/dev/null; }
  wait_for 30 respawned || fail "agent not respawned by init: $(wait_output)"
}

cp /etc/outpost/config.json /tmp/config.before-nri
mkdir -p /opt/nri/plugins
cat >/opt/nri/plugins/10-vmnri <<EOF
#!/bin/sh
exec $PLUGIN -events all -log /tmp/vmnri.log -adjust-memory 50331648 -adjust-env NRI_VM=yes \
  -update-during PostStartContainer:vn.t:100663296
EOF
chmod 0755 /opt/nri/plugins/10-vmnri
sed 's/}$/, "nri": {}}/' /tmp/config.before-nri >/etc/outpost/config.json
restart_agent
ready() { outpost nri | grep -q '^10-vmnri  launched ready'; }
wait_for 30 ready || fail "plugin not ready: $(outpost nri 2>&1 | tr '\n' ' ')"

submit vn '{"id": "vn", "tasks": [{"name": "t", "command": "'$HELPER'", "args": ["sleep", "600"],
  "resources": {"memory": {"max": "256MiB"}}}]}' >/dev/null
pid=$(tpid vn/t)
cg=$(task_cgroup vn t)
tr '\0' '\n' <"/proc/$pid/environ" | grep -qx NRI_VM=yes || fail "NRI env not in the task's environment"
# The plugin's 48 MiB, then (its UpdateContainers after PostStartContainer)
# 96 MiB; the first may already have been replaced when we look.
mem=$(cat "$cg/memory.max")
[ "$mem" = 50331648 ] || [ "$mem" = 100663296 ] || fail "memory.max is $mem, not the plugin's"
updated() { [ "$(cat "$cg/memory.max")" = 100663296 ]; }
wait_for 20 updated || fail "UpdateContainers not applied: memory.max $(cat "$cg/memory.max"); $(tail -n 3 /tmp/vmnri.log)"
[ "$(tpid vn/t)" = "$pid" ] || fail "task restarted by the update"
grep -q "$pid" "$cg/cgroup.procs" || fail "task not in its cgroup"
outpost rm vn >/dev/null || fail "rm failed"
removed() { grep -q '^RemovePodSandbox' /tmp/vmnri.log; }
wait_for 20 removed || fail "no RemovePodSandbox: $(cut -d' ' -f1 /tmp/vmnri.log | tr '\n' ' ')"

rm -f /opt/nri/plugins/10-vmnri
cp /tmp/config.before-nri /etc/outpost/config.json
restart_agent
echo "NRI plugin set memory.max 48MiB and NRI_VM, then 96MiB live (pid $pid kept)"
