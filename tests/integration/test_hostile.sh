# Hostile and idle API clients (docs/api-limits.md): floods of idle
# connections, a full fd table, a client sending one byte per second and
# clients that never read their replies. The agent keeps answering others,
# cuts the misbehaving ones off with the reason in its log, and its memory
# stays bounded. The clients are tests/integration/hostile_client.py.

HOSTILE="$(dirname "${BASH_SOURCE[0]}")/hostile_client.py"
HOSTILE="$(cd "$(dirname "$HOSTILE")" && pwd)/$(basename "$HOSTILE")"

hostile_logs_of_fast() { op logs fast | grep fast-line- >/dev/null; }
hostile_worker_pid() { op status --json | json_get pid; }
hostile_kib() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
hostile_connections_are() { [ "$(op status --json | json_get api_connections)" = "$1" ]; }

# hostile_ps_answers: `op ps` succeeds within 5 s (generous on a loaded
# machine); prints its latency in ms. In $(...) a failure only ends the
# subshell: callers check its status.
hostile_ps_answers() {
  local t0 t1
  t0=$(date +%s%N)
  timeout 5 "$OUTPOST" --socket "$SOCK" ps >/dev/null 2>"$T/ps.err" || fail "ps failed while hostile clients are connected: $(cat "$T/ps.err")"
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000000 ))
}

# hostile_start NAME ARGS...: runs the client in the background, output in
# $T/NAME.out. hostile_wait NAME SECONDS PATTERN: waits for a line matching
# PATTERN in its output.
hostile_start() {
  local name="$1"; shift
  python3 "$HOSTILE" "$@" >"$T/$name.out" 2>&1 &
  echo $! >>"$T/.pids"
  eval "${name}_PID=$!"
}
hostile_wait() {
  wait_for "$2" grep -q "$3" "$T/$1.out" || fail "$1 client: no '$3' within $2s: $(cat "$T/$1.out")"
}

test_hostile_1000_idle_connections_do_not_lock_out_ps() {
  write_config '"api_idle_timeout": "60s"'
  start_agent
  hostile_start idle idle "$SOCK" 1000
  hostile_wait idle 60 '^open '
  local ms; ms="$(hostile_ps_answers)" || fail "${ms#FAIL: }"
  echo "ps answered in ${ms} ms with 1000 idle connections made" >&2
  # The agent kept at most its per-uid cap (128) of them, oldest closed first.
  local n; n="$(op status --json | json_get api_connections)"
  [ "$n" -le 128 ] || fail "agent holds $n connections, more than the per-uid cap of 128"
  kill -USR1 "$idle_PID"
  hostile_wait idle 10 '^still open '
  local open; open="$(sed -n 's/^still open //p' "$T/idle.out")"
  [ "$open" -ge 100 ] && [ "$open" -le 128 ] || fail "expected the newest ~127 idle connections kept, client says $open"
  # One line per burst, not one per connection: the first is written at
  # once, the rest are summarised when the 10 s window ends.
  wait_for 20 grep -q 'rpc connection closed (repeated [0-9,]* times in the last 1[0-9] s)' "$T/agent.log" \
    || fail "no summary line for the closed idle connections"
  local lines; lines="$(grep -c 'rpc connection' "$T/agent.log")"
  [ "$lines" -le 5 ] || fail "$lines rpc connection log lines for one flood: $(grep 'rpc connection' "$T/agent.log" | head -5)"
}

test_hostile_full_fd_table_still_answers_ps_without_spinning() {
  # A small fd limit on the worker: the flood runs it out of fds long
  # before the connection caps are reached.
  write_config '"api_max_connections": 4000, "api_max_connections_per_uid": 4000'
  start_agent
  local w; w="$(hostile_worker_pid)"
  prlimit --pid "$w" --nofile=128:128 || fail "prlimit"
  local cpu0; cpu0="$(awk '{print $14 + $15}' "/proc/$w/stat")"
  hostile_start idle idle "$SOCK" 1000
  hostile_wait idle 60 '^open '
  local ms; ms="$(hostile_ps_answers)" || fail "${ms#FAIL: }"
  echo "ps answered in ${ms} ms with the worker out of fds" >&2
  expect_contains "$(grep 'rpc connection closed' "$T/agent.log" | head -1)" "out of file descriptors" "reason for making room"
  # No spinning: the flood and ps cost little CPU (ticks of 10 ms), and no
  # burst of accept errors.
  local cpu1; cpu1="$(awk '{print $14 + $15}' "/proc/$w/stat")"
  [ $((cpu1 - cpu0)) -lt 500 ] || fail "worker used $((cpu1 - cpu0)) ticks of CPU for the flood"
  local fails; fails="$(grep -c 'rpc accept failed' "$T/agent.log")"
  [ "$fails" -le 2 ] || fail "$fails accept failure lines"
  [ "$(op status --json | json_get pid)" = "$w" ] || fail "the worker was replaced"
}

test_hostile_one_byte_per_second_client_is_cut_off() {
  write_config '"api_frame_timeout": "3s"'
  start_agent
  hostile_start trickle trickle "$SOCK"
  # Others are served while it trickles.
  local i
  for i in 1 2 3; do hostile_ps_answers >/dev/null || fail "ps failed while a client trickles"; done
  hostile_wait trickle 30 '^closed after'
  wait_for 5 grep -q 'reason="incomplete frame timeout' "$T/agent.log" || fail "no incomplete frame timeout in the agent log"
}

