#!/bin/bash
# Runs every benchmark binary in <builddir>/bench/ and prints its BENCH lines:
#   BENCH <name> <value> <unit> baseline=<name> <baseline value> ratio=<value/baseline>
# Usage: tools/bench/run.sh <builddir>
# Exits non-zero if a benchmark fails (its remaining lines are then missing).
# Ends with one line checking tools/bench/targets.txt against the run:
#   TARGETS make-bench <n> met, <n> missed, <n> not measured: name<=limit:PASS(v) ...
#
# Benchmarks that need cgroup v2 and root (the host has neither) run inside
# the test VM instead: for each tools/bench/vm/NAME.sh whose NAME is a
# binary in <builddir>/bench/, tools/vmtest boots the VM with that binary as
# /usr/bin/NAME and runs the script; its output (the BENCH lines among it)
# is printed here. Without QEMU they are skipped with a message.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: tools/bench/run.sh <builddir>}
dir="$build/bench"
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
for bin in "$dir"/*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  found=1
  vm_only "$bin" && continue
  if ! "$bin"; then
    echo "run.sh: $(basename "$bin") failed" >&2
    status=1
  fi
done

# The VM benchmarks, one VM boot each.
for script in "$root"/tools/bench/vm/*.sh; do
  [ -f "$script" ] || continue
  name=$(basename "$script" .sh)
  bin="$dir/$name"
  [ -x "$bin" ] || continue
  case $(file -bL "$bin") in
    *aarch64*) arch=arm64 qemu=qemu-system-aarch64 ;;
    *) arch=x86_64 qemu=qemu-system-x86_64 ;;
  esac
  if ! command -v "$qemu" >/dev/null 2>&1; then
    echo "run.sh: $name skipped: it runs in the test VM and $qemu is not installed (tools/deps.sh)" >&2
    continue
  fi
  logs=$(mktemp -d "${TMPDIR:-/tmp}/outpost-bench-vm.XXXXXX")
  result=$("$root/tools/vmtest" --arch "$arch" --tests-dir "$root/tools/bench/vm" --filter "$name" \
             --binary "$build/outpost" --helper "$build/test_helper" --extra "$bin" --logs "$logs" \
             --timeout 600 --quiet)
  rc=$?
  sed -n 's/^\[stdout\] //p' "$logs/$name.log" 2>/dev/null
  case $result in
    "ok "*) ;;
    "skip "*) echo "run.sh: $name: $result" >&2 ;;
    *)
      echo "run.sh: $name failed in the VM (vmtest exit $rc): ${result:-no result}" >&2
      sed -n 's/^\[stderr\] /  /p' "$logs/$name.log" 2>/dev/null | tail -n 20 >&2
      status=1
      ;;
  esac
  rm -rf "$logs"
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
  FNR == NR {
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
