#!/bin/sh
# Boot to first task, in the test VM: from the execve of `outpost agent` by
# busybox init to the first instruction of the main() of the first jobs.d
# task, against the floor measured in the same boot: busybox init starting
# the same static helper directly.
#
# tools/bench/run.sh boots the VM with the lines below (no bench binary:
# this script and test_helper do it all):
#   tools/vmtest --tests-dir tools/bench/vm --filter boot_bench \
#     --binary build/outpost --helper build/test_helper \
#     --inittab tools/bench/vm/boot_bench.inittab --power-cuts 4
# boot_bench.inittab does the measuring; this script only collects it:
#   floor.exec  stamp-exec's CLOCK_MONOTONIC right before it execs the helper
#   floor.main  the helper's `timestamp` at the start of its main()
#   agent.exec  stamp-exec's CLOCK_MONOTONIC right before it execs outpost
#   task.main   the jobs.d task's `timestamp` (lib/boot_bench_setup.sh wrote
#               the job file before init started the agent)
# One sample per boot: the script keeps it on the state disk and asks for a
# power cycle while power cuts are left, so --power-cuts 4 gives 5 boots
# (at least 2: a power-cycle test must ask for one in boot 1); the last
# boot prints the medians:
#   BENCH boot_to_first_task <ms> ms baseline=init_to_helper <ms> ratio=<r>
# (boot_to_first_task_arm64 / init_to_helper_arm64 in the aarch64 VM),
# Every boot prints a "boot_bench:" line with its sample; the last one also
# the agent's log lines on the same time axis (ms after the agent's exec).
# vmtest: power-cycle
# vmtest-timeout: 60
# bench-binary: none
# vmtest-args: --inittab tools/bench/vm/boot_bench.inittab --power-cuts 4
set -u
S=/run/boot-bench
KEEP=/var/lib/outpost/boot-bench
H=/usr/bin/outpost-test-helper
[ -x "$H" ] || { echo "SKIP: no $H (tools/vmtest --helper)"; exit 77; }
[ -f /etc/outpost/boot-bench.json ] ||
  { echo "SKIP: not booted with tools/bench/vm/boot_bench.inittab (tools/vmtest --inittab)"; exit 77; }
[ -d "$KEEP" ] || { echo "boot_bench: no $KEEP (did lib/boot_bench_setup.sh run?)" >&2; exit 1; }

arch=$(uname -m)
sfx=
[ "$arch" = aarch64 ] && sfx=_arm64
boot=${VMTEST_BOOT:-1}

i=0
for f in floor.exec floor.main agent.exec task.main; do
  while [ ! -s "$S/$f" ]; do
    i=$((i + 1))
    if [ $i -gt 300 ]; then
      echo "boot_bench: agent log:" >&2
      tail -n 15 /var/log/outpost.log >&2
      echo "boot_bench: boot $boot: no $S/$f within 30 s of the runner's start" >&2
      exit 1
    fi
    sleep 0.1
  done
done
read -r floor_exec <"$S/floor.exec"
read -r floor_main <"$S/floor.main"
read -r agent_exec <"$S/agent.exec"
read -r task_main <"$S/task.main"
agent_ns=$(awk -v a="$agent_exec" -v b="$task_main" 'BEGIN { printf "%.0f", b - a }')
floor_ns=$(awk -v a="$floor_exec" -v b="$floor_main" 'BEGIN { printf "%.0f", b - a }')
echo "$boot $agent_ns $floor_ns" >>"$KEEP/samples"
sync

awk -v b="$boot" -v arch="$arch" -v a="$agent_ns" -v f="$floor_ns" -v e="$agent_exec" 'BEGIN {
  printf "boot_bench: boot %d (%s): agent exec -> first task %.1f ms; init -> helper %.2f ms (floor); agent exec'\''d %.3f s after boot\n",
    b, arch, a / 1e6, f / 1e6, e / 1e9 }'
if [ "${VMTEST_CUTS_LEFT:-0}" -gt 0 ]; then
  echo "boot_bench: boot $boot done; power cycle for the next sample"
  exit 75
fi

# The last boot's agent log lines (wall-clock ms) on the stamps' CLOCK_MONOTONIC axis,
# as ms after the agent's exec: time of day of the line minus that of the
# exec (mono and wall clock read together by `test_helper clocks`).
clk=$("$H" clocks)
awk -v mono="${clk% *}" -v real="${clk#* }" -v e="$agent_exec" '
  BEGIN { exec_tod = ((real - (mono - e)) / 1e9) % 86400 }
  NR <= 20 && $1 ~ /^[0-9-]+T[0-9:.]+Z$/ {
    split(substr($1, 12, 12), t, ":")
    tod = t[1] * 3600 + t[2] * 60 + t[3]
    d = (tod - exec_tod) * 1000
    if (d < -43200000) d += 86400000
    line = $0; sub(/^[^ ]+ /, "", line)
    printf "boot_bench:   %+8.1f ms  %s\n", d, substr(line, 1, 160)
  }' /var/log/outpost.log

# The last boot: medians over every boot's sample.
n=$(wc -l <"$KEEP/samples")
med() {  # column of $KEEP/samples -> median in ms
  cut -d' ' -f"$1" "$KEEP/samples" | sort -n |
    awk '{ v[NR] = $1 } END { if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f", m / 1e6 }'
}
range() {
  cut -d' ' -f"$1" "$KEEP/samples" | sort -n |
    awk '{ v[NR] = $1 } END { printf "%.2f..%.2f", v[1] / 1e6, v[NR] / 1e6 }'
}
a=$(med 2)
f=$(med 3)
# Per-boot ratios too: the floor, one cold exec per boot, varies most.
ratios=$(awk '$3 > 0 { printf "%.1f\n", $2 / $3 }' "$KEEP/samples" | sort -n | paste -sd' ')
echo "boot_bench: $n boots ($arch), agent exec -> first task $(range 2) ms, init -> helper $(range 3) ms, per-boot ratios $ratios"
awk -v a="$a" -v f="$f" -v s="$sfx" 'BEGIN {
  printf "BENCH boot_to_first_task%s %.1f ms baseline=init_to_helper%s %.2f ratio=%.1f\n", s, a, s, f, (f > 0 ? a / f : 0)
  printf "TARGETS boot_to_first_task%s<=50ms:%s\n", s, (a <= 50 ? "PASS" : "FAIL") }'