test_hostile_clients_that_never_read_are_cut_off_and_memory_stays_bounded() {
  write_config '"api_idle_timeout": "2s"'
  start_agent
  local w; w="$(hostile_worker_pid)"
  local rss0; rss0="$(hostile_kib "$w" VmRSS)"
  # A task printing as fast as it can, and events to watch.
  expect_exit 0 op task run --id fast -- "$HELPER" lines 3000000 fast-line-
  local i
  for i in 1 2 3 4 5 6 7 8 9 10; do expect_exit 0 op task run --id "e$i" -- "$HELPER" exit 0; done
  wait_for 10 hostile_logs_of_fast || fail "fast task printed nothing"
  hostile_start logs noread "$SOCK" logs fast
  hostile_start events noread "$SOCK" events x
  # The CLI following the logs into a pipe nobody reads.
  mkfifo "$T/unread"
  exec 7<>"$T/unread"
  # The binary itself in the background, not the `op` function: $! must be
  # the CLI's pid, or the clean-up kills a subshell and leaves the CLI
  # blocked on the FIFO for good.
  "$OUTPOST" --socket "$SOCK" logs -f fast >"$T/unread" 2>&1 &
  echo $! >>"$T/.pids"
  hostile_wait logs 60 '^cut off after'
  hostile_wait events 60 '^cut off after'
  grep -q 'reason=.*peer is not reading its replies' "$T/agent.log" || fail "no reason for the cut-off in the agent log"
  # The stalled CLI is cut off too (idle or write timeout): only the status
  # call itself is left.
  wait_for 30 hostile_connections_are 1 || fail "stalled connections left: $(op status --json | json_get api_connections)"
  local peak; peak="$(hostile_kib "$w" VmHWM)"
  echo "worker VmRSS ${rss0} KiB before, peak ${peak} KiB" >&2
  # Bound: the idle worker plus a few MiB per misbehaving client (each holds
  # at most a 1 MiB write queue and one 4 MiB frame being read).
  [ "$peak" -le $((rss0 + 32 * 1024)) ] || fail "worker VmRSS peaked at $peak KiB (from $rss0)"
  hostile_ps_answers >/dev/null || fail "ps failed after the cut-offs"
}

# A client that starts a long WatchEvents and hangs up, over and over, on a
# node where no event comes: each abandoned wait would otherwise live for
# its whole minute. The agent sweeps them out, so its memory does not grow
# with the number of abandoned calls.
test_hostile_abandoned_event_waits_do_not_pile_up() {
  start_agent
  local w; w="$(hostile_worker_pid)"
  # A first round brings the heap to its working size.
  hostile_start warm abandon "$SOCK" 2000
  hostile_wait warm 120 '^abandoned'
  local rss1; rss1="$(hostile_kib "$w" VmRSS)"
  hostile_start many abandon "$SOCK" 20000
  hostile_wait many 300 '^abandoned'
  local rss2; rss2="$(hostile_kib "$w" VmRSS)"
  echo "worker VmRSS ${rss1} KiB after 2,000 abandoned waits, ${rss2} KiB after 20,000 more" >&2
  # Kept, they would cost ~300 bytes each: 6 MiB for 20,000.
  [ "$rss2" -le $((rss1 + 2048)) ] || fail "worker VmRSS grew from $rss1 to $rss2 KiB over 20,000 abandoned event waits"
  hostile_ps_answers >/dev/null || fail "ps failed after the abandoned waits"
}

# A hundred clients each send 3 MiB of a 3.5 MiB request and stop: the read
# buffers share one budget (api_max_read_buffers, 16 MiB), so the agent cuts
# off those that would take it over and its memory stays near the budget.
test_hostile_unfinished_big_frames_share_one_budget() {
  write_config '"api_frame_timeout": "60s"'
  start_agent
  local w; w="$(hostile_worker_pid)"
  local rss0; rss0="$(hostile_kib "$w" VmRSS)"
  hostile_start big bigframes "$SOCK" 100
  hostile_wait big 120 '^closed '
  local closed; closed="$(sed -n 's/^closed \([0-9]*\) of.*/\1/p' "$T/big.out")"
  local peak; peak="$(hostile_kib "$w" VmHWM)"
  echo "worker VmRSS ${rss0} KiB before, peak ${peak} KiB; $closed of 100 cut off" >&2
  [ "$closed" -ge 90 ] || fail "only $closed of 100 unfinished big frames were cut off: $(cat "$T/big.out")"
  grep -q 'reason="read buffers of all connections over 16777216 bytes' "$T/agent.log" || fail "no reason for the cut-off in the agent log"
  # The budget, one frame on top, and slack for the rest of the worker.
  [ "$peak" -le $((rss0 + 28 * 1024)) ] || fail "worker VmRSS peaked at $peak KiB (from $rss0) with a 16 MiB read budget"
  hostile_ps_answers >/dev/null || fail "ps failed while the unfinished frames are held"
}
