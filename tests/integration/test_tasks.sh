# Bare tasks through the CLI: start, results, logs, stop, rm, exec, events.

# task_state ID: prints the state field.
task_field() { op --json task inspect "$1" | json_get "$2"; }
task_exited() { [ "$(task_field "$1" state)" = exited ]; }

test_task_runs_and_reports_exit_code_and_output() {
  start_agent
  expect_exit 0 op task run --id t1 -- "$HELPER" lines 5 L
  expect_eq "$OUT" "t1" "printed id"
  wait_for 10 task_exited t1 || fail "t1 did not exit"
  expect_eq "$(task_field t1 exit_code)" "0" "exit code"
  expect_exit 0 op logs t1
  expect_eq "$OUT" "$(printf 'L1\nL2\nL3\nL4\nL5')" "logs"
  expect_exit 0 op task run --id t2 -- "$HELPER" exit 7
  wait_for 10 task_exited t2
  expect_eq "$(task_field t2 exit_code)" "7" "exit 7"
  expect_exit 0 op task run --id t3 -- "$HELPER" stderr "to stderr"
  wait_for 10 task_exited t3
  expect_exit 0 op logs --stderr t3
  expect_eq "$OUT" "to stderr" "stderr log"
  expect_exit 0 op task ls
  expect_contains "$OUT" "t2" "ls"
  expect_contains "$OUT" "exit 7" "ls shows result"
}

test_task_start_errors_are_clear() {
  start_agent
  expect_exit 1 op task run --id nf -- no-such-command-xyz
  expect_contains "$OUT" "command \"no-such-command-xyz\" not found in PATH=" "not found"
  expect_contains "$OUT" "(exit status 127)" "127"
  expect_exit 1 op task run --id nu --user no-such-user-xyz -- "$HELPER" exit 0
  expect_contains "$OUT" "user \"no-such-user-xyz\" not found in /etc/passwd" "unknown user"
  expect_exit 1 op task run --id wd --workdir rel -- "$HELPER" exit 0
  expect_contains "$OUT" "working dir \"rel\" must be an absolute path" "workdir"
  expect_exit 0 op task run --id dup -- "$HELPER" sleep 30
  expect_exit 1 op task run --id dup -- "$HELPER" sleep 30
  expect_contains "$OUT" "task with ID \"dup\" already started" "duplicate"
  expect_exit 1 op task run --id 'bad/id' -- "$HELPER" exit 0
  expect_contains "$OUT" "may only contain letters" "bad id"
  expect_exit 2 op task run --id x --env NOEQUALS -- "$HELPER" exit 0
  expect_contains "$OUT" "--env needs NAME=VALUE" "bad env"
  expect_exit 1 op task inspect missing
  expect_contains "$OUT" "task not found for given id" "unknown id"
  expect_exit 1 op task run --id ks --kill-signal SIGNOPE -- "$HELPER" exit 0
  expect_contains "$OUT" "unknown signal" "bad kill signal"
  # Nothing half-created is left behind by the failures.
  expect_exit 0 op --json task ls
  expect_eq "$(echo "$OUT" | python3 -c 'import json,sys; print(sorted(t["id"] for t in json.load(sys.stdin)))')" \
    "['dup']" "only the good task exists"
}

test_stop_escalates_and_rm_refuses_running_tasks() {
  start_agent
  op task run --id stubborn --kill-timeout 300ms -- "$HELPER" ignore-term 60 >/dev/null
  local pid; pid="$(task_field stubborn pid)"
  wait_for 5 sig_in_mask "$pid" SigIgn 15
  expect_exit 1 op task rm stubborn
  expect_contains "$OUT" "cannot destroy running task" "rm running"
  expect_exit 0 op task stop stubborn
  expect_eq "$(task_field stubborn signal)" "9" "killed after the timeout"
  expect_eq "$(task_field stubborn exit_code)" "137" "128+9"
  expect_exit 0 op task stop stubborn   # stopping an exited task is fine
  expect_exit 0 op task rm stubborn
  expect_exit 1 op task inspect stubborn
  proc_alive "$pid" && fail "process $pid still alive"
  true
}

test_rm_force_kills_background_children() {
  start_agent
  op task run --id bg -- /bin/sh -c "$HELPER orphan 120; sleep 120" >/dev/null
  wait_for 10 sh -c "op logs bg | grep -q '^[0-9]'"
  local orphan; orphan="$(op logs bg | head -n1)"
  kill -0 "$orphan" || fail "orphan $orphan not running"
  expect_exit 0 op task rm --force bg
  wait_for 10 proc_gone "$orphan" \
    || fail "orphan $orphan survived rm --force"
}

