#!/bin/sh
# OCI hooks under busybox init with cgroup v2 (docs/hooks.md): a per-stage
# directory hook (copied in while the agent runs) and a hooks.d hook both
# run for a task with limits; startContainer runs inside the task's process,
# already in the task's cgroup; poststop runs after rm. The hook program is
# `outpost-test-helper hook FILE`, which appends what it saw as one JSON line.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

R=/tmp/hooks-rec
rm -f "$R".*
# Later tests of the same boot must not run these hooks, pass or fail.
trap 'rm -rf /etc/outpost/hooks /etc/containers/oci/hooks.d/vm.json' EXIT
mkdir -p /etc/outpost/hooks/createRuntime /etc/outpost/hooks/poststop /etc/containers/oci/hooks.d
for stage in createRuntime poststop; do
  printf '#!/bin/sh\nexec %s hook %s "$@"\n' "$HELPER" "$R.stagedir" >/etc/outpost/hooks/$stage/.new
  chmod +x /etc/outpost/hooks/$stage/.new
  mv /etc/outpost/hooks/$stage/.new /etc/outpost/hooks/$stage/10-record
done
cat >/etc/containers/oci/hooks.d/.new <<JSON
{"version": "1.0.0", "hook": {"path": "$HELPER", "args": ["vm-hooksd", "hook", "$R.hooksd"]},
 "when": {"annotations": {"^vmtest\$": "^yes\$"}}, "stages": ["startContainer"]}
JSON
mv /etc/containers/oci/hooks.d/.new /etc/containers/oci/hooks.d/vm.json
listed() { outpost hooks >/tmp/hooks.out 2>&1 && grep -q vm.json /tmp/hooks.out &&
  [ "$(grep -c "argv: 10-record" /tmp/hooks.out)" = 2 ]; }
wait_for 30 listed || fail "hooks not listed: $(cat /tmp/hooks.out)"

submit hk '{"id": "hk", "annotations": {"vmtest": "yes"}, "tasks": [{"name": "t", "command": "'$HELPER'",
  "args": ["sleep", "600"], "resources": {"memory": {"max": "64MiB"}, "pids": {"max": 50}}}]}' >/dev/null
wait_for 20 state_is hk/t running || fail "task not running: $(wait_output)"
pid=$(tpid hk/t)
cg=$(task_cgroup hk t)
[ "$(cat "$cg/memory.max")" = 67108864 ] || fail "memory.max not set: $(cat "$cg/memory.max")"
# (picojson writes / as \/.)
unescape() { sed 's#\\/#/#g' "$1"; }
[ -s "$R.stagedir" ] || fail "the per-stage directory hook did not run"
# args [10-record, createRuntime]: the script's interpreter gets its path for argv[0].
unescape "$R.stagedir" | grep -q 'hooks-rec.stagedir","createRuntime"\]' ||
  fail "stage dir hook argv: $(unescape "$R.stagedir")"
unescape "$R.stagedir" | grep -q '"bundle_config":"ok"' || fail "createRuntime could not read config.json: $(unescape "$R.stagedir")"
[ -s "$R.hooksd" ] || fail "the hooks.d startContainer hook did not run"
unescape "$R.hooksd" | grep -q "\"ppid\":$pid," || fail "startContainer did not run in the task's process $pid: $(unescape "$R.hooksd")"
rel=${cg#/sys/fs/cgroup}
unescape "$R.hooksd" | grep -q "\"cgroup\":\"$rel\"" || fail "startContainer not in the task's cgroup $rel: $(unescape "$R.hooksd")"
unescape "$R.hooksd" | grep -q '\\"status\\":\\"created\\"' || fail "startContainer state: $(unescape "$R.hooksd")"
# The bundle's config.json names the cgroup as runtimes do (below the mount).
bundle=/run/outpost/bundles/hk.t/config.json  # the default runtime_dir
[ -f "$bundle" ] || fail "no bundle $bundle"
unescape "$bundle" | grep -q "\"cgroupsPath\": \"$rel\"" || fail "cgroupsPath in $bundle: $(grep cgroupsPath "$bundle")"
outpost rm hk >/dev/null || fail "rm failed"
wait_for 10 grep -q '"poststop"\]' "$R.stagedir" || fail "poststop did not run: $(unescape "$R.stagedir")"
echo "hooks ran: createRuntime and poststop (per-stage dir), startContainer (hooks.d) in $rel as pid $pid's child"
