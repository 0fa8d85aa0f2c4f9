#!/bin/bash
# Runs every benchmark binary in <builddir>/bench/ and prints its BENCH lines:
#   BENCH <name> <value> <unit> baseline=<name> <baseline value> ratio=<value/baseline>
# Usage: tools/bench/run.sh <builddir> [--vm-also <builddir2>]
# Exits non-zero if a benchmark fails (its remaining lines are then missing).
# Ends with one line checking tools/bench/targets.txt against the run:
#   TARGETS make-bench <n> met, <n> missed, <n> not measured: name<=limit:PASS(v) ...
#
# Benchmarks that need cgroup v2 and root (the host has neither) run inside
# the test VM instead: for each tools/bench/vm/NAME.sh whose NAME is a
# binary in <builddir>/bench/, tools/vmtest boots the VM with that binary as
# /usr/bin/NAME and runs the script; its output (the BENCH lines among it)
# is printed here. Without QEMU they are skipped with a message. A script
# with a line "# bench-binary: none" needs no bench binary (only outpost and
# test_helper of <builddir>); a line "# vmtest-args: ARGS" adds ARGS to its
# tools/vmtest command (paths relative to the repository's root). The VM's
# architecture is that of the bench binary, else that of <builddir>/outpost.
#
# --vm-also <builddir2>: run the VM benchmarks a second time with the
# binaries of <builddir2> (e.g. build/arm64: the aarch64 VM), those of
# <builddir2>/bench/ or script-only. `make bench BENCH_ARM64=1` does that.
# Benchmark binaries that are not for this machine's architecture (make
# bench ARCH=arm64 on x86_64) are not run on the host; their VM part runs.
# BENCH_ONLY=GLOB (environment; make bench BENCH_ONLY=...) runs only the
# benchmarks whose name matches GLOB, e.g. BENCH_ONLY=boot_bench.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
usage="usage: tools/bench/run.sh <builddir> [--vm-also <builddir2>]"
build=${1:?$usage}
also=
if [ $# -ge 2 ]; then
  if [ "$2" != --vm-also ] || [ $# -ne 3 ]; then
    echo "$usage" >&2
    exit 2
  fi
  also=$3
  [ -f "$also/outpost" ] || { echo "run.sh: no $also/outpost (build it first: make ARCH=arm64)" >&2; exit 1; }
fi
dir="$build/bench"
only=${BENCH_ONLY:-*}
if [ ! -d "$dir" ]; then
  echo "run.sh: no benchmarks in $dir (build them with make bench)" >&2
  exit 1
fi
# Everything printed is also kept for the TARGETS line at the end.
out=$(mktemp "${TMPDIR:-/tmp}/outpost-bench.XXXXXX")
trap 'rm -f "$out"' EXIT
run_all() {
status=0
found=0
vm_only() { [ -f "$root/tools/bench/vm/$(basename "$1").sh" ]; }
# elf_arch FILE: x86_64, arm64 or the file's own description.
elf_arch() {
  case $(file -bL "$1") in
    *aarch64*) echo arm64 ;;
    *x86-64*) echo x86_64 ;;
    *) file -bL "$1" | cut -d, -f1-2 ;;
  esac
}
case $(uname -m) in aarch64) host_arch=arm64 ;; *) host_arch=$(uname -m) ;; esac
for bin in "$dir"/*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  found=1
  vm_only "$bin" && continue
  # shellcheck disable=SC2254  # a glob on purpose
  case $(basename "$bin") in $only) ;; *) continue ;; esac
  a=$(elf_arch "$bin")
  if file -bL "$bin" | grep -q '^ELF' && [ "$a" != "$host_arch" ]; then
    echo "run.sh: $(basename "$bin") not run: built for $a, this machine is $host_arch (its VM benchmarks still run)" >&2
    continue
  fi
  if ! "$bin"; then
    echo "run.sh: $(basename "$bin") failed" >&2
    status=1
  fi
done

# The VM benchmarks, one VM run each (a run may boot more than once).
# vm_bench BUILDDIR SCRIPT
vm_bench() {
  vb=$1 vs=$2
  name=$(basename "$vs" .sh)
  # shellcheck disable=SC2254
  case $name in $only) ;; *) return 0 ;; esac
  bin="$vb/bench/$name"
  script_only=0
  grep -q '^# bench-binary: none' "$vs" && script_only=1
  if [ $script_only = 1 ]; then
    [ -x "$vb/outpost" ] || return 0
    archof=$vb/outpost
  else
    [ -x "$bin" ] || return 0
    archof=$bin
  fi
  found=1
  case $(elf_arch "$archof") in
    arm64) arch=arm64 qemu=qemu-system-aarch64 ;;
    *) arch=x86_64 qemu=qemu-system-x86_64 ;;
  esac
  if ! command -v "$qemu" >/dev/null 2>&1; then
    echo "run.sh: $name skipped: it runs in the test VM and $qemu is not installed (tools/deps.sh)" >&2
    return 0
  fi
  # shellcheck disable=SC2046  # the script's own extra arguments, split on spaces
  set -- $(sed -n 's/^# vmtest-args: //p' "$vs" | head -n 1)
  [ $script_only = 1 ] || set -- "$@" --extra "$bin"
  logs=$(mktemp -d "${TMPDIR:-/tmp}/outpost-bench-vm.XXXXXX")
  result=$(cd "$root" && tools/vmtest --arch "$arch" --tests-dir tools/bench/vm --filter "$name" \
             --binary "$vb/outpost" --helper "$vb/test_helper" --logs "$logs" \
             --timeout 600 --quiet "$@")
  rc=$?
  sed -n 's/^\[stdout\] //p' "$logs/$name.log" 2>/dev/null
  case $result in
    "ok "*) ;;
    "skip "*) echo "run.sh: $name ($arch): $result" >&2 ;;
    *)
      echo "run.sh: $name failed in the $arch VM (vmtest exit $rc): ${result:-no result}" >&2
      sed -n 's/^\[stderr\] /  /p' "$logs/$name.log" 2>/dev/null | tail -n 20 >&2
      status=1
      ;;
  esac
  rm -rf "$logs"
}
build=$(cd "$build" && pwd)
[ -z "$also" ] || also=$(cd "$also" && pwd)
for b in "$build" ${also:+"$also"}; do
  for script in "$root"/tools/bench/vm/*.sh; do
    [ -f "$script" ] || continue
    vm_bench "$b" "$script"
  done
done

if [ "$found" -eq 0 ]; then
  echo "run.sh: no benchmark binaries in $dir" >&2
  exit 1
fi
exit $status
}
run_all | tee "$out"
status=${PIPESTATUS[0]}

# One line for the whole run: each target of tools/bench/targets.txt,
# "name<=limit:PASS" / ":FAIL" / ":NOT-MEASURED", and the counts.
awk '
  FILENAME == ARGV[1] {
    if ($1 == "BENCH") {
      value[$2] = $3
      for (i = 4; i <= NF; i++) if ($i ~ /^ratio=/) ratio[$2] = substr($i, 7)
    }
    next
  }
  /^[ \t]*(#|$)/ { next }
  {
    name = $1; what = $2; limit = $3 + 0; tok = name "<=" $3
    if (what == "ratio") { have = (name in ratio); v = ratio[name] + 0; tok = name ".ratio<=" $3 }
    else if (what == "value") { have = (name in value); v = value[name] + 0 }
    else if (what ~ /^vs:/) {
      other = substr(what, 4); have = (name in value) && (other in value) && value[other] > 0
      if (have) v = value[name] / value[other]
      tok = name "/" other "<=" $3
    } else { printf "run.sh: targets.txt line %d: unknown check \"%s\"\n", FNR, what > "/dev/stderr"; next }
    if (!have) { missing++; line = line " " tok ":NOT-MEASURED" }
    else if (v <= limit) { met++; line = line " " tok ":PASS(" sprintf("%.3g", v) ")" }
    else { missed++; line = line " " tok ":FAIL(" sprintf("%.3g", v) ")" }
  }
  END { printf "TARGETS make-bench %d met, %d missed, %d not measured:%s\n", met, missed, missing, line }
' "$out" "$root/tools/bench/targets.txt"
exit $status
