# The keeper (docs/process-model.md): the process `outpost agent` starts,
# parent of the worker and of every task. $AGENT_PID is the keeper; the
# worker's pid is what `status --json` reports as "pid".

worker_pid() { op status --json | json_get pid; }

# A worker other than $1 answers status.
new_worker_answers() { local w; w="$(worker_pid)" && [ -n "$w" ] && [ "$w" != "$1" ]; }

log_count() { grep -c -- "$1" "$T/agent.log"; }

# start_keeper_with_wrapper: runs the keeper from $T/outpost, then replaces
# that file with a script (the keeper execs whatever is at its path). Each
# later worker start runs the script, which
#   - exits 1 at once while $T/fail-worker exists (a worker failing at start);
#   - when $T/want-orphan exists, first leaves behind a process that the
#     keeper adopts as a child subreaper, like a task's daemonised child
#     (its pid in $T/orphan.pid; SIGTERM makes it exit 7).
# The CLI runs $T/outpost.real.
start_keeper_with_wrapper() {
  cp "$OUTPOST" "$T/outpost.real"
  cp "$OUTPOST" "$T/outpost"
  OUTPOST="$T/outpost.real"
  write_config '"log_level": "debug"'
  "$T/outpost" agent --config "$T/config.json" >>"$T/agent.log" 2>&1 &
  AGENT_PID=$!
  echo "$AGENT_PID" >>"$T/.pids"
  wait_for 10 op status >/dev/null || fail "agent did not answer status: $(tail -n 5 "$T/agent.log")"
  cat >"$T/outpost.tmp" <<SCRIPT
#!/bin/sh
case " \$* " in *" --worker "*)
  [ -e "$T/fail-worker" ] && { echo "test wrapper: worker fails at start" >&2; exit 1; }
  if [ -e "$T/want-orphan" ]; then
    rm -f "$T/want-orphan"
    fd=""
    for a in "\$@"; do case "\$a" in --keeper-fd=*) fd="\${a#--keeper-fd=}" ;; esac; done
    ( [ -n "\$fd" ] && eval "exec \$fd>&-"; "$HELPER" trap TERM 7 </dev/null >/dev/null 2>&1 & echo \$! >"$T/orphan.pid" )
    cat "$T/orphan.pid" >>"$T/.pids"
  fi ;;
esac
exec "$T/outpost.real" "\$@"
SCRIPT
  chmod +x "$T/outpost.tmp"
  mv "$T/outpost.tmp" "$T/outpost"
}

# Makes the next worker leave an orphan, restarts the worker, waits for both.
adopt_an_orphan() {
  local w; w="$(worker_pid)"
  touch "$T/want-orphan"
  kill -9 "$w"
  wait_for 10 new_worker_answers "$w" || fail "no new worker after kill -9 $w"
  [ -s "$T/orphan.pid" ] || fail "the wrapper left no orphan"
  ORPHAN="$(cat "$T/orphan.pid")"
  wait_for 5 grep -q "^PPid:[[:space:]]*$AGENT_PID\$" "/proc/$ORPHAN/status" >/dev/null ||
    fail "orphan $ORPHAN was not adopted by the keeper $AGENT_PID: $(grep PPid "/proc/$ORPHAN/status")"
}

