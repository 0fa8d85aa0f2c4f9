#!/usr/bin/env bash
# Tests tools/check-layers.sh on small fake source trees. Prints "ok NAME" or
# "not ok NAME - why" per case; exits 1 if any case failed.
set -u
cd "$(dirname "$0")/../.."
CHECK="$PWD/tools/check-layers.sh"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0

ok() { echo "ok $1"; }
not_ok() { echo "not ok $1 - $2"; FAILED=1; }

# A tree where every include goes down or sideways: a header per layer
# including the one below it, a nested folder with a relative include, a
# generated header that is not in the tree, and main.cc on top.
clean_tree() {
  local t="$1" prev="" l
  rm -rf "$t"
  for l in base loop wire proc cgroup logs keeper driver task job agent cli; do
    mkdir -p "$t/$l"
    {
      echo "#pragma once"
      [ -n "$prev" ] && echo "#include \"$prev/$prev.h\""
      echo "#include <string>"
    } >"$t/$l/$l.h"
    printf '#include "%s/%s.h"\n#include "base/base.h"\n' "$l" "$l" >"$t/$l/$l.cc"
    prev=$l
  done
  mkdir -p "$t/driver/exec"
  echo '#pragma once' >"$t/driver/exec/exec.h"
  printf '#include "exec.h"\n#include "driver/driver.h"\n#include "proc/proc.h"\n' >"$t/driver/exec/exec.cc"
  printf '#include "job/job.h"\n#include "task.pb.h"\n' >"$t/agent/api.cc"
  printf '#include "cli/cli.h"\n#include "agent/agent.h"\n' >"$t/main.cc"
}

# Runs the check on a tree; sets OUT and RC.
run_check() {
  OUT=$("$CHECK" "$1" 2>&1)
  RC=$?
}

# --- a clean tree passes, with a summary line
T="$TMP/clean"
clean_tree "$T"
run_check "$T"
if [ $RC -eq 0 ] && [ "$(printf '%s\n' "$OUT" | wc -l)" -eq 1 ] && [[ "$OUT" == *"clean"* ]]; then
  ok "clean tree passes"
else
  not_ok "clean tree passes" "exit $RC: $OUT"
fi

# --- an upward include fails and names the file, line, header and layers
T="$TMP/upward"
clean_tree "$T"
printf '#include "wire/wire.h"\n\n#include "job/job.h"\n' >"$T/wire/codec.cc"
run_check "$T"
want="$T/wire/codec.cc:3: wire may not include job/job.h (layer job is above wire)"
if [ $RC -eq 1 ] && printf '%s\n' "$OUT" | grep -qxF "$want" && ! printf '%s\n' "$OUT" | grep -q ':1: '; then
  ok "upward include fails naming the file"
else
  not_ok "upward include fails naming the file" "exit $RC, wanted line '$want', got: $OUT"
fi

# --- a header in a nested folder belongs to the folder's layer
T="$TMP/nested"
clean_tree "$T"
printf '#include "exec.h"\n#include "task/task.h"\n' >"$T/driver/exec/exec.cc"
run_check "$T"
want="$T/driver/exec/exec.cc:2: driver may not include task/task.h (layer task is above driver)"
if [ $RC -eq 1 ] && printf '%s\n' "$OUT" | grep -qxF "$want"; then
  ok "nested folder counts as its top folder"
else
  not_ok "nested folder counts as its top folder" "exit $RC, wanted line '$want', got: $OUT"
fi

# --- a header at the top (main's layer) may not be included from below
T="$TMP/top"
clean_tree "$T"
echo '#pragma once' >"$T/version.h"
printf '#include "version.h"\n' >"$T/cli/version.cc"
run_check "$T"
want="$T/cli/version.cc:1: cli may not include version.h (layer main is above cli)"
if [ $RC -eq 1 ] && printf '%s\n' "$OUT" | grep -qxF "$want"; then
  ok "top-level header is the top layer"
else
  not_ok "top-level header is the top layer" "exit $RC, wanted line '$want', got: $OUT"
fi

# --- a folder without a place in the layer order is refused
T="$TMP/unknown"
clean_tree "$T"
mkdir -p "$T/misc"
printf '#include "base/base.h"\n' >"$T/misc/misc.cc"
run_check "$T"
if [ $RC -eq 1 ] && [[ "$OUT" == *"$T/misc/misc.cc: folder misc is not in the layer order"* ]]; then
  ok "unknown folder is refused"
else
  not_ok "unknown folder is refused" "exit $RC: $OUT"
fi

# --- a missing root is a usage error, not a pass
run_check "$TMP/nonexistent"
if [ $RC -eq 2 ]; then ok "missing root is an error"; else not_ok "missing root is an error" "exit $RC: $OUT"; fi

exit $FAILED
