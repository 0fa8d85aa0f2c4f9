# Agent lifecycle, configuration and the status/version/help commands.

test_status_reports_the_running_agent() {
  start_agent
  expect_exit 0 op status
  expect_contains "$OUT" "keeper pid $AGENT_PID, worker pid " "human status"
  expect_contains "$OUT" "config:       $T/config.json" "human status"
  expect_contains "$OUT" "api socket:   $SOCK" "human status"
  expect_exit 0 op status --json
  expect_eq "$(echo "$OUT" | json_get keeper_pid)" "$AGENT_PID" "json keeper_pid"
  [ -d "/proc/$(echo "$OUT" | json_get pid)" ] || fail "json pid (the worker) is not a live process"
  expect_eq "$(echo "$OUT" | json_get config_path)" "$T/config.json" "json config_path"
  expect_eq "$(echo "$OUT" | json_get state_dir)" "$T/state" "json state_dir"
  expect_eq "$(echo "$OUT" | json_get features.api.enabled)" "True" "api feature"
  expect_eq "$(echo "$OUT" | json_get version)" "$("$OUTPOST" version --json | json_get version)" "version"
}

test_cli_without_agent_says_so_in_one_line() {
  expect_exit 3 "$OUTPOST" --socket "$T/nothing.sock" status
  expect_eq "$(printf '%s\n' "$OUT" | wc -l)" "1" "one line"
  expect_contains "$OUT" "no agent is running at $T/nothing.sock" "message"
  # Same through the environment variable.
  OUTPOST_SOCKET="$T/nothing.sock" expect_exit 3 "$OUTPOST" status
}

test_socket_is_private() {
  start_agent
  expect_eq "$(stat -c %a "$SOCK")" "600" "socket mode"
  expect_eq "$(stat -c %a "$T/run")" "700" "runtime dir mode"
  expect_eq "$(stat -c %a "$T/state")" "711" "state dir mode (traversable for task users)"
}

test_existing_dirs_keep_their_mode_and_unsafe_ones_are_refused() {
  mkdir -p "$T/run" "$T/state" && chmod 0755 "$T/run" && chmod 0750 "$T/state"
  start_agent
  expect_eq "$(stat -c %a "$T/run")" "755" "existing runtime dir mode"
  expect_eq "$(stat -c %a "$T/state")" "750" "existing state dir mode"
  kill "$AGENT_PID" && wait "$AGENT_PID"
  # Writable by others: refused at start and by --check, and left as it is.
  chmod 0777 "$T/run"
  local why="runtime_dir: '$T/run' (mode 0777, owner $(id -u)) is writable by other users without the sticky bit"
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json" --check
  expect_contains "$OUT" "$why" "--check"
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "$why" "start"
  expect_eq "$(stat -c %a "$T/run")" "777" "refused dir untouched"
  [ -e "$SOCK" ] && fail "socket created in an unsafe dir"
  chmod 1777 "$T/run"   # sticky, like /tmp: others cannot replace what is not theirs
  expect_exit 0 "$OUTPOST" agent --config "$T/config.json" --check
  chmod 0700 "$T/run"
  # jobs.d: a job file runs commands as any user; no sticky exception.
  mkdir -p "$T/jobs.d" && chmod 1777 "$T/jobs.d"
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "jobs_dir: '$T/jobs.d' (mode 1777, owner $(id -u)) is writable by other users: they could add files" \
    "writable jobs.d"
  chmod 0755 "$T/jobs.d"
  if [ "$(id -u)" = 0 ]; then
    chown 65534 "$T/state"
    expect_exit 2 "$OUTPOST" agent --config "$T/config.json"
    expect_contains "$OUT" "state_dir: '$T/state' (mode 0750, owner 65534) is owned by a user other than root" \
      "another user's dir"
  fi
}

