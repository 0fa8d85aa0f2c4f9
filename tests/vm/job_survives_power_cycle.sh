#!/bin/sh
# vmtest: power-cycle
# After the node loses power, every job is running again. Boot 1
# runs job "pc" (one task printing the time every second, restart always);
# boot 2, after the power cut, finds it running again under a new pid and
# its log, on the state disk, holding lines of both boots.
. "$(dirname "$0")/lib/common.sh"

state_disk_ok
D=$(pc_dir)
JOB=pc

inspect() { outpost inspect "$JOB" --json; }
# json_field NAME: the first "NAME": value (a string's quotes removed) of
# inspect's output on stdin. picojson prints no nested "status", and the job
# has one task, so the first "pid" is the ticker's.
json_field() {
  tr ',{}[]' '\n\n\n\n\n' |
    sed -n "s/^[[:space:]]*\"$1\"[[:space:]]*:[[:space:]]*\"\{0,1\}\([^\"]*\)\"\{0,1\}[[:space:]]*\$/\1/p" |
    head -n 1
}
ticker_logs() { outpost logs "$JOB/ticker" --tail 50; }

if [ "$VMTEST_BOOT" = 1 ]; then
  rm -rf "$D"
  mkdir -p "$D" || fail "cannot create $D"
  wait_for 20 outpost status || fail "agent not answering: $(wait_output)"
  cat >/tmp/pc.json <<'EOF'
{"id": "pc", "tasks": [{"name": "ticker", "command": "/bin/sh", "args": ["-c", "while :; do date +%s; sleep 1; done"], "restart": {"policy": "always"}}]}
EOF
  out=$(outpost run -f /tmp/pc.json 2>&1) ||
    fail "outpost run -f /tmp/pc.json: exit $?: $(echo "$out" | tr "\n" " " | sed "s/ *$//" | cut -c1-200)"
  j=$(inspect 2>&1) || fail "outpost inspect $JOB --json after run: $j"
  st=$(echo "$j" | json_field status)
  [ "$st" = running ] || fail "job $JOB is '$st' after outpost run, expected running: $j"
  pid=$(echo "$j" | json_field pid)
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || fail "ticker pid '$pid' is not a running process: $j"
  # Two lines in the log, so boot 2 can tell boot 1's from its own.
  two_lines() { [ "$(ticker_logs | grep -c '^[0-9][0-9]*$')" -ge 2 ]; }
  wait_for 10 two_lines || fail "no 2 lines in outpost logs $JOB/ticker after 10 s: $(wait_output)"
  ticker_logs | grep '^[0-9][0-9]*$' | head -n 1 >"$D/first_line"
  echo "$pid" >"$D/pid"
  boot_id >"$D/boot_id"
  # The log lines written so far must survive the cut (without this the
  # kernel writes them back only after ~30 s). This also syncs the agent's
  # job record, so the test does not prove that the agent fsyncs it itself.
  sync
  echo "job $JOB running, ticker pid $pid, first log line $(cat "$D/first_line")"
  power_cycle
fi

[ -s "$D/first_line" ] && [ -s "$D/boot_id" ] || fail "the test's boot 1 notes in $D were lost in the power cut"
[ "$(boot_id)" != "$(cat "$D/boot_id")" ] || fail "same boot id as boot 1: the VM did not reboot"
running_again() {
  j=$(inspect) || return 1
  echo "$j"
  [ "$(echo "$j" | json_field status)" = running ] || return 1
  pid=$(echo "$j" | json_field pid)
  [ -n "$pid" ] && [ -d "/proc/$pid" ]
}
wait_for 20 running_again || fail "job $JOB not running with a live pid 20 s after boot 2's runner started: $(wait_output)"
# Lines of both boots: boot 1's first line, and one written since this boot
# began: the second after its start, when no ticker ran yet (the clock
# comes from the RTC in both boots).
booted_at=$(awk -v n="$(date +%s)" -v u="$(now)" 'BEGIN { printf "%d", n - u + 1 }')
both_boots() {
  l=$(ticker_logs) || return 1
  echo "$l" | tail -n 5
  echo "$l" | grep -qx "$(cat "$D/first_line")" || return 1
  echo "$l" | awk -v t="$booted_at" '/^[0-9]+$/ && $1 >= t { n++ } END { exit !(n >= 1) }'
}
wait_for 10 both_boots ||
  fail "outpost logs $JOB/ticker --tail 50 lacks boot 1's first line $(cat "$D/first_line") or a line of boot 2 (>= $booted_at): $(wait_output)"
echo "job $JOB running again after the power cut: ticker pid $(cat "$D/pid") -> $pid; log kept boot 1's first line $(cat "$D/first_line")"
rm -rf "$D"
