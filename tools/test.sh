#!/usr/bin/env bash
# Runs every test suite and prints one final line "N passed, N failed[, N skipped]".
#
#   tools/test.sh                 all suites (layer check of src/ and its own
#                                 test, native build, unit, integration,
#                                 sanitized unit, fuzz, armhf unit under qemu-user,
#                                 arm64 build, VM system tests)
#   tools/test.sh --arch arm64    only the arm64 build and its unit tests under qemu-user
#   tools/test.sh --only NAME     one suite: layers build unit integration chaos sanitize fuzz arm64 armhf vm vm-arm64
#
# Each suite's output goes to build/test-logs/<suite>.log; failures are shown.
set -u
cd "$(dirname "$0")/.."

ARCH=native
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) ARCH="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    *) echo "usage: tools/test.sh [--arch native|arm64|armhf] [--only SUITE]" >&2; exit 2 ;;
  esac
done

JOBS=$(nproc 2>/dev/null || echo 2)
FUZZ_SECONDS="${FUZZ_SECONDS:-10}"
LOGS=build/test-logs
mkdir -p "$LOGS"
PASSED=0 FAILED=0 SKIPPED=0
FAILURES=()

pass() { PASSED=$((PASSED + 1)); }
fail() { FAILED=$((FAILED + 1)); FAILURES+=("$1"); echo "FAIL: $1"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "SKIP: $1"; }

# Counts a step that must simply succeed.
step() {
  local name="$1"; shift
  local log="$LOGS/$(echo "$name" | tr ' /' '__').log"
  echo "== $name (at ${SECONDS} s)"
  "$@" >"$log" 2>&1
  step_count "$name" $?
}
# step_count NAME RC: counts a finished step from its exit code.
step_count() {
  local name="$1" rc="$2"
  local log="$LOGS/$(echo "$name" | tr ' /' '__').log"
  if [ "$rc" -eq 0 ]; then
    pass
    echo "   ok"
    return 0
  fi
  fail "$name (see $log)"
  tail -n 30 "$log" | sed 's/^/   | /'
  return 1
}

# Runs a GoogleTest binary and counts its tests.
gtest_suite() {
  local name="$1"; shift
  local log="$LOGS/$name.log"
  echo "== $name (at ${SECONDS} s)"
  "$@" --gtest_brief=1 >"$log" 2>&1
  local rc=$?
  local p f
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
  # --gtest_brief prints no "N tests, listed below" summary: count the
  # failed tests' own lines ("[  FAILED  ] Suite.Name (28 ms)").
  if [ -z "$f" ]; then
    f=$(sed -n 's/^\[  FAILED  \] \([A-Za-z_][A-Za-z0-9_/]*\.[A-Za-z0-9_/]*\)[ ,].*/\1/p' "$log" | sort -u | wc -l)
    [ "$f" -gt 0 ] || f=""
  fi
  if [ -z "$p" ] && [ -z "$f" ]; then
    fail "$name: test binary exited $rc without a summary (crash?) (see $log)"
    tail -n 30 "$log" | sed 's/^/   | /'
    return
  fi
  local s
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
  if [ -n "$s" ] && [ "$s" -gt 0 ]; then
    SKIPPED=$((SKIPPED + s))
    # Each reason once, with how many tests gave it (most first).
    grep -a -A1 'Skipped$' "$log" | grep -av -e 'Skipped$' -e '^--$' | cut -c1-160 | sort | uniq -c | sort -rn |
      head -n 8 | while read -r n why; do echo "SKIP: $name: $n tests: $why"; done
  fi
  PASSED=$((PASSED + ${p:-0}))
  echo "   ${p:-0} passed, ${f:-0} failed${s:+, $s skipped}"
  if [ -n "$f" ] && [ "$f" -gt 0 ]; then
    FAILED=$((FAILED + f))
    grep -a '^\[  FAILED  \] [A-Za-z]' "$log" | sed 's/ ([0-9]* ms)$//' | sort -u | while read -r line; do echo "FAIL: $name: ${line#\[  FAILED  \] }"; done
    FAILURES+=("$name: $f failed (see $log)")
  elif [ $rc -ne 0 ]; then
    fail "$name: exited $rc (see $log)"
  fi
}

