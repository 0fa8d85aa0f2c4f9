#!/usr/bin/env bash
# Tests the TARGETS line of tools/bench/run.sh with fake benchmarks printing
# known BENCH lines (and one that fails). Prints "ok NAME" or "not ok NAME -
# why" per case; exits 1 if any case failed.
set -u
cd "$(dirname "$0")/../.."
RUN="$PWD/tools/bench/run.sh"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
ok() { echo "ok $1"; }
not_ok() { echo "not ok $1 - $2"; FAILED=1; }
has() {  # NAME TEXT: the TARGETS line contains TEXT
  if grep -q "^TARGETS " <<<"$OUT" && grep "^TARGETS " <<<"$OUT" | grep -qF -- "$2"; then ok "$1"; else not_ok "$1" "no '$2' in: $(grep '^TARGETS' <<<"$OUT")"; fi
}

mkdir -p "$TMP/build/bench"
cat >"$TMP/build/bench/a_bench" <<'EOF'
#!/bin/sh
echo "BENCH task_start_api_idle_p50 900.0 us baseline=fork_exec_p50 800.0 ratio=1.12"
echo "BENCH task_start_api_1000_tasks_p50 1200.0 us baseline=fork_exec_p50 800.0 ratio=1.50"
echo "BENCH worker_rss_per_task 6.3 KiB baseline=target_per_task 8.0 ratio=0.79"
echo "BENCH peer_restart_after_kill9_p50 3.0 ms baseline=best_peer 4.0 ratio=0.75"
EOF
cat >"$TMP/build/bench/b_bench" <<'EOF'
#!/bin/sh
echo "BENCH remove_1000_tasks 1500.0 ms baseline=target 1000.0 ratio=1.50"
exit 3
EOF
chmod +x "$TMP/build/bench/"*
OUT=$("$RUN" "$TMP/build" 2>"$TMP/err")
rc=$?
if [ "$rc" -ne 0 ]; then ok "a failing benchmark fails the run"; else not_ok "a failing benchmark fails the run" "exit 0"; fi
if grep -q "^BENCH remove_1000_tasks" <<<"$OUT"; then ok "benchmark lines are passed through"; else not_ok "benchmark lines are passed through" "$OUT"; fi
has "a ratio between two figures" "task_start_api_1000_tasks_p50/task_start_api_idle_p50<=1.2:FAIL(1.33)"
has "a ratio target met" "task_start_api_idle_p50.ratio<=1.5:PASS(1.12)"
has "a value target missed" "worker_rss_per_task<=4:FAIL(6.3)"
has "a peer target met" "peer_restart_after_kill9_p50.ratio<=1.0:PASS(0.75)"
has "lines of a benchmark that then failed still count" "remove_1000_tasks.ratio<=1.0:FAIL(1.5)"
has "a figure not printed is not measured" "boot_to_first_task<=50:NOT-MEASURED"
total=$(grep -cvE '^[[:space:]]*(#|$)' tools/bench/targets.txt)
has "the counts add up to every target" "2 met, 3 missed, $((total - 5)) not measured"

# A run that printed no BENCH line at all: every target not measured.
mkdir -p "$TMP/empty/bench"
printf '#!/bin/sh\necho "nothing measured"\n' >"$TMP/empty/bench/quiet_bench"
chmod +x "$TMP/empty/bench/quiet_bench"
OUT=$("$RUN" "$TMP/empty" 2>/dev/null)
has "a run without figures measures nothing" "0 met, 0 missed, $total not measured"
exit $FAILED
