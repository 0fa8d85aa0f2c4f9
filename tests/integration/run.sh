#!/usr/bin/env bash
# Integration tests: drive the real static binary (agent + CLI) in a fresh
# temp dir per test. Usage: tests/integration/run.sh OUTPOST HELPER [FILTER]
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
for t in $(declare -F | awk '{print $3}' | grep '^test_' ); do
  [ -n "$FILTER" ] && [[ "$t" != *"$FILTER"* ]] && continue
  run_one "$t" || rc=1
done
exit $rc