# Runs a TAP-like suite printing "ok NAME" / "not ok NAME - why" / "skip NAME - why".
tap_suite() {
  local name="$1"; shift
  local log="$LOGS/$name.log"
  echo "== $name (at ${SECONDS} s)"
  "$@" >"$log" 2>&1
  tap_count "$name" $?
}
# tap_count NAME RC: counts a finished TAP-like suite from its log.
tap_count() {
  local name="$1" rc="$2"
  local log="$LOGS/$name.log"
  local p f s
  # -a: a test's output may hold binary bytes; grep must still read lines.
  p=$(grep -ac '^ok ' "$log")
  f=$(grep -ac '^not ok ' "$log")
  s=$(grep -ac '^skip ' "$log")
  PASSED=$((PASSED + p)); FAILED=$((FAILED + f)); SKIPPED=$((SKIPPED + s))
  grep -a '^not ok ' "$log" | sed "s/^not ok /FAIL: $name: /"
  grep -a '^skip ' "$log" | sed "s/^skip /SKIP: $name: /"
  echo "   $p passed, $f failed, $s skipped"
  [ "$f" -gt 0 ] && FAILURES+=("$name: $f failed (see $log)")
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
    fail "$name: exited $rc without naming a failed test (see $log)"
    tail -n 30 "$log" | sed 's/^/   | /'
  fi
  if [ $((p + f + s)) -eq 0 ] && [ $rc -eq 0 ]; then
    fail "$name: ran no tests (see $log)"
  fi
}

want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

# A suite that mostly waits (agents restarting, backoffs) runs in the
# background while the next CPU-bound steps (builds, fuzzers) run: bg_start
# NAME KIND CMD... starts it (KIND: step or tap), bg_collect NAME waits for it
# and counts it as step or tap_suite would. Its log is the same file. The
# exit code goes through a file, not bash's wait: bash forgets a finished
# background job's status once one of its later children gets the same pid,
# which a long, fork-heavy run can bring about ("wait: pid N is not a child
# of this shell" failed a green chaos run).
declare -A BG_PID=() BG_KIND=() BG_START=()
bg_rc_file() { echo "$LOGS/$(echo "$1" | tr ' /()' '____').rc"; }
bg_start() {
  local name="$1" kind="$2"; shift 2
  local log="$LOGS/$(echo "$name" | tr ' /' '__').log" rc_file
  [ "$kind" = tap ] && log="$LOGS/$name.log"
  rc_file=$(bg_rc_file "$name")
  rm -f "$rc_file"
  echo "== $name (at ${SECONDS} s, in the background)"
  { "$@" >"$log" 2>&1; echo $? >"$rc_file"; } &
  BG_PID[$name]=$!
  BG_KIND[$name]=$kind
  BG_START[$name]=$SECONDS
}
bg_collect() {
  local name="$1" rc
  wait "${BG_PID[$name]}" 2>/dev/null
  rc=$(cat "$(bg_rc_file "$name")" 2>/dev/null) || rc=""
  [ -n "$rc" ] || { echo "(no exit code of $name: counted as failed)"; rc=1; }
  echo "== $name (started at ${BG_START[$name]} s, ended by ${SECONDS} s)"
  if [ "${BG_KIND[$name]}" = tap ]; then
    tap_count "$name" "$rc"
  else
    step_count "$name" "$rc"
  fi
}

# The cross build of ARCH: everything the arm suites and the arm64 VM use.
# The arm64 VM's oci tests (vm-arm64) want the test NRI plugin too (all
# builds the oci driver). The unit tests that spawn a binary skip under
# qemu-user without binfmt_misc (tests/unit/test_util.h), so the other NRI
# plugins are not built here.
# The full run (CROSS_UNIT empty) builds no cross unit tests: compiling and
# linking them with the release flags took 9 of the armhf build's 15.6
# minutes, the longest step of the run; both arches are built (every
# warning an error) and aarch64 is system-tested in its VM (vm-arm64).
# `tools/test.sh --arch armhf` (32-bit, unsigned char) and `--arch arm64`
# build and run their unit tests under qemu-user.
CROSS_UNIT="arm64 armhf"
cross_unit() { case " $CROSS_UNIT " in *" $1 "*) return 0 ;; esac; return 1; }
# The full run builds only what it uses of armhf: the release binaries
# (`all`: every warning an error, and the size budget); arm64's helpers go
# into its VM.
cross_build() {
  local arch="$1" extra=()
  [ "$arch" = arm64 ] && extra=(build/arm64/test_helper build/arm64/test_plugin build/arm64/test_nri_plugin)
  cross_unit "$arch" && extra+=("build/$arch/test_helper" "build/$arch/test_plugin" "build/$arch/unit_tests")
  make -j"$JOBS" ARCH="$arch" all ${extra[@]+"${extra[@]}"}
}
# What runs on a cross build that succeeded: static, size, unit tests.
cross_checks() {
  local arch="$1" qemu="$2"
  if file "build/$arch/outpost" | grep -q 'statically linked'; then pass; else fail "build/$arch/outpost is not statically linked"; fi
  # The 1.75 MiB budget (docs/benchmarks.md#size): over it fails the step.
  step "size budget $arch" make ARCH="$arch" size
  if cross_unit "$arch"; then
    gtest_suite "unit-$arch" "$qemu" "build/$arch/unit_tests"
  else
    echo "   (unit-$arch: not in the full run; tools/test.sh --arch $arch runs it)"
  fi
}
cross_suite() {
  step "build $1" cross_build "$1" && cross_checks "$1" "$2"
}
# Both cross builds, one after the other, in the background: each to its
# own log, its exit code to build/test-logs/build_ARCH.rc.
cross_builds_bg() {
  local arch
  for arch in arm64 armhf; do
    cross_build "$arch" >"$LOGS/build_$arch.log" 2>&1
    echo $? >"$LOGS/build_$arch.rc"
    echo "   (build $arch ended at ${SECONDS} s)"
  done
}
# The ASan+UBSan build (clang): its unit tests, and the objects the fuzz
# targets link. In the full run it builds in the background during the
# integration tests, beside the cross builds.
# At -O0 (SAN_OPT, into build/san-O0/): half the compile time of -O1, and
# this build is the run's longest path.
sanitized_build() {
  make -j"$JOBS" SANITIZE=address,undefined SAN_OPT=-O0 build/san-O0/unit_tests build/san-O0/test_helper nri-plugins
}
qemu_of() { case "$1" in arm64) echo qemu-aarch64-static ;; armhf) echo qemu-arm-static ;; esac; }