test_conflicting_paths_are_refused_naming_both_keys() {
  write_config '"log_file": "'"$T"'/run/agent.log"'
  sed -i "s|\"state_dir\": \"$T/state\"|\"state_dir\": \"$T/run/state\"|" "$T/config.json"
  local run_why="state_dir \"$T/run/state\" is inside runtime_dir \"$T/run\": the runtime dir is private (0700)"
  local log_why="log_file \"$T/run/agent.log\" is inside runtime_dir \"$T/run\""
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json" --check
  expect_contains "$OUT" "config $T/config.json: $run_why" "state in runtime (--check)"
  expect_contains "$OUT" "config $T/config.json: $log_why" "log file in runtime (--check)"
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "$run_why" "state in runtime"
  expect_contains "$OUT" "agent not started" "verdict"
  [ -e "$T/run" ] && fail "a refused config created $T/run"
  true
}

# The API socket in the state dir's parent (a directory the agent did not
# create): the agent once made that directory 0700, and every task running
# as another user then failed at chdir into its task dir.
test_socket_in_the_state_dirs_parent_leaves_its_mode_and_dynamic_users_work() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; return 0; }
  chmod 0755 "$T"
  SOCK="$T/outpost.sock"
  write_config
  start_agent
  expect_eq "$(stat -c %a "$T")" "755" "mode of the socket's dir (the state dir's parent)"
  local t='{"name": "a", "user": "dynamic", "command": "'$HELPER'", "args": ["pwd"]}'
  echo '{"id": "dyn", "tasks": ['"$t"'], "restart": {"policy": "never"}}' >"$T/dyn.json"
  expect_exit 0 op run -f "$T/dyn.json"
  wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' logs dyn/a | grep -q ." || fail "the task printed nothing"
  expect_eq "$(op logs dyn/a)" "$T/state/task-data/dyn.a" "the task runs in its task dir"
  expect_exit 0 op events dyn/a
  expect_contains "$OUT" "exited with code 0" "exit code"
  # The same layout with the parent left private: the start fails at once,
  # naming the directory in the way (not a bare EACCES from chdir).
  chmod 0700 "$T"
  echo '{"id": "dyn2", "tasks": ['"$t"'], "restart": {"policy": "never"}}' >"$T/dyn2.json"
  expect_exit 1 op run -f "$T/dyn2.json"
  expect_contains "$OUT" "task dir '$T/state/task-data/dyn2.a' is out of reach of uid" "refusal"
  expect_contains "$OUT" "'$T' (mode 0700, owner 0) does not let it search" "the dir in the way"
}

test_sigterm_and_sigint_stop_cleanly_and_remove_the_socket() {
  local sig
  for sig in TERM INT; do
    start_agent
    kill -s "$sig" "$AGENT_PID"
    wait "$AGENT_PID"
    expect_eq "$?" "0" "exit status after SIG$sig"
    [ -e "$SOCK" ] && fail "socket still exists after SIG$sig"
    expect_contains "$(cat "$T/agent.log")" "stopping on SIG$sig" "log"
  done
}

test_stale_socket_from_a_crashed_agent_is_replaced() {
  start_agent
  local old="$AGENT_PID" worker
  worker="$(op status --json | json_get pid)"
  kill -9 "$worker" "$old"   # keeper and worker: a crash of the whole agent
  wait "$old" 2>/dev/null
  wait_gone "$worker" 10 || fail "worker $worker still running"
  [ -S "$SOCK" ] || fail "kill -9 should leave the socket behind for this test"
  start_agent
  [ "$AGENT_PID" != "$old" ] || fail "same pid"
  expect_exit 0 op status --json
  expect_eq "$(echo "$OUT" | json_get keeper_pid)" "$AGENT_PID" "new agent answers"
  expect_contains "$(cat "$T/agent.log")" "replacing stale API socket" "log"
}

test_second_agent_on_the_same_socket_refuses_to_start() {
  start_agent
  local worker; worker="$(op status --json | json_get pid)"  # the socket's owner
  # The same config: its directories are claimed (test_claims.sh) ...
  expect_exit 1 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "state_dir '$T/state' is in use by another agent (pid $AGENT_PID, serving $SOCK)" "refusal"
  # ... and with directories of its own, the socket is.
  tc_second '"api_socket": "'$SOCK'"'
  expect_eq "$RC" 1 "exit code (output: $OUT)"
  expect_contains "$OUT" "another agent (pid $worker) is already serving $SOCK" "refusal"
  expect_exit 0 op status   # the first one is untouched
}