test_keeper_is_the_parent_of_the_worker_and_closes_its_socket_on_exec() {
  start_agent
  local w; w="$(worker_pid)"
  expect_exit 0 op status --json
  expect_eq "$(echo "$OUT" | json_get keeper_pid)" "$AGENT_PID" "keeper_pid"
  expect_eq "$(echo "$OUT" | json_get features.keeper.enabled)" "True" "keeper feature"
  expect_eq "$(awk '/^PPid:/{print $2}' "/proc/$w/status")" "$AGENT_PID" "worker's parent"
  local cmd; cmd="$(tr '\0' ' ' <"/proc/$w/cmdline")"
  expect_contains "$cmd" "agent --config $T/config.json --worker --keeper-fd=" "worker command line"
  # The worker made its end close-on-exec: tasks and plugins never inherit it.
  local fd="${cmd##*--keeper-fd=}"; fd="${fd%% *}"
  local flags; flags="$(awk '/^flags:/{print $2}' "/proc/$w/fdinfo/$fd")"
  [ $((8#$flags & 8#2000000)) -ne 0 ] || fail "worker's keeper fd $fd is not close-on-exec (flags $flags)"
  expect_contains "$(cat "$T/agent.log")" "keeper started pid=$AGENT_PID" "log"
  expect_contains "$(cat "$T/agent.log")" "worker ready pid=$w" "log"
}

test_killed_worker_is_restarted_and_the_keeper_stays() {
  start_agent
  local w; w="$(worker_pid)"
  kill -9 "$w"
  wait_for 10 new_worker_answers "$w" || fail "no new worker answered after kill -9 $w"
  expect_exit 0 op status --json
  expect_eq "$(echo "$OUT" | json_get keeper_pid)" "$AGENT_PID" "same keeper"
  kill -0 "$AGENT_PID" || fail "keeper gone"
  local log; log="$(cat "$T/agent.log")"
  expect_contains "$log" "worker exited pid=$w status=\"killed by SIGKILL\"" "exit logged"
  expect_contains "$log" "restarting the worker in=0s" "the first restart is immediate"
  expect_contains "$log" "replacing stale API socket" "the new worker took over the socket"
}

test_worker_failing_at_start_is_retried_with_backoff_not_in_a_loop() {
  start_agent
  local w; w="$(worker_pid)"
  # The next workers cannot start: the socket path is taken by a plain file.
  rm -f "$SOCK" && echo taken >"$SOCK"
  local t0=$SECONDS
  kill -9 "$w"
  # Starts at once, then at about +0.5 s, +1.5 s, +3.5 s fail; the next waits 4 s.
  wait_for 15 grep -q "restarting the worker in=4s" "$T/agent.log" || fail "backoff did not reach 4s"
  local elapsed=$((SECONDS - t0))
  [ "$elapsed" -ge 3 ] || fail "four failed starts took only ${elapsed}s: no backoff"
  expect_eq "$(log_count 'worker started')" "5" "worker starts (first + 4 retries)"
  expect_eq "$(log_count 'refusing to replace')" "4" "failed starts"
  expect_eq "$(log_count 'restarting the worker in=0s')" "1" "only the first restart is immediate"
  expect_contains "$(cat "$T/agent.log")" "restarting the worker in=2s" "backoff doubles"
  kill -0 "$AGENT_PID" || fail "the keeper gave up"
  # Fixed: the next attempt succeeds.
  rm -f "$SOCK"
  wait_for 10 new_worker_answers "$w" || fail "worker did not come back after the fix"
  expect_eq "$(op status --json | json_get keeper_pid)" "$AGENT_PID" "same keeper"
}

test_bad_config_exits_2_at_once_without_starting_a_worker() {
  echo '{"log_levle": "debug"}' >"$T/config.json"
  expect_exit 2 timeout 10 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "log_levle: unknown field" "message"
  expect_not_contains "$OUT" "worker started" "no worker"
  expect_not_contains "$OUT" "keeper started" "no keeper"
}

test_first_worker_failing_ends_the_keeper_with_its_status() {
  write_config
  mkdir -p "$T/run" && echo data >"$SOCK"
  expect_exit 1 timeout 10 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "refusing to replace" "worker's error"
  expect_contains "$OUT" "the worker failed to start; the keeper exits with its status exit_code=1" "keeper verdict"
  expect_not_contains "$OUT" "restarting the worker" "no retry"
}

test_sigterm_stops_keeper_and_worker_even_a_stopped_worker() {
  start_agent
  local w; w="$(worker_pid)"
  kill -STOP "$w"  # the keeper sends SIGCONT after SIGTERM
  kill -TERM "$AGENT_PID"
  wait "$AGENT_PID"
  expect_eq "$?" "0" "keeper exit status"
  wait_gone "$w" 5 || fail "worker $w still running"
  [ -e "$SOCK" ] && fail "socket left behind"
  local log; log="$(cat "$T/agent.log")"
  expect_contains "$log" "stopping on SIGTERM; tasks keep running" "keeper log"
  expect_contains "$log" "worker exited pid=$w status=\"exit code 0\"" "worker stopped cleanly"
  expect_contains "$log" "keeper stopped exit_code=0" "keeper log"
}

test_sighup_reaches_the_worker() {
  write_config '"log_level": "info"'
  start_agent
  local w; w="$(worker_pid)"
  write_config '"log_level": "debug"'
  kill -HUP "$AGENT_PID"
  wait_for 5 grep -q "config reloaded" "$T/agent.log" || fail "no reload logged"
  expect_contains "$(cat "$T/agent.log")" "SIGHUP: forwarding to the worker (configuration reload) pid=$w" "keeper log"
  expect_eq "$(worker_pid)" "$w" "same worker"
}

test_keeper_gone_makes_the_worker_exit() {
  start_agent
  local w; w="$(worker_pid)"
  kill -9 "$AGENT_PID"
  wait "$AGENT_PID" 2>/dev/null
  wait_gone "$w" 10 || fail "worker $w survived its keeper"
  expect_contains "$(cat "$T/agent.log")" "the keeper went away; stopping the worker" "worker log"
  [ -e "$SOCK" ] && fail "the worker left its socket behind"
  true
}

test_no_keeper_runs_the_worker_alone() {
  start_agent --no-keeper
  expect_exit 0 op status --json
  expect_eq "$(echo "$OUT" | json_get pid)" "$AGENT_PID" "pid"
  expect_eq "$(echo "$OUT" | json_get keeper_pid)" "0" "keeper_pid"
  expect_eq "$(echo "$OUT" | json_get features.keeper.enabled)" "False" "keeper feature"
  expect_exit 0 op status
  expect_contains "$OUT" "agent pid $AGENT_PID (no keeper)" "human status"
  expect_not_contains "$(cat "$T/agent.log")" "keeper started" "no keeper"
}

test_internal_flags_are_checked() {
  expect_exit 2 "$OUTPOST" agent --worker
  expect_contains "$OUT" "--worker needs --keeper-fd=N" "message"
  expect_exit 2 "$OUTPOST" agent --keeper-fd=3
  expect_exit 2 "$OUTPOST" agent --no-keeper --keeper-journal-fd=3
  expect_exit 2 "$OUTPOST" agent --keeper-empty
  expect_contains "$OUT" "--keeper-empty is only for --worker" "message"
}

worker_told_empty() { tr '\0' '\n' <"/proc/$1/cmdline" | grep -qx -- --keeper-empty; }

# A keeper with no child and no exit held tells the worker it starts so
# (--keeper-empty), and the worker recovers its jobs without waiting for the
# keeper's (empty) replay. With a task running, the keeper is its parent:
# the next worker is not told, and waits. A new keeper after a stop of the
# whole agent has no child (the tasks went to init with the old one): a
# task that ended meanwhile is reported at once as ended while no agent ran,
# and the jobs.d job's task is recovered.
test_a_worker_of_a_keeper_without_children_or_exits_does_not_wait_for_the_replay() {
  mkdir -p "$T/jobs.d"
  echo '{"id": "j", "tasks": [{"name": "t", "command": "'"$HELPER"'", "args": ["sleep", "600"]}]}' >"$T/jobs.d/j.json"
  start_agent
  local w; w="$(worker_pid)"
  worker_told_empty "$w" || fail "the first worker of a new keeper was not told it is empty: $(tr '\0' ' ' <"/proc/$w/cmdline")"
  wait_for 10 keeper_task_running j.t || fail "the jobs.d task did not start"
  local jp; jp="$(keeper_task_field j.t pid)"
  op task run --id bare -- "$HELPER" sleep 600 >/dev/null
  local bp; bp="$(keeper_task_field bare pid)"
  kill -9 "$w"
  wait_for 15 new_worker_answers "$w" || fail "no new worker"
  w="$(worker_pid)"
  ! worker_told_empty "$w" || fail "a keeper with tasks told its new worker it is empty"
  kill -TERM "$AGENT_PID"
  wait_gone "$AGENT_PID" 40 || fail "the keeper did not stop"
  kill -9 "$bp"
  wait_for 10 sh -c "! kill -0 $bp 2>/dev/null || grep -q '^State:[[:space:]]*Z' /proc/$bp/status" || fail "bare did not die"
  start_agent
  w="$(worker_pid)"
  worker_told_empty "$w" || fail "a new keeper whose tasks are init's children did not tell its worker it is empty"
  wait_for 10 keeper_task_exited bare || fail "the task that ended while no agent ran was not reported"
  expect_contains "$(keeper_task_field bare error)" "while no agent was running" "bare's error"
  expect_eq "$(keeper_task_field j.t pid)" "$jp" "the jobs.d task recovered, same pid"
  expect_eq "$(keeper_task_field j.t state)" "running" "the jobs.d task's state"
}

test_sigusr2_upgrade_keeps_the_keeper_pid_and_runs_the_replaced_binary() {
  cp "$OUTPOST" "$T/outpost"
  OUTPOST="$T/outpost"
  start_agent
  local k="$AGENT_PID" w; w="$(worker_pid)"
  local old_ino; old_ino="$(stat -c %i "$T/outpost")"
  # Install a new binary the way an upgrade does: a new file renamed over the old.
  cp "$T/outpost" "$T/outpost.new" && mv "$T/outpost.new" "$T/outpost"
  local new_ino; new_ino="$(stat -c %i "$T/outpost")"
  [ "$new_ino" != "$old_ino" ] || fail "test setup: same inode"
  expect_eq "$(stat -L -c %i "/proc/$k/exe")" "$old_ino" "keeper runs the old file before"
  kill -USR2 "$k"
  wait_for 15 new_worker_answers "$w" || fail "no new worker after SIGUSR2"
  kill -0 "$k" || fail "keeper gone"
  expect_eq "$(op status --json | json_get keeper_pid)" "$k" "same keeper pid"
  expect_eq "$(stat -L -c %i "/proc/$k/exe")" "$new_ino" "keeper runs the new file"
  expect_eq "$(stat -L -c %i "/proc/$(worker_pid)/exe")" "$new_ino" "worker runs the new file"
  expect_not_contains "$(readlink "/proc/$k/exe")" "(deleted)" "keeper exe"
  local log; log="$(cat "$T/agent.log")"
  expect_contains "$log" "SIGUSR2: upgrade: stopping the worker" "log"
  expect_contains "$log" "worker exited pid=$w status=\"exit code 0\"" "old worker stopped cleanly"
  expect_contains "$log" "keeper re-executed after an upgrade pid=$k" "log"
  # Still a working keeper: SIGTERM stops everything with status 0.
  kill -TERM "$k"
  wait "$k"
  expect_eq "$?" "0" "exit status after the upgrade"
}

test_adopted_process_survives_the_worker_and_its_exit_is_resent_until_acked() {
  start_keeper_with_wrapper
  adopt_an_orphan
  local w; w="$(worker_pid)"
  # This worker will never read its socket: the exit stays unacknowledged.
  kill -STOP "$w"
  kill -TERM "$ORPHAN"
  wait_for 5 grep -q "task exited pid=$ORPHAN status=\"exit code 7\"" "$T/agent.log" ||
    fail "keeper did not reap $ORPHAN: $(tail -n 3 "$T/agent.log")"
  kill -9 "$w"
  wait_for 10 new_worker_answers "$w" || fail "no new worker"
  local w2; w2="$(worker_pid)"
  wait_for 5 grep -q "worker ready pid=$w2 unacked_exits=1" "$T/agent.log" ||
    fail "the new worker was not offered the journaled exit: $(grep 'worker ready' "$T/agent.log")"
  expect_contains "$(cat "$T/agent.log")" "connected to the keeper keeper_pid=$AGENT_PID unacked_exits=1" "worker side"
  # That worker acknowledged it: the one after it gets nothing.
  kill -9 "$w2"
  wait_for 10 new_worker_answers "$w2" || fail "no third worker"
  local w3; w3="$(worker_pid)"
  wait_for 5 grep -q "worker ready pid=$w3 unacked_exits=0" "$T/agent.log" ||
    fail "the exit was not acknowledged: $(grep 'worker ready' "$T/agent.log")"
}

test_exit_journaled_without_a_worker_crosses_an_upgrade() {
  start_keeper_with_wrapper
  adopt_an_orphan
  local k="$AGENT_PID" w; w="$(worker_pid)"
  # No worker can start from now on, so nobody acknowledges the exit.
  touch "$T/fail-worker"
  kill -9 "$w"
  wait_for 10 grep -q "test wrapper: worker fails at start" "$T/agent.log" || fail "wrapper did not fail"
  kill -TERM "$ORPHAN"
  wait_for 5 grep -q "task exited pid=$ORPHAN status=\"exit code 7\"" "$T/agent.log" || fail "keeper did not reap $ORPHAN"
  # The upgrade runs the script as the keeper, which execs outpost.real.
  kill -USR2 "$k"
  wait_for 10 grep -q "keeper re-executed after an upgrade pid=$k .*unacked_exits=1" "$T/agent.log" ||
    fail "journal not carried: $(grep -E 'upgrade|re-executed' "$T/agent.log")"
  wait_for 10 new_worker_answers "$w" || fail "no worker after the upgrade"
  local w2; w2="$(worker_pid)"
  wait_for 5 grep -q "worker ready pid=$w2 unacked_exits=1" "$T/agent.log" || fail "carried exit not offered"
  expect_eq "$(op status --json | json_get keeper_pid)" "$k" "same keeper"
}

keeper_task_field() { op --json task inspect "$1" | json_get "$2"; }
keeper_task_exited() { [ "$(keeper_task_field "$1" state)" = exited ]; }
keeper_task_running() { [ "$(keeper_task_field "$1" state)" = running ]; }

test_output_and_exit_of_a_task_ending_while_no_worker_runs_cross_an_upgrade() {
  start_keeper_with_wrapper
  local k="$AGENT_PID" w; w="$(worker_pid)"
  op task run --id late -- /bin/sh -c "while [ ! -e '$T/go' ]; do sleep 0.05; done; echo late-line; exit 3" \
    >/dev/null || fail "task run failed"
  touch "$T/fail-worker"
  kill -9 "$w"
  wait_for 10 grep -q "test wrapper: worker fails at start" "$T/agent.log" || fail "wrapper did not fail"
  # No worker runs: the task prints into its FIFO (held by the keeper) and exits.
  touch "$T/go"
  wait_for 10 grep -q "task exited pid=[0-9]* status=\"exit code 3\"" "$T/agent.log" || fail "keeper did not reap the task"
  kill -USR2 "$k"
  wait_for 10 grep -q "keeper re-executed after an upgrade pid=$k .*unacked_exits=1 held_fifos=1" "$T/agent.log" ||
    fail "exit and FIFOs not carried: $(grep -E 'upgrade|re-executed' "$T/agent.log")"
  wait_for 15 new_worker_answers "$w" || fail "no worker after the upgrade"
  wait_for 10 keeper_task_exited late || fail "the task's exit was not reported"
  expect_eq "$(keeper_task_field late exit_code)" "3" "exit code across the upgrade"
  wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' logs late | grep -q late-line" ||
    fail "output written while no worker ran was lost: $(op logs late)"
}