if [ "$ARCH" != native ]; then
  case "$ARCH" in
    arm64) cross_suite arm64 qemu-aarch64-static ;;
    armhf) cross_suite armhf qemu-arm-static ;;
    *) echo "unknown arch $ARCH" >&2; exit 2 ;;
  esac
else
  if want layers; then
    # No include from a higher layer of src/ (tools/check-layers.sh), and the
    # check itself on fake trees with and without a wrong include.
    step "layer check" tools/check-layers.sh src
    tap_suite layers-test tests/scripts/check_layers_test.sh
    tap_suite size-report-test tests/scripts/size_report_test.sh
    tap_suite bench-targets-test tests/scripts/bench_targets_test.sh
  fi
  built=0
  # The full run builds no plain x86_64 unit tests: they run under ASan and
  # UBSan (unit-sanitized, clang); `--only unit` builds and runs them here.
  native=(all build/test_helper build/test_plugin build/example_driver build/grpc_peer nri-plugins bench-objs go-peers)
  [ "$ONLY" = unit ] && native+=(build/unit_tests)
  if want build || want unit || want integration || want chaos || want vm; then
    if step "build native" make -j"$JOBS" "${native[@]}"; then
      built=1
      if file build/outpost | grep -q 'statically linked'; then pass; else fail "build/outpost is not statically linked"; fi
      step "size budget" make size
      tap_suite install-test tests/scripts/install_test.sh
    fi
  fi
  if [ $built = 1 ]; then
    if [ "$ONLY" = unit ]; then
      gtest_suite unit build/unit_tests
    elif want unit; then
      echo "   (unit: in the full run as unit-sanitized; tools/test.sh --only unit runs them plain, --arch armhf on armhf)"
    fi
    # The integration tests mostly wait for agents and tasks: the cross
    # builds (CPU) run in the background meanwhile, one after the other, and
    # are counted (with their checks) after the fuzzers. The tests run two at
    # a time, each in a temp dir of its own (tests/integration/run.sh).
    if want integration; then
      if [ -z "$ONLY" ]; then
        CROSS_UNIT=""
        rm -f "$LOGS"/build_arm64.rc "$LOGS"/build_armhf.rc
        bg_start "cross builds" step cross_builds_bg
        bg_start "build sanitized" step sanitized_build
      fi
      IT_JOBS="${IT_JOBS:-2}" tap_suite integration tests/integration/run.sh build/outpost build/test_helper
    fi
    # 50 cycles of random kills with the invariants checked after each
    # (`make chaos` runs 1,000; a failure prints the seed that replays it).
    # Mostly waits (the keeper's restart backoff): it runs in the background
    # during the sanitized build and the fuzzers, a loaded machine it must
    # stand anyway, and is counted after them.
    if want chaos; then
      tap_suite chaos-check tests/scripts/chaos_check_test.sh
      bg_start "chaos (50 cycles)" step tests/chaos/chaos.sh build/outpost build/test_helper --cycles 50 --parallel 2
    fi
  fi
  if want sanitize; then
    if [ -n "${BG_PID[build sanitized]:-}" ]; then
      bg_collect "build sanitized"
    else
      step "build sanitized" sanitized_build
    fi
    if [ $? = 0 ]; then
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        gtest_suite unit-sanitized build/san-O0/unit_tests
    fi
  fi
  if want fuzz; then
    if step "build fuzzers" make -j"$JOBS" SAN_OPT=-O0 fuzz; then
      # One entry per target source: build/fuzz/ also holds objects, and
      # the work dirs live apart (build/fuzz-work/) so a second run or an
      # interrupted one never mistakes them for targets.
      # Two targets at a time (each is single-threaded), FUZZ_SECONDS (10)
      # each: a smoke run of every target in make test; `make fuzz-long`
      # runs them for as long as asked (tests/fuzz/README.md).
      pending=""
      for src in tests/fuzz/*_fuzzer.cc; do
        n=$(basename "$src" .cc)
        corpus="tests/fuzz/corpus/${n%_fuzzer}"
        work="build/fuzz-work/$n"
        rm -rf "$work"; mkdir -p "$work"
        [ -d "$corpus" ] && cp "$corpus"/* "$work"/ 2>/dev/null
        fuzz_cmd=("build/fuzz/$n" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 "$work")
        if [ -z "$pending" ]; then
          pending="fuzz $n (${FUZZ_SECONDS}s)"
          bg_start "$pending" step "${fuzz_cmd[@]}"
        else
          step "fuzz $n (${FUZZ_SECONDS}s)" "${fuzz_cmd[@]}"
          bg_collect "$pending"
          pending=""
        fi
      done
      [ -n "$pending" ] && bg_collect "$pending"
    fi
  fi
  [ -n "${BG_PID[chaos (50 cycles)]:-}" ] && bg_collect "chaos (50 cycles)"
  if [ -n "${BG_PID[cross builds]:-}" ]; then
    wait "${BG_PID[cross builds]}" 2>/dev/null
    for arch in arm64 armhf; do
      echo "== build $arch (in the background from ${BG_START[cross builds]} s, counted at ${SECONDS} s)"
      grep -a "(build $arch ended at" "$LOGS/cross_builds.log" 2>/dev/null
      step_count "build $arch" "$(cat "$LOGS/build_$arch.rc" 2>/dev/null || echo 1)" &&
        cross_checks "$arch" "$(qemu_of "$arch")"
    done
  else
    want arm64 && cross_suite arm64 "$(qemu_of arm64)"
    want armhf && cross_suite armhf "$(qemu_of armhf)"
  fi
  # The same system tests on an arm64 VM (busybox init, Debian's arm64 kernel).
  # The oci tests run with Debian's crun:arm64 (tools/vmtest fetches it);
  # without the driver or the NRI plugin (--only vm-arm64 after an older
  # build) they skip or fail with the reason. --timeout 600: TCG emulates
  # the arm64 VM; with the oci tests (about 100 s) its boot 1 took 222 s on
  # the 2-core machine under load (150 s, the default, is too short).
  arm_vm=()
  if want vm-arm64 && [ -x build/arm64/outpost ] && [ -x build/arm64/test_helper ]; then
    arm_vm=(tools/vmtest --arch arm64 --timeout 600 --binary build/arm64/outpost --helper build/arm64/test_helper)
    for f in build/arm64/test_plugin build/arm64/test_nri_plugin build/arm64/outpost-oci-driver; do
      [ -x "$f" ] && arm_vm+=(--extra "$f")
    done
  fi
  if want vm && [ $built = 1 ]; then
    # Each VM is one emulated CPU (qemu TCG, one thread): in the full run
    # the arm64 one runs beside the x86_64 one, each on a core of its own
    # (their files are apart: build/vm/<arch>/, each under its own lock).
    [ ${#arm_vm[@]} -gt 0 ] && [ -z "$ONLY" ] && bg_start vm-arm64 tap "${arm_vm[@]}" && arm_vm=()
    # --timeout 450: the oci driver's tests (crun) add about 2 minutes to
    # boot 1, which took 261 s in all on the 2-core machine under load
    # (150 s, the default, was nearly used up without them).
    tap_suite vm tools/vmtest --timeout 450 --binary build/outpost --helper build/test_helper \
      --extra build/test_plugin --extra build/test_nri_plugin --extra build/outpost-oci-driver
    [ -n "${BG_PID[vm-arm64]:-}" ] && bg_collect vm-arm64
  fi
  [ ${#arm_vm[@]} -gt 0 ] && tap_suite vm-arm64 "${arm_vm[@]}"
fi

echo
echo "took ${SECONDS} s (each \"== SUITE (at N s)\" line says when that suite started)"
if [ ${#FAILURES[@]} -gt 0 ]; then
  echo "Failures:"
  for f in "${FAILURES[@]}"; do echo "  $f"; done
fi
if [ "$SKIPPED" -gt 0 ]; then
  echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
else
  echo "$PASSED passed, $FAILED failed"
fi
[ "$FAILED" -eq 0 ]
