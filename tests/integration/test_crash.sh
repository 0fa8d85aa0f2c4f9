# Crash tests: the worker (and separately the whole agent) is killed with
# SIGKILL while a task prints numbered lines at full speed. Every line must
# reach the log files exactly once, in order; exit codes must be real.

worker_pid() { op status --json 2>/dev/null | json_get pid; }
keeper_pid() { op status --json 2>/dev/null | json_get keeper_pid; }
task_field() { op --json task inspect "$1" | json_get "$2"; }
task_exited() { [ "$(task_field "$1" state)" = exited ]; }

# all_lines DIR NAME: the stream across rotated files, oldest first.
all_lines() {
  local dir="$1" name="$2" i
  for i in $(seq 200 -1 1); do [ -f "$dir/$name.stdout.$i" ] && cat "$dir/$name.stdout.$i"; done
  cat "$dir/$name.stdout"
}

# check_numbered FILE N: FILE holds exactly the lines 1..N.
check_numbered() {
  local got; got="$(awk -v n="$2" 'NR != $1 {print "line " NR " is \"" $0 "\""; exit 1} END {if (NR != n) {print "got " NR " lines, expected " n; exit 1}}' "$1")" \
    || fail "log not exactly once in order: $got"
}

new_worker_answers() { local p; p="$(worker_pid)" && [ -n "$p" ] && [ "$p" != "$1" ]; }

test_worker_kill_loses_no_line_and_no_exit_code() {
  start_agent
  local n=400000
  op task run --id spew --max-file-size 256KiB --max-files 200 -- "$HELPER" lines "$n" >/dev/null
  local k w
  for k in 1 2 3; do
    w="$(worker_pid)"
    kill -9 "$w"
    wait_for 15 new_worker_answers "$w" || fail "no new worker after kill $k"
  done
  wait_for 60 task_exited spew || fail "spew did not finish"
  expect_eq "$(task_field spew exit_code)" "0" "spew exit code"
  local dir; dir="$(task_field spew log_dir)"
  all_lines "$dir" spew >"$T/all.txt"
  check_numbered "$T/all.txt" "$n"
  # A task that exits while no worker runs reports its real exit code.
  op task run --id trap -- "$HELPER" trap USR1 7 >/dev/null
  local tp; tp="$(task_field trap pid)"
  wait_for 5 sig_in_mask "$tp" SigCgt 10
  w="$(worker_pid)"
  local kp; kp="$(keeper_pid)"
  kill -STOP "$kp"   # hold the keeper so no worker can come back yet
  kill -9 "$w"
  kill -USR1 "$tp"
  # The task is now a zombie (its parent, the keeper, is stopped).
  wait_for 5 grep -q '^State:[[:space:]]*Z' "/proc/$tp/status" || fail "trap did not exit"
  kill -CONT "$kp"
  wait_for 15 new_worker_answers "$w" || fail "no new worker"
  wait_for 10 task_exited trap || fail "trap exit not reported"
  expect_eq "$(task_field trap exit_code)" "7" "real exit code across the worker's death"
  expect_eq "$(task_field trap error)" "" "no error"
}

test_whole_agent_kill_keeps_tasks_and_every_line() {
  start_agent
  local n=300000
  op task run --id spew2 -- "$HELPER" lines "$n" >/dev/null
  op task run --id sleeper -- "$HELPER" sleep 600 >/dev/null
  local sp; sp="$(task_field sleeper pid)"
  local k w
  k="$(keeper_pid)"; w="$(worker_pid)"
  kill -9 "$k" "$w"
  wait_gone "$w" 5
  kill -0 "$sp" || fail "sleeper died with the agent"
  start_agent
  expect_eq "$(task_field sleeper state)" "running" "sleeper recovered"
  expect_eq "$(task_field sleeper pid)" "$sp" "same pid"
  wait_for 60 task_exited spew2 || fail "spew2 did not finish"
  all_lines "$(task_field spew2 log_dir)" spew2 >"$T/all2.txt"
  check_numbered "$T/all2.txt" "$n"
  expect_exit 0 op task stop sleeper --timeout 1s
  expect_eq "$(task_field sleeper state)" "exited" "stopped"
  expect_exit 0 op task rm sleeper
  proc_alive "$sp" && fail "sleeper still alive"
  true
}

