#!/usr/bin/env bash
# Integration tests: drive the real static binary (agent + CLI) in a fresh
# temp dir per test. Usage: [IT_JOBS=N] tests/integration/run.sh OUTPOST HELPER [FILTER]
# Prints "ok NAME" / "not ok NAME - reason" per test (read by tools/test.sh).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
export OUTPOST="$(realpath "$1")" HELPER="$(realpath "$2")"
FILTER="${3:-}"
# shellcheck source=lib.sh
. "$here/lib.sh"

rc=0
for file in "$here"/test_*.sh; do
  # shellcheck disable=SC1090
  . "$file"
done
tests=()
for t in $(declare -F | awk '{print $3}' | grep '^test_' ); do
  [ -n "$FILTER" ] && [[ "$t" != *"$FILTER"* ]] && continue
  tests+=("$t")
done

# IT_JOBS=N runs N tests at a time (each has its own temp dir, agent and
# socket; nothing is shared). A test's lines are printed whole when it ends.
jobs_max="${IT_JOBS:-1}"
if [ "$jobs_max" -le 1 ]; then
  for t in ${tests[@]+"${tests[@]}"}; do run_one "$t" || rc=1; done
  exit $rc
fi
outs="$(mktemp -d /tmp/outpost-it-out.XXXXXX)"
declare -A name_of=()
running=0
finish_one() {
  local pid
  wait -n -p pid
  local status=$?
  [ "$status" -ne 0 ] && rc=1
  cat "$outs/${name_of[$pid]}"
  running=$((running - 1))
}
for t in ${tests[@]+"${tests[@]}"}; do
  [ "$running" -ge "$jobs_max" ] && finish_one
  run_one "$t" >"$outs/$t" 2>&1 &
  name_of[$!]="$t"
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do finish_one; done
rm -rf "$outs"
exit $rc
