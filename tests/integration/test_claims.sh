# One agent per directory (docs/process-model.md, "One agent per
# directory"): a second agent that names the state dir, the runtime dir or
# the jobs dir of a running one refuses to start and leaves the first
# untouched. Helpers are prefixed tc_.

# tc_first_agent: an agent with a jobs.d job of two tasks that each print a
# line and sleep; waits until both have written it.
tc_first_agent() {
  mkdir -p "$T/jobs.d"
  write_config "\"jobs_dir\": \"$T/jobs.d\""
  local t1 t2
  t1='{"name": "a", "command": "/bin/sh", "args": ["-c", "echo a-$$; exec '$HELPER' sleep 600"]}'
  t2='{"name": "b", "command": "/bin/sh", "args": ["-c", "echo b-$$; exec '$HELPER' sleep 600"]}'
  printf '{"id": "first", "tasks": [%s, %s]}\n' "$t1" "$t2" >"$T/jobs.d/first.json"
  start_agent
  wait_for 20 tc_both_logged >/dev/null || fail "the first agent's tasks did not log: $(op ps 2>&1)"
}
tc_both_logged() { [ "$(op logs first/a 2>/dev/null)" != "" ] && [ "$(op logs first/b 2>/dev/null)" != "" ]; }

# tc_snapshot: what must not change: task pids and states, every file of
# the state dir but the lock file's and the event history's (contents, byte
# for byte), the runtime dir's names. The first agent appends to its event
# history on its own (a task turning healthy a second after it started) and
# compacts it a second later; its events are compared as
# `outpost events` lists them, less the healthy ones.
tc_snapshot() {
  op --json ps | python3 -c '
import json, sys
for j in json.load(sys.stdin)["jobs"]:
    for t in j.get("tasks", []):
        print(j["id"], t["name"], t.get("state"), t.get("pid"))'
  (cd "$T/state" && find . -type f ! -name agent.lock ! -name events | sort | xargs sha256sum)
  op events 2>/dev/null | grep -v ' healthy' | cut -c25-
  (cd "$T/run" && find . | sort)
}

# tc_second CONFIG_MEMBERS: runs a second agent with a config of its own
# (state dir, runtime dir, socket, jobs dir under $T/second) but for the
# members given, which override them; leaves its output in $OUT and its exit
# code in $RC. Bounded: an agent that starts instead of refusing would run on.
tc_second() {
  mkdir -p "$T/second/jobs.d"
  local m="$1"
  local s='"state_dir": "'$T'/second/state"' r='"runtime_dir": "'$T'/second/run"'
  local j='"jobs_dir": "'$T'/second/jobs.d"' k='"api_socket": "'$T'/second/run/outpost.sock"'
  [[ "$m" == *'"state_dir"'* ]] && s=""
  [[ "$m" == *'"runtime_dir"'* ]] && r=""
  [[ "$m" == *'"jobs_dir"'* ]] && j=""
  [[ "$m" == *'"api_socket"'* ]] && k=""
  local all="" x
  for x in "$m" "$s" "$r" "$j" "$k" '"cgroup_root": "'$T'/no-cgroup"' '"hooks_dirs": []' \
    '"netns_dir": "'$T'/second/netns"' '"cni_config_dir": "'$T'/cni.d"' '"cni_path": ["'$T'/cni-bin"]'; do
    [ -n "$x" ] && all="$all${all:+, }$x"
  done
  printf '{%s}\n' "$all" >"$T/second.json"
  OUT="$(timeout 30 "$OUTPOST" agent --config "$T/second.json" 2>&1)"
  RC=$?
}

# tc_refused_for KEY DIR: the second agent exited 1 naming KEY, DIR, the
# first agent's keeper and its socket, and the first agent is as it was.
tc_refused_for() {
  expect_eq "$RC" 1 "second agent's exit code (output: $OUT)"
  expect_contains "$OUT" "$1 '$2' is in use by another agent (pid $AGENT_PID, serving $SOCK)" "refusal"
}

test_a_second_agent_on_the_same_state_dir_refuses_and_the_first_is_untouched() {
  tc_first_agent
  local before; before="$(tc_snapshot)"
  tc_second '"state_dir": "'$T'/state"'
  tc_refused_for state_dir "$T/state"
  expect_eq "$(tc_snapshot)" "$before" "the first agent's tasks, state and runtime files"
  [ -e "$T/second/run/outpost.sock" ] && fail "the refused agent bound its socket"
  # Still the first agent's jobs, and they act.
  expect_exit 0 op stop first
  expect_contains "$OUT" "job first stopped" "stop"
  jt_status_is first stopped || fail "first not stopped: $(op ps)"
}

test_a_second_agent_on_the_same_runtime_dir_or_jobs_dir_refuses() {
  tc_first_agent
  local before; before="$(tc_snapshot)"
  tc_second '"runtime_dir": "'$T'/run"'
  tc_refused_for runtime_dir "$T/run"
  tc_second '"jobs_dir": "'$T'/jobs.d"'
  tc_refused_for jobs_dir "$T/jobs.d"
  expect_eq "$(tc_snapshot)" "$before" "the first agent's tasks, state and runtime files"
  # Nothing of the refused agents is left in its own dirs but what it made
  # before claiming (the dirs and their lock files): no task, job or socket.
  [ -z "$(ls "$T/second/state/jobs" "$T/second/state/tasks" 2>/dev/null)" ] || fail "the refused agent stored jobs or tasks"
}

test_the_claim_holds_across_a_worker_restart_and_an_upgrade_and_not_in_tasks() {
  cp "$OUTPOST" "$T/outpost"
  OUTPOST="$T/outpost"
  tc_first_agent
  local k="$AGENT_PID" w; w="$(op status --json | json_get pid)"
  # The worker is killed: the keeper keeps the claim while it starts another.
  kill -9 "$w"
  tc_second '"state_dir": "'$T'/state"'
  tc_refused_for state_dir "$T/state"
  wait_for 15 new_worker_answers "$w" >/dev/null || fail "no new worker after kill -9"
  # An in-place upgrade execs the keeper again: the claim crosses it.
  w="$(op status --json | json_get pid)"
  cp "$T/outpost" "$T/outpost.new" && mv "$T/outpost.new" "$T/outpost"
  kill -USR2 "$k"
  tc_second '"state_dir": "'$T'/state"'
  tc_refused_for state_dir "$T/state"
  wait_for 15 new_worker_answers "$w" >/dev/null || fail "no new worker after SIGUSR2"
  tc_second '"jobs_dir": "'$T'/jobs.d"'
  tc_refused_for jobs_dir "$T/jobs.d"
  expect_contains "$(cat "$T/state/agent.lock")" "pid $k" "the lock file names the keeper"
  # Tasks hold none of it: with the whole agent killed, its tasks still
  # running, a new agent takes the directories and recovers them.
  local pa; pa="$(jt_running_pid first/a)" || fail "first/a not running"
  ls -l /proc/"$pa"/fd | grep -q 'agent.lock' && fail "a task holds a lock file open"
  w="$(op status --json | json_get pid)"
  kill -9 "$k" "$w"
  wait_gone "$k" 10 && wait_gone "$w" 10 || fail "agent not gone"
  proc_alive "$pa" || fail "task died with the agent"
  start_agent
  expect_eq "$(jt_running_pid first/a)" "$pa" "the recovered task"
}