test_no_zombies_or_strays_after_rm() {
  start_agent
  local i
  for i in 1 2 3; do op task run --id z$i -- "$HELPER" exit "$i" >/dev/null; done
  op task run --id bgz -- /bin/sh -c "$HELPER orphan 300 >/dev/null; exec $HELPER sleep 300" >/dev/null
  for i in 1 2 3; do wait_for 10 task_exited z$i || fail "z$i"; done
  expect_exit 0 op task rm --force bgz
  for i in 1 2 3; do op task rm z$i >/dev/null || fail "rm z$i"; done
  local k; k="$(keeper_pid)"
  wait_for 5 sh -c "! grep -l '^PPid:[[:space:]]*$k\$' /proc/[0-9]*/status 2>/dev/null | xargs -r grep -l '^State:[[:space:]]*Z' | grep -q ." \
    || fail "zombie children of the keeper remain"
  local strays
  strays="$(grep -l "OUTPOST_TASK_ID=bgz" /proc/[0-9]*/environ 2>/dev/null | grep -v self || true)"
  [ -z "$strays" ] || fail "processes of bgz still running: $strays"
}

# The task writes its output and exits while no worker runs: the keeper
# holds the task's FIFOs, so nothing is lost when the next worker reads.
# (5,000 lines, 24 KiB: what fits in a FIFO of the default 64 KiB, which a
# task that never wrote much keeps; more would wait for the next worker.)
test_output_of_a_task_that_exits_while_no_worker_runs_is_kept() {
  start_agent
  op task run --id late -- /bin/sh -c "trap '$HELPER lines 5000; exit 3' USR1; while :; do sleep 0.05; done" >/dev/null
  local tp; tp="$(task_field late pid)"
  wait_for 5 sig_in_mask "$tp" SigCgt 10 || fail "trap not installed"
  local w kp; w="$(worker_pid)"; kp="$(keeper_pid)"
  kill -STOP "$kp"
  kill -9 "$w"
  # With the keeper stopped nobody reaps the worker: it stays a zombie.
  wait_for 5 grep -q '^State:[[:space:]]*Z' "/proc/$w/status" || fail "worker did not die"
  kill -USR1 "$tp"
  wait_for 10 grep -q '^State:[[:space:]]*Z' "/proc/$tp/status" || fail "task did not finish while the worker was down"
  kill -CONT "$kp"
  wait_for 15 new_worker_answers "$w" || fail "no new worker"
  wait_for 10 task_exited late || fail "exit not reported"
  expect_eq "$(task_field late exit_code)" "3" "exit code"
  all_lines "$(task_field late log_dir)" late >"$T/late.txt"
  check_numbered "$T/late.txt" 5000
}

# ghost NAME: starts a process marked as one of this agent's tasks (what a
# worker killed between spawning a task and writing its record leaves) and
# prints its pid.
ghost() {
  mkdir -p "$T/state/task-data/$1"
  OUTPOST_TASK_DIR="$T/state/task-data/$1/" setsid "$HELPER" sleep 600 </dev/null >/dev/null 2>&1 &
  local pid=$!
  echo "$pid" >>"$T/.pids"
  wait_for 5 grep -q OUTPOST_TASK_DIR "/proc/$pid/environ" || fail "ghost $1 did not start"
  echo "$pid"
}
restart_worker() {
  local w; w="$(worker_pid)"
  kill -9 "$w"
  wait_for 15 new_worker_answers "$w" || fail "no new worker"
}

