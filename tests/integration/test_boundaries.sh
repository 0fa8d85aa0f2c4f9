# Privilege boundaries (docs/security.md): what a task's user can write of
# the agent's files, removal of a task dir that links outside itself, and
# two agents whose tasks have the same ids. Tasks running as other users
# need a root agent: these tests skip without root. Helpers are prefixed pb_.

pb_root() { [ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; return 1; }; }

# pb_job ID NAME USER SCRIPT: a job of one task running /bin/sh -c SCRIPT
# as USER ("" = the agent's user).
pb_job() {
  python3 -c 'import json, sys
t = {"name": sys.argv[2], "command": "/bin/sh", "args": ["-c", sys.argv[4]]}
if sys.argv[3]: t["user"] = sys.argv[3]
print(json.dumps({"id": sys.argv[1], "tasks": [t]}))' "$@"
}

# pb_logs_have [--socket S] JOB/TASK TEXT: the task's output contains TEXT.
pb_logs_have() { "$OUTPOST" --socket "${PB_SOCK:-$SOCK}" logs "$1" 2>/dev/null | grep -qF -- "$2"; }

# pb_writable_as UID: every path under the state and runtime dirs that UID
# may write to, walked by root and tested by UID (a path UID cannot reach
# counts as not writable: it cannot be written either).
pb_writable_as() {
  find "$T/state" "$T/run" -print0 |
    setpriv --reuid="$1" --regid="$1" --clear-groups xargs -0 sh -c 'for p do [ -w "$p" ] && printf "%s\n" "$p"; done; true' sh
}


test_task_users_can_write_nothing_of_the_agents_but_their_own_task_dir() {
  pb_root || return 0
  command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; return 0; }
  chmod 0755 "$T"
  start_agent
  local script="echo data >data; mkdir sub; '$HELPER' id; '$HELPER' stderr oops; exec '$HELPER' sleep 600"
  pb_job pw dyn dynamic "$script" | op run -f - >/dev/null || fail "run pw"
  pb_job pn nob nobody "$script" | op run -f - >/dev/null || fail "run pn"
  local task uid dir out
  for task in pw/dyn pn/nob; do
    wait_for 10 pb_logs_have "$task" " " || fail "$task printed nothing"
    wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' logs --stderr $task 2>&1 | grep -q oops" || fail "$task: no stderr"
  done
  for task in pw/dyn pn/nob; do
    uid="$(op logs "$task" | cut -d' ' -f1)"
    dir="$T/state/task-data/${task%/*}.${task#*/}"
    [ "$uid" -gt 0 ] || fail "$task: no uid in its output"
    expect_eq "$(stat -c %u "$dir")" "$uid" "$task: owner of its task dir"
    out="$(pb_writable_as "$uid")"
    # The walk must see what the uid may write, or it proves nothing.
    printf '%s\n' "$out" | grep -qxF "$dir/data" || fail "$task: the walk did not find $dir/data writable by $uid"
    out="$(printf '%s\n' "$out" | grep -vxF "$dir" | grep -vF "$dir/" || true)"
    [ -z "$out" ] || fail "$task: uid $uid can write files of the agent: $out"
  done
  expect_eq "$(stat -c '%a %u' "$T/run")" "700 0" "runtime dir (FIFOs, socket)"
  expect_eq "$(stat -c '%a %u' "$T/state/logs")" "700 0" "logs dir"
}

test_a_task_cannot_replace_its_fifos_or_log_files() {
  pb_root || return 0
  chmod 0755 "$T"
  start_agent
  pb_job pf a dynamic "echo first; exec '$HELPER' sleep 600" | op run -f - >/dev/null || fail "run pf"
  wait_for 10 pb_logs_have pf/a first || fail "pf/a printed nothing"
  local fifo="$T/run/fifo/pf.a.stdout" log="$T/state/logs/pf.a/a.stdout"
  [ -p "$fifo" ] || fail "no FIFO at $fifo"
  [ -f "$log" ] || fail "no log file at $log"
  local fifo_ino log_ino
  fifo_ino="$(stat -c %i "$fifo")"; log_ino="$(stat -c %i "$log")"
  # As the task (exec runs as its user, in its environment): every way to
  # replace, move, truncate or add next to them fails.
  local try
  for try in "rm -f '$fifo'" "mv '$fifo' '$fifo.x'" "mkfifo '$T/run/fifo/pf.b.stdout'" \
             "rm -f '$log'" "mv '$log' '$log.x'" "ln -sf /etc/passwd '$log'" ": >'$log'" \
             "ln -s /etc/passwd '$T/state/logs/pf.a/a.stdout.1'" "rm -rf '$T/state/logs/pf.a'"; do
    if op exec pf/a -- /bin/sh -c "$try" >/dev/null 2>&1; then fail "the task could: $try"; fi
  done
  expect_eq "$(stat -c %i "$fifo")" "$fifo_ino" "the FIFO is the one the agent made"
  [ -p "$fifo" ] || fail "FIFO replaced"
  expect_eq "$(stat -c %i "$log")" "$log_ino" "the log file is the one the agent made"
  grep -qx first "$log" || fail "log file lost its content: $(cat "$log")"
  if [ -e "$T/run/fifo/pf.b.stdout" ] || [ -e "$log.x" ] || [ -e "$fifo.x" ]; then
    fail "the task made a file next to them"
  fi
}

