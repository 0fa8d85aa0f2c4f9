# Resource limits and dynamic users on a host without usable cgroup v2 (the
# test config puts the cgroup root outside any cgroup2 mount, so this holds
# on every host; the VM tests cover real cgroups).

cg_job() {  # ID: a job whose task sets memory and pids limits
  echo '{"id": "'$1'", "tasks": [{"name": "a", "command": "'$HELPER'", "args": ["sleep", "600"],
    "resources": {"memory": {"max": "64MiB"}, "pids": {"max": 50}}}]}'
}

test_limits_are_refused_where_cgroup_v2_is_unusable() {
  start_agent
  op status >"$T/status.txt" || fail "status failed"
  grep -q "cgroup2 *off .*jobs that set resource limits are refused" "$T/status.txt" ||
    fail "status does not say limits are refused: $(grep cgroup2 "$T/status.txt")"
  cg_job lim >"$T/lim.json"
  expect_exit 2 op run -f "$T/lim.json"
  expect_contains "$OUT" "tasks[0].resources: resource limits need cgroup v2, which is not usable on this node" \
    "refusal names the task and the reason"
  expect_contains "$OUT" "set cgroup_allow_without_limits" "refusal says what to do"
  expect_exit 1 op inspect lim
  # Jobs without limits still run.
  echo '{"id": "free", "tasks": [{"name": "a", "command": "'$HELPER'", "args": ["sleep", "600"]}]}' >"$T/free.json"
  expect_exit 0 op run -f "$T/free.json"
}

test_limits_run_without_cgroups_when_allowed() {
  write_config '"cgroup_allow_without_limits": true'
  start_agent
  op status | grep -q "tasks with limits run without them" || fail "status does not say limits are ignored"
  cg_job lim >"$T/lim.json"
  expect_exit 0 op run -f "$T/lim.json"
  local pid; pid="$(op --json inspect lim/a | json_get pid)"
  [ -n "$pid" ] && [ "$pid" != 0 ] || fail "task not running"
  # A live update is accepted (and persisted) without a restart.
  expect_exit 0 op update lim/a --memory-max 128MiB
  expect_contains "$OUT" "live, no restart" "update reports a live change"
  [ "$(op --json inspect lim/a | json_get pid)" = "$pid" ] || fail "update restarted the task"
  op --json inspect lim | tr -d ' \n' | grep -q '"memory":{"max":134217728' ||
    fail "new limit not in the stored spec: $(op --json inspect lim | grep -A2 memory)"
  expect_exit 2 op update lim/a
  expect_contains "$OUT" "update needs at least one limit" "update without a limit"
}

# With cgroup_allow_without_limits on a node without usable cgroup v2,
# nothing enforces a task's limits: every place that reports them says so,
# with the reason (update, its event, inspect, --json), and inspect shows
# each task's limits.
test_limits_not_enforced_are_reported_as_such() {
  write_config '"cgroup_allow_without_limits": true'
  start_agent
  cg_job ne >"$T/ne.json"
  expect_exit 0 op run -f "$T/ne.json"
  local why="not enforced: cgroup v2 is not usable on this node"
  expect_exit 0 op inspect ne/a
  expect_contains "$OUT" "limits:     memory.max 64MiB, pids.max 50" "inspect lists the task's limits"
  expect_contains "$OUT" "memory.max, pids.max $why" "inspect says they are not enforced"
  expect_not_contains "$OUT" "(enforced)" "inspect does not call them enforced"
  expect_exit 0 op inspect ne
  expect_contains "$OUT" "memory.max, pids.max $why" "the job view says it too"
  op --json inspect ne/a >"$T/ne-a.json" || fail "inspect --json failed"
  python3 - "$T/ne-a.json" <<'PY' || fail "limits in --json: $(cat "$T/ne-a.json")"
import json, sys
limits = json.load(open(sys.argv[1]))["task"]["limits"]
assert [(l["file"], l["value"], l["enforced"]) for l in limits] == [("memory.max", "67108864", False), ("pids.max", "50", False)], limits
assert all("cgroup v2 is not usable on this node" in l["not_enforced"] for l in limits), limits
PY
  expect_exit 0 op update ne/a --memory-max 128MiB
  expect_contains "$OUT" "memory.max 128MiB (live, no restart; job version 2); memory.max $why" "update says it"
  expect_eq "$(op --json update ne/a --memory-max 96MiB | json_get enforced)" "False" "update --json"
  wait_for 10 jt_events_contain ne/a "resource limits updated without a restart; memory.max, pids.max $why" ||
    fail "the update's event does not say it: $(op events ne/a)"
  expect_exit 0 op inspect ne/a
  expect_contains "$OUT" "limits:     memory.max 96MiB, pids.max 50" "inspect shows the new value"
}

test_dynamic_users_get_distinct_reused_uids() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; return 0; }
  chmod 755 "$T"  # mktemp -d makes it 0700: another uid could not reach its task dir
  start_agent
  local t='{"name": "a", "user": "dynamic", "command": "/bin/sh", "args": ["-c", "'$HELPER' id; exec sleep 600"]}'
  echo '{"id": "d1", "tasks": ['"$t"']}' >"$T/d1.json"
  expect_exit 0 op run -f "$T/d1.json"
  echo '{"id": "d2", "tasks": ['"$t"']}' >"$T/d2.json"
  expect_exit 0 op run -f "$T/d2.json"
  wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' logs d2/a | grep -q ." || fail "d2 printed nothing"
  wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' logs d1/a | grep -q ." || fail "d1 printed nothing"
  local u1 u2
  u1="$(op logs d1/a | cut -d' ' -f1)"; u2="$(op logs d2/a | cut -d' ' -f1)"
  [ "$u1" -ge 80000 ] && [ "$u2" -ge 80000 ] || fail "uids $u1 $u2 not from the pool"
  [ "$u1" != "$u2" ] || fail "both tasks got uid $u1"
  [ "$(stat -c %u "$T/state/task-data/d1.a")" = "$u1" ] || fail "task dir not owned by $u1"
  grep -q "\"d1.a\": $u1" "$T/state/dynamic-users.json" || fail "pool not persisted: $(cat "$T/state/dynamic-users.json")"
  expect_exit 0 op rm d1
  echo '{"id": "d3", "tasks": ['"$t"']}' >"$T/d3.json"
  expect_exit 0 op run -f "$T/d3.json"
  wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' logs d3/a | grep -q ." || fail "d3 printed nothing"
  [ "$(op logs d3/a | cut -d' ' -f1)" = "$u1" ] || fail "released uid $u1 not reused: $(op logs d3/a)"
}