# A process of one of this agent's task dirs that no running record accounts
# for is killed by the next worker of the same boot. The first worker since
# boot (<state_dir>/boot-id names another boot) does not look: nothing of an
# earlier agent can have survived a reboot. A new state dir whose runtime
# dir is on disk is looked through (the runtime dir may have outlived the
# boot's other agents; on tmpfs, see the next test).
test_an_unrecorded_task_process_is_killed_by_the_next_worker_of_the_boot() {
  start_agent
  case "$(stat -f -c %T "$T/run")" in
    tmpfs|ramfs) echo "SKIP (part): $T/run is on tmpfs: a new state dir there is a first start" ;;
    *) expect_not_contains "$(cat "$T/agent.log")" "first start since boot" "a new state dir is not taken for a reboot" ;;
  esac
  local now; now="$(cat /proc/sys/kernel/random/boot_id)"
  expect_eq "$(cat "$T/state/boot-id")" "$now" "boot id recorded in the state dir"
  expect_eq "$(cat "$T/run/boot-id")" "$now" "boot id recorded in the runtime dir"
  local g1; g1="$(ghost ghost)" || fail "ghost did not start"
  restart_worker
  wait_for 10 proc_gone "$g1" || fail "the unrecorded process $g1 survived the new worker's recovery"
  expect_contains "$(cat "$T/agent.log")" "killing a task process that no record accounts for" "logged"
  local before; before="$(grep -c "first start since boot" "$T/agent.log")"
  # As if the node had rebooted (a runtime dir on disk keeps its file): the
  # next worker does not look.
  local g2; g2="$(ghost ghost)" || fail "ghost did not start"
  echo "an-earlier-boot" >"$T/state/boot-id"
  echo "an-earlier-boot" >"$T/run/boot-id"
  restart_worker
  expect_eq "$(grep -c "first start since boot" "$T/agent.log")" "$((before + 1))" "the other boot id was taken for a reboot"
  kill -0 "$g2" || fail "the first worker since boot looked for leftovers"
  kill -9 "$g2"
  # The state dir names another boot but the runtime dir this one (a state
  # dir put back from another boot while the agent ran): look.
  local g3; g3="$(ghost ghost)" || fail "ghost did not start"
  echo "an-earlier-boot" >"$T/state/boot-id"
  restart_worker
  expect_eq "$(grep -c "first start since boot" "$T/agent.log")" "$((before + 1))" "the runtime dir's boot id was ignored"
  wait_for 10 proc_gone "$g3" || fail "the unrecorded process $g3 survived: the runtime dir's boot id was ignored"
}

# A runtime dir on tmpfs starts empty at every boot: a new state dir with a
# runtime dir there that has no boot-id is the first start of the boot (the
# benchmark's and a freshly provisioned board's case), and the worker does
# not look. Once a worker has written <runtime_dir>/boot-id, the next one
# of the boot looks, even if the state dir was wiped meanwhile.
test_a_new_state_dir_with_a_new_runtime_dir_on_tmpfs_is_a_first_start() {
  local rd
  rd="$(tmpfs_dir)" || { echo "SKIP: /dev/shm is not tmpfs"; return 0; }
  write_config '"runtime_dir": "'"$rd"'"'
  # Nothing of this boot can be marked like this before the first start;
  # here one is, to see that the first worker does not look.
  local g0; g0="$(ghost ghost)" || fail "ghost did not start"
  start_agent
  expect_eq "$(grep -c "first start since boot" "$T/agent.log")" "1" "a new tmpfs runtime dir was not taken for a first start"
  expect_contains "$(cat "$T/agent.log")" "runtime dir on tmpfs without a boot-id" "reason logged"
  kill -0 "$g0" || fail "the first worker since boot looked for leftovers"
  local now; now="$(cat /proc/sys/kernel/random/boot_id)"
  expect_eq "$(cat "$rd/boot-id")" "$now" "boot id recorded in the runtime dir"
  restart_worker
  wait_for 10 proc_gone "$g0" || fail "the next worker of the boot did not kill the unrecorded process $g0"
  # A wiped state dir (its boot-id gone): the runtime dir's says an agent
  # ran in this boot, so the next worker looks.
  local g1; g1="$(ghost ghost)" || fail "ghost did not start"
  rm "$T/state/boot-id"
  restart_worker
  wait_for 10 proc_gone "$g1" || fail "the unrecorded process $g1 survived although $rd/boot-id was there"
  expect_eq "$(grep -c "first start since boot" "$T/agent.log")" "1" "a runtime dir with a boot-id was taken for a first start"
  expect_eq "$(cat "$T/state/boot-id")" "$now" "boot id recorded again in the state dir"
}