test_path_that_is_not_a_socket_is_not_replaced() {
  write_config
  mkdir -p "$T/run"
  echo data >"$SOCK"
  expect_exit 1 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "refusing to replace '$SOCK': it exists and is not a socket" "message"
  expect_eq "$(cat "$SOCK")" "data" "file untouched"
}

test_bad_config_lists_every_error_and_refuses_to_start() {
  cat >"$T/config.json" <<JSON
{
  "state_dir": "relative/dir",
  "runtime_dir": "$T/run",
  "api_socket": "$SOCK",
  "log_levle": "debug",
  "api_max_connections": "many",
  "api_idle_timeout": "soon"
}
JSON
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "config $T/config.json: log_levle: unknown field (did you mean \"log_level\"?)" "unknown key"
  expect_contains "$OUT" "config $T/config.json: api_max_connections: expected a number, got string" "wrong type"
  expect_contains "$OUT" "config $T/config.json: api_idle_timeout: expected a duration like \"5s\", got \"soon\"" "bad duration"
  expect_contains "$OUT" "config $T/config.json: state_dir: must be an absolute path, got \"relative/dir\"" "bad value"
  expect_contains "$OUT" "agent not started" "verdict"
  [ -e "$SOCK" ] && fail "socket created by an agent that refused to start"
  true
}

test_malformed_and_missing_config_files() {
  printf '{"state_dir": "/x",,}' >"$T/config.json"
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "config $T/config.json: invalid JSON" "syntax error"
  expect_exit 2 "$OUTPOST" agent --config "$T/missing.json"
  expect_contains "$OUT" "config $T/missing.json: open '$T/missing.json': No such file or directory" "missing"
  printf '[1,2]' >"$T/config.json"
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "document: expected an object, got array" "not an object"
  printf '{"log_file": "\xff\xfe"}' >"$T/config.json"
  expect_exit 2 "$OUTPOST" agent --config "$T/config.json"
  expect_contains "$OUT" "invalid UTF-8" "non-UTF-8"
}

test_check_prints_the_effective_config() {
  write_config '"log_level": "debug", "api_idle_timeout": "90s"'
  expect_exit 0 "$OUTPOST" agent --config "$T/config.json" --check
  expect_eq "$(echo "$OUT" | json_get log_level)" "debug" "log_level"
  expect_eq "$(echo "$OUT" | json_get api_idle_timeout)" "1m30s" "idle timeout"
  expect_eq "$(echo "$OUT" | json_get api_socket)" "$SOCK" "socket"
  # What it prints is a config file the agent takes, with the same values.
  echo "$OUT" >"$T/effective.json"
  expect_exit 0 "$OUTPOST" agent --config "$T/effective.json" --check
  expect_eq "$OUT" "$(cat "$T/effective.json")" "--check of what --check printed"
}

test_sighup_reloads_and_keeps_old_config_when_new_one_is_bad() {
  write_config '"log_level": "info"'
  start_agent
  local worker; worker="$(op status --json | json_get pid)"
  write_config '"log_level": "debug"'
  kill -HUP "$AGENT_PID"
  wait_for 5 grep -q "config reloaded" "$T/agent.log" || fail "no reload logged"
  # A broken file is reported and the running config kept.
  echo '{"log_level": "loud", "bogus": 1}' >"$T/config.json"
  kill -HUP "$AGENT_PID"
  wait_for 5 grep -q "config reload failed" "$T/agent.log" || fail "bad reload not reported"
  local log; log="$(cat "$T/agent.log")"
  expect_contains "$log" "bogus: unknown field" "reload error names the key"
  expect_contains "$log" "log_level: expected one of debug, info, warn, error, got \"loud\"" "reload error names the value"
  expect_exit 0 op status --json
  expect_eq "$(echo "$OUT" | json_get pid)" "$worker" "still the same agent"
  # Keys that need a restart are reported and not applied.
  write_config '"runtime_dir": "/elsewhere"'
  sed -i "s#\"runtime_dir\": \"$T/run\",##" "$T/config.json"
  kill -HUP "$AGENT_PID"
  wait_for 5 grep -q "take effect only after a restart" "$T/agent.log" || fail "restart-only keys not reported"
  expect_exit 0 op status --json
  expect_eq "$(echo "$OUT" | json_get runtime_dir)" "$T/run" "runtime_dir unchanged"
}