# A directory in the task dir swapped for a symlink to an outside directory,
# over and over while `outpost rm` removes the task dir: nothing outside
# it is removed. The swapping runs as the task's user (nobody), from outside
# the task, so the task's kill does not stop it.
test_rm_never_removes_outside_the_task_dir_even_while_links_are_swapped_in() {
  pb_root || return 0
  command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; return 0; }
  chmod 0755 "$T"
  mkdir -p "$T/canary/sub" && echo keep >"$T/canary/sub/file"
  start_agent
  local dir="$T/state/task-data/sw.a"
  pb_job sw a nobody "ln -s '$T/canary' link; mkdir -p deep/a; ln -s '$T/canary' deep/a/link;
    ln -s '$T/canary/sub/file' filelink; echo ready; exec '$HELPER' sleep 600" | op run -f - >/dev/null || fail "run sw"
  wait_for 10 pb_logs_have sw/a ready || fail "sw/a did not get ready"
  [ -L "$dir/deep/a/link" ] || fail "no link in the task dir"
  setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c '
    cd "$1" || exit 1
    while [ ! -e "$2/stop" ]; do
      mkdir -p s/x/y; : >s/x/f; : >s/x/y/g; : >s/started
      mv s s.old && ln -s "$2/canary" s
      rm -f s; mv s.old s
      mv s/x s/x.old && ln -s "$2/canary" s/x
      rm -f s/x; mv s/x.old s/x
    done 2>/dev/null' sh "$dir" "$T" &
  local swapper=$!
  echo "$swapper" >>"$T/.pids"
  wait_for 10 test -e "$dir/s/started" || fail "the swapper did not start"
  expect_exit 0 op rm sw
  # (The swapper may end as rm takes its working dir away: it ran while rm
  # started, which is the race; the canary is what must hold.)
  touch "$T/stop"
  wait "$swapper" 2>/dev/null
  [ "$(cat "$T/canary/sub/file" 2>/dev/null)" = keep ] || fail "rm removed $T/canary/sub/file through a link"
  # Whatever the race left in the task dir goes with the next rm of that id.
  if [ -e "$dir" ]; then
    pb_job sw a nobody "exec '$HELPER' sleep 600" | op run -f - >/dev/null || fail "run sw again"
    expect_exit 0 op rm sw
  fi
  [ -e "$dir" ] && fail "task dir left after rm: $(ls -la "$dir")"
  [ "$(cat "$T/canary/sub/file" 2>/dev/null)" = keep ] || fail "canary removed"
}

# Without cgroup v2 a task's processes are found by a per-start marker in
# their environment, not by the task id, which another agent's task can
# share: removing it in one agent leaves the other's alone, including the
# processes that left the task's process group.
test_rm_in_one_agent_leaves_another_agents_task_with_the_same_ids_running() {
  start_agent
  mkdir -p "$T/b"
  cat >"$T/b/config.json" <<JSON
{"state_dir": "$T/b/state", "runtime_dir": "$T/b/run", "jobs_dir": "$T/b/jobs.d", "cgroup_root": "$T/no-cgroup"}
JSON
  "$OUTPOST" agent --config "$T/b/config.json" >>"$T/agent-b.log" 2>&1 &
  echo $! >>"$T/.pids"
  local sock_b="$T/b/run/outpost.sock"
  wait_for 10 "$OUTPOST" --socket "$sock_b" status >/dev/null || fail "agent b did not start: $(tail -n 5 "$T/agent-b.log")"
  local doc
  doc="$(pb_job twin a "" "'$HELPER' orphan 600; exec '$HELPER' sleep 600")"
  printf '%s\n' "$doc" | op run -f - >/dev/null || fail "run twin on a"
  printf '%s\n' "$doc" | "$OUTPOST" --socket "$sock_b" run -f - >/dev/null || fail "run twin on b"
  wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' logs twin/a | grep -q '^[0-9]'" || fail "a: no orphan pid"
  wait_for 10 sh -c "'$OUTPOST' --socket '$sock_b' logs twin/a | grep -q '^[0-9]'" || fail "b: no orphan pid"
  local orphan_a orphan_b main_a main_b
  orphan_a="$(op logs twin/a | head -n1)"
  orphan_b="$("$OUTPOST" --socket "$sock_b" logs twin/a | head -n1)"
  main_a="$(op --json inspect twin/a | json_get pid)"
  main_b="$("$OUTPOST" --socket "$sock_b" --json inspect twin/a | json_get pid)"
  local p
  for p in "$orphan_a" "$orphan_b"; do
    proc_alive "$p" || fail "orphan $p not running"
    tr '\0' '\n' <"/proc/$p/environ" | grep -qx "OUTPOST_TASK_ID=twin.a" || fail "orphan $p does not carry the shared id"
    [ "$(ps -o sid= -p "$p" | tr -d ' ')" = "$p" ] || fail "orphan $p is not in a session of its own"
  done
  expect_exit 0 op rm twin
  wait_for 10 proc_gone "$orphan_a" ||
    fail "a's orphan $orphan_a survived rm"
  proc_alive "$main_a" && fail "a's task $main_a survived rm"
  proc_alive "$orphan_b" || fail "rm in agent a killed agent b's orphan $orphan_b"
  proc_alive "$main_b" || fail "rm in agent a killed agent b's task $main_b"
  expect_eq "$("$OUTPOST" --socket "$sock_b" --json inspect twin/a | json_get state)" "running" "b's task state"
}
