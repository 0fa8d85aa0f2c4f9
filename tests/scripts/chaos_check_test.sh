#!/usr/bin/env bash
# Tests the log invariant of the chaos suite (tests/chaos/check.py logs) on
# hand-made logs: a clean history passes; a lost line, a repeated line, a
# lost tail and a torn line are each reported. Prints "ok NAME" or
# "not ok NAME - why" per case; exits 1 if any case failed.
set -u
cd "$(dirname "$0")/../.."
CHECK="$PWD/tests/chaos/check.py"
TMP=$(mktemp -d)
# The stand-in task processes are found by their environment, like tasks.
trap 'for f in $(grep -lsaF "OUTPOST_TASK_DIR=$TMP/" /proc/[0-9]*/environ); do f=${f#/proc/}; kill "${f%%/*}"; done 2>/dev/null; rm -rf "$TMP"' EXIT
FAILED=0
ok() { echo "ok $1"; }
not_ok() { echo "not ok $1 - $2"; FAILED=1; }

# logs NAME: writes $TMP/NAME/count.stdout.1 (older) and count.stdout from
# stdin, split after the third line.
logs() {
  mkdir -p "$TMP/$1"
  local all; all=$(cat)
  printf '%s\n' "$all" | head -n 3 >"$TMP/$1/count.stdout.1"
  printf '%s\n' "$all" | tail -n +4 >"$TMP/$1/count.stdout"
}
expect() {  # CASE WANT(pass|fail) [NEEDLE]
  local out rc
  out=$(python3 "$CHECK" logs "$TMP" "$TMP/$1" count 2>&1); rc=$?
  if [ "$2" = pass ]; then
    [ $rc = 0 ] && ok "$1" || not_ok "$1" "expected to pass: $out"
  elif [ $rc = 0 ]; then
    not_ok "$1" "expected a broken invariant, got: $out"
  elif [[ "$out" != *"$3"* ]]; then
    not_ok "$1" "expected \"$3\" in: $out"
  else
    ok "$1"
  fi
}

printf '%s\n' "a 1" "a 2" "b 1" "a 3" "a end 3" "b 2" "b 3" | logs clean
expect clean pass
printf '%s\n' "a 1" "a 2" "a 4" "a 5" | logs gap
expect gap fail "a printed 4, expected 3 (lost lines)"
printf '%s\n' "a 1" "a 2" "a 3" "a 3" "a 4" | logs repeat
expect repeat fail "a printed 3, expected 4 (repeated)"
printf '%s\n' "a 1" "a 2" "a 3" "a end 5" | logs tail
expect tail fail "a ended at 5 but its last line was 3"
printf '%s\n' "a 1" "a 2" "a 3" "a 4" | logs torn
printf 'a 5' >>"$TMP/torn/count.stdout"
expect torn fail "line without newline"
printf '%s\n' "a 1" "a 2" "a 3" "a end 3" "a 4" | logs after_end
expect after_end fail "a printed 4 after its end line"

# The process invariants, against a stand-in for the CLI that reports one
# job whose task "t1" runs with the pid in $TMP/reported.
RUN="$TMP/run"
mkdir -p "$RUN/state"
cat >"$TMP/fake-outpost" <<FAKE
#!/bin/sh
for a; do last=\$a; done
case "\$*" in
  *" ps") echo '{"jobs": [{"id": "j"}]}' ;;
  *) echo "{\"tasks\": [{\"task_id\": \"t1\", \"name\": \"count\", \"state\": \"running\", \"pid\": \$(cat $TMP/reported)}]}" ;;
esac
FAKE
chmod +x "$TMP/fake-outpost"
spawn() {  # TASK_ID: a process that looks like a task of the run (once exec'd)
  env OUTPOST_TASK_DIR="$RUN/state/task-data/$1" OUTPOST_TASK_ID="$1" sleep 300 >/dev/null 2>&1 &
  local pid=$! i
  for ((i = 0; i < 500; i++)); do
    grep -qa "OUTPOST_TASK_ID=$1" "/proc/$pid/environ" 2>/dev/null && break
    sleep 0.01
  done
  echo "$pid"
}
state_expect() {  # CASE WANT NEEDLE
  local out rc
  out=$(python3 "$CHECK" state "$TMP/fake-outpost" /nonexistent "$RUN" 2>&1); rc=$?
  if [ "$2" = pass ]; then
    [ $rc = 0 ] && ok "$1" || not_ok "$1" "expected to pass: $out"
  elif [ $rc != 0 ] && [[ "$out" == *"$3"* ]]; then
    ok "$1"
  else
    not_ok "$1" "expected \"$3\" in: $out"
  fi
}
p1=$(spawn t1)
echo "$p1" >"$TMP/reported"
state_expect one_process pass
p2=$(spawn t1)
state_expect duplicate fail "task t1 has 2 main processes"
kill "$p2"; wait "$p2" 2>/dev/null
p3=$(spawn t9)
state_expect orphan fail "process $p3 of task t9 runs, but the agent does not report the task running"
kill "$p3"; wait "$p3" 2>/dev/null
kill "$p1"; wait "$p1" 2>/dev/null
state_expect dead fail "task t1 reported running with pid $p1, which is not alive"
echo '{"users": {"a": 70001, "b": 70001}}' >"$RUN/state/dynamic-users.json"
state_expect shared_uid fail "dynamic uid 70001 allocated to ['a', 'b']"
echo '{"broken' >"$RUN/state/dynamic-users.json"
state_expect bad_json fail "does not parse"
exit $FAILED