# A key given twice is taken (the last value, as before) and named with
# its lines by --check, at start and at a reload; the agent runs.
test_a_key_given_twice_is_warned_about_by_check_at_start_and_at_reload() {
  write_config $'"log_level": "debug",\n  "log_level": "warn"'
  local why="config $T/config.json: log_level: given twice (lines 4 and 5); the last is used"
  expect_exit 0 "$OUTPOST" agent --config "$T/config.json" --check
  expect_contains "$OUT" "outpost: warning: $why" "--check"
  expect_contains "$OUT" '"log_level": "warn"' "--check: the last value"
  start_agent
  wait_for 5 grep -qF "$why" "$T/agent.log" || fail "no warning at start: $(tail -n 5 "$T/agent.log")"
  write_config $'"log_file": "'"$T"$'/first.log",\n  "log_file": "'"$T"'/second.log"'
  kill -HUP "$AGENT_PID"
  wait_for 5 grep -qF "log_file: given twice (lines 4 and 5); the last is used" "$T/agent.log" \
    || fail "no warning at reload: $(tail -n 5 "$T/agent.log")"
  wait_for 5 grep -q "config reloaded" "$T/second.log" || fail "the last log_file is not used"
  [ -e "$T/first.log" ] && fail "the first log_file was opened"
  expect_exit 0 op status
}

test_log_lines_are_one_event_per_line_with_fields() {
  write_config "\"log_file\": \"$T/agent-file.log\""
  start_agent
  local worker; worker="$(op status --json | json_get pid)"
  kill -TERM "$AGENT_PID"; wait "$AGENT_PID"
  local line
  line="$(grep -m1 'agent started' "$T/agent.log")"
  [[ "$line" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z\ INFO\ agent\ started\ .*pid=$worker ]] \
    || fail "unexpected log line format: $line"
  expect_contains "$line" "socket=$SOCK" "socket field"
  expect_contains "$(cat "$T/agent-file.log")" "agent started" "log_file also gets the lines"
}

test_help_and_version() {
  expect_exit 0 "$OUTPOST" help
  expect_contains "$OUT" "Commands:" "help"
  local c
  for c in agent status version help; do
    expect_exit 0 "$OUTPOST" "$c" --help
    expect_contains "$OUT" "Usage: outpost $c" "$c --help"
    expect_exit 0 "$OUTPOST" help "$c"
    expect_contains "$OUT" "Usage: outpost $c" "help $c"
  done
  expect_exit 0 "$OUTPOST" --help
  expect_exit 0 "$OUTPOST" version
  expect_contains "$OUT" "outpost $(cat "$(dirname "$OUTPOST")/../VERSION" 2>/dev/null || true)" "version"
  expect_exit 2 "$OUTPOST" staus
  expect_contains "$OUT" "unknown command \"staus\" (did you mean \"stats\" or \"status\"?)" "typo"
  expect_exit 2 "$OUTPOST" evnts
  expect_contains "$OUT" "unknown command \"evnts\" (did you mean \"events\"?)" "typo with one candidate"
  expect_exit 2 "$OUTPOST"
  expect_exit 2 "$OUTPOST" status extra-arg
  expect_exit 2 "$OUTPOST" agent --bogus
  expect_contains "$OUT" "unknown argument \"--bogus\"" "agent bad flag"
}

test_unprivileged_user_is_refused_with_a_clear_message() {
  command -v setpriv >/dev/null || { echo "setpriv missing"; return 0; }
  [ "$(id -u)" = 0 ] || return 0
  start_agent
  chmod 0755 "$T"
  expect_exit 3 setpriv --reuid=65534 --regid=65534 --clear-groups "$OUTPOST" --socket "$SOCK" status
  expect_contains "$OUT" "permission denied on $SOCK" "message"
}