# A daemon in a session of its own with a child of its own: when the task
# ends, the daemon moves up to the keeper but its child stays below it; both
# must go (the sweep walks the daemon's tree before killing it).
test_rm_force_kills_a_daemons_children_too() {
  start_agent
  op task run --id deep -- /bin/sh -c "setsid /bin/sh -c '$HELPER sleep 120 & echo \$!; wait' & sleep 120" >/dev/null
  wait_for 10 sh -c "op logs deep | grep -q '^[0-9]'"
  local grandchild; grandchild="$(op logs deep | head -n1)"
  kill -0 "$grandchild" || fail "process $grandchild not running"
  local daemon; daemon="$(awk '{print $4}' "/proc/$grandchild/stat")"
  expect_exit 0 op task rm --force deep
  local p
  for p in "$daemon" "$grandchild"; do
    wait_for 10 proc_gone "$p" \
      || fail "process $p survived rm --force"
  done
}

test_signal_exec_stats_and_events() {
  start_agent
  op task run --id sig --env MARK=hello -- "$HELPER" trap USR1 42 >/dev/null
  local pid; pid="$(task_field sig pid)"
  wait_for 5 sig_in_mask "$pid" SigCgt 10
  expect_exit 0 op task exec sig -- "$HELPER" env
  expect_contains "$OUT" "MARK=hello" "exec sees the task env"
  expect_exit 9 op task exec sig -- "$HELPER" exit 9
  expect_exit 0 op task stats sig
  expect_contains "$OUT" "measured: RSS" "stats"
  expect_exit 0 op task signal sig USR1
  wait_for 5 task_exited sig
  expect_eq "$(task_field sig exit_code)" "42" "trapped signal exit code"
  expect_exit 1 op task signal sig BOGUS
  expect_exit 0 op events sig
  expect_contains "$OUT" "started" "events"
  expect_contains "$OUT" "exited with code 42" "events"
  expect_exit 0 op --json events
  expect_eq "$(echo "$OUT" | head -n1 | json_get type)" "started" "json events"
}

test_logs_follow_until_exit() {
  start_agent
  op task run --id f -- /bin/sh -c "for i in 1 2 3; do echo line\$i; sleep 0.2; done" >/dev/null
  expect_exit 0 op logs -f --tail 100 f
  expect_eq "$OUT" "$(printf 'line1\nline2\nline3')" "followed output"
  expect_exit 0 op logs --tail 1 f
  expect_eq "$OUT" "line3" "tail 1"
}

test_log_rotation_keeps_files_under_the_limit() {
  start_agent
  op task run --id rot --max-file-size 4KiB --max-files 3 -- "$HELPER" lines 3000 >/dev/null
  wait_for 10 task_exited rot
  local dir; dir="$(task_field rot log_dir)"
  [ -f "$dir/rot.stdout" ] && [ -f "$dir/rot.stdout.1" ] && [ -f "$dir/rot.stdout.2" ] || fail "rotated files missing: $(ls "$dir")"
  [ -e "$dir/rot.stdout.3" ] && fail "max-files 3 exceeded: $(ls "$dir")"
  local f size
  for f in "$dir"/rot.stdout*; do
    size=$(stat -c %s "$f")
    [ "$size" -le 4096 ] || fail "$f is $size bytes, over the 4KiB limit"
    [ "$(tail -c1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || fail "$f does not end at a line boundary"
  done
  # The newest lines are in the active file, in order.
  expect_eq "$(tail -n1 "$dir/rot.stdout")" "3000" "last line"
  cat "$dir/rot.stdout.2" "$dir/rot.stdout.1" "$dir/rot.stdout" | awk 'NR>1 && $1 != prev+1 {bad=1} {prev=$1} END {exit bad}' \
    || fail "lines out of order across files"
}

test_fifos_are_private_to_the_task_user() {
  [ "$(id -u)" = 0 ] || return 0
  chmod 0755 "$T"   # mktemp made it 0700; nobody must reach its task dir below
  start_agent
  op task run --id nob --user nobody -- "$HELPER" sleep 30 >/dev/null
  local fifo="$T/run/fifo/nob.stdout"
  [ -p "$fifo" ] || fail "no FIFO at $fifo"
  expect_eq "$(stat -c '%a %u' "$fifo")" "600 65534" "FIFO mode and owner"
  expect_exit 0 op task exec nob -- "$HELPER" id
  expect_contains "$OUT" "65534 65534" "exec runs as the task user"
}

test_stop_reports_a_stopped_event() {
  start_agent
  op task run --id s1 -- "$HELPER" sleep 60 >/dev/null
  expect_exit 0 op task stop s1 --timeout 2s
  expect_exit 0 op events s1
  expect_contains "$OUT" "stopping" "stop requested"
  expect_contains "$OUT" "stopped" "stop finished"
}
