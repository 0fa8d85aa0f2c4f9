#!/bin/sh
# Runs every benchmark binary in <builddir>/bench/ and prints its BENCH lines:
#   BENCH <name> <value> <unit> baseline=<name> <baseline value> ratio=<value/baseline>
# Usage: tools/bench/run.sh <builddir>
# Exits non-zero if a benchmark fails (its remaining lines are then missing).
set -u
build=${1:?usage: tools/bench/run.sh <builddir>}
dir="$build/bench"
if [ ! -d "$dir" ]; then
  echo "run.sh: no benchmarks in $dir (build them with make bench)" >&2
  exit 1
fi
status=0
found=0
for bin in "$dir"/*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  found=1
  if ! "$bin"; then
    echo "run.sh: $(basename "$bin") failed" >&2
    status=1
  fi
done
if [ "$found" -eq 0 ]; then
  echo "run.sh: no benchmark binaries in $dir" >&2
  exit 1
fi
exit $status
