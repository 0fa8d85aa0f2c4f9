#!/usr/bin/env bash
# Long fuzzing (`make fuzz-long [FUZZ_SECONDS=N]`): every libFuzzer target in
# build/fuzz/ for N seconds (default 600), starting from its checked-in seeds
# (tests/fuzz/corpus/<target>/) plus what earlier long runs found
# (build/fuzz-long/<target>/corpus, kept between runs). Prints one line per
# target:
#
#   fuzz-long: frame_fuzzer: 12345678 execs in 600 s (20576/s), cov 812, ft 2301, corpus 240, crashes 0
#
# and exits 1 if any target crashed, leaked, timed out or ran out of memory
# (the reproducer is left in build/fuzz-long/<target>/, named by libFuzzer).
#   tools/fuzz-long.sh [SECONDS] [TARGET...]
set -u
cd "$(dirname "$0")/.."
SECS="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in tests/fuzz/*_fuzzer.cc; do targets+=("$(basename "$src" .cc)"); done
fi
rc=0
total=0
for n in "${targets[@]}"; do
  bin="build/fuzz/$n"
  [ -x "$bin" ] || { echo "fuzz-long: $n: $bin missing (make fuzz)"; rc=1; continue; }
  dir="build/fuzz-long/$n"
  mkdir -p "$dir/corpus"
  log="$dir/run.log"
  seeds="tests/fuzz/corpus/${n%_fuzzer}"
  (cd "$dir" && "$OLDPWD/$bin" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      corpus "$OLDPWD/$seeds") >"$log" 2>&1
  status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  secs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -n1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  crashes=$(find "$dir" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  echo "fuzz-long: $n: ${execs:-0} execs in $SECS s (${secs:-0}/s), cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, crashes $crashes"
  total=$((total + ${execs:-0}))
  if [ "$status" != 0 ] || [ "$crashes" != 0 ]; then
    echo "fuzz-long: $n FAILED (exit $status); see $log"
    grep -m5 -E '^==[0-9]+==|SUMMARY|ERROR' "$log" | sed 's/^/  /'
    rc=1
  fi
done
echo "fuzz-long: ${#targets[@]} targets, $total executions, $([ $rc = 0 ] && echo "0 crashes" || echo FAILED)"
exit $rc
