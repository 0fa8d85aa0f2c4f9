#!/bin/sh
# vmtest: power-cycle
# vmtest-timeout: 300
# Power cuts at random moments of a churning workload (docs/testing.md,
# "Power cuts"). Every boot: the agent started by init must answer, have
# loaded every job record (a damaged one is moved aside as JOB.json.bad and
# reported in its log, never fatal) and bring the jobs back: the three
# "keep" jobs (never touched after boot 1) run again, each task exactly
# once; each "churn" job is consistent (running with exactly one process per
# task, or stopped/removed with none); no task process is left without a
# record. Then, while power cuts are left (tools/vmtest --power-cuts N), it
# starts the churn again (submit with a changed spec, stop, restart, rm of
# four jobs, in a loop) and asks for a power cut after a random 0.5-6 s, so
# QEMU is killed at a random moment of the churn. The last boot prints the
# figures of the whole chain.
. "$(dirname "$0")/lib/common.sh"

state_disk_ok
D=$(pc_dir)
CHURN_JOBS="churn0 churn1 churn2 churn3"
KEEP_JOBS="keep0 keep1 keep2"

# A job whose single task counts forever; its argv[0] "pcmark-JOB" marks
# its processes (the sh; `sleep` children carry no mark).
# printf format of a job spec, for JOB JOB JOB GENERATION RESTART-POLICY.
JOB_FMT='{"id": "%s", "tasks": [{"name": "t", "command": "/bin/sh", "args": ["-c", "i=0; while :; do echo %s $i; i=$((i+1)); sleep 0.2; done", "pcmark-%s"], "env": {"GEN": "%s"}, "restart": {"policy": "%s"}, "logs": {"max_file_size": "8KiB", "max_files": 2}}]}\n'
job_json() { printf "$JOB_FMT" "$1" "$1" "$1" "$2" "$3"; }  # JOB GENERATION RESTART

# marks: "PID pcmark-JOB" for every marked process, in one pass over /proc
# (a shell loop forking per process is too slow under TCG). A child between
# its fork and its exec still carries its parent's mark for a moment; the
# callers retry.
marks() {
  grep -a -o -H 'pcmark-[a-z0-9]*' /proc/[0-9]*/cmdline 2>/dev/null |
    sed -n 's|^/proc/\([0-9]*\)/cmdline:\(pcmark-[a-z0-9]*\)$|\1 \2|p'
}

# job_state JOB: the job's status word in `outpost ps`, "absent" when it is
# not listed.
ps_out=
job_state() {
  _l=$(echo "$ps_out" | awk -v j="$1" '$1 == j { print $2; exit }')
  echo "${_l:-absent}"
}

# consistent: the invariants above; prints what is wrong on stdout.
consistent() {
  ps_out=$(outpost ps 2>&1) || { echo "outpost ps: $ps_out"; return 1; }
  _marks=$(marks)
  _bad=0
  for j in $KEEP_JOBS $CHURN_JOBS; do
    st=$(job_state "$j")
    pids=$(echo "$_marks" | awk -v m="pcmark-$j" '$2 == m { print $1 }')
    n=$(echo "$pids" | grep -c .)
    case "$j/$st/$n" in
      keep*/running/1|churn*/running/1|churn*/stopped/0|churn*/absent/0) ;;
      *) echo "$j: '$st' with $n processes"; _bad=1; continue ;;
    esac
    [ "$n" = 1 ] || continue
    # The marked process is the pid the agent has for the task (no orphan).
    tp=$(outpost --json inspect "$j/t" 2>/dev/null | tr -d '\n' | sed 's/"task": *{.*//' |
      sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' | head -n 1)
    [ "$tp" = "$pids" ] || { echo "$j: process $pids is not the task's pid '$tp'"; _bad=1; }
  done
  [ $_bad = 0 ]
}

b=$VMTEST_BOOT
if [ "$b" = 1 ]; then
  rm -rf "$D"
  mkdir -p "$D" || fail "cannot create $D"
  wait_for 60 outpost status || fail "agent not answering: $(wait_output)"
  echo "boot 1: submitting $KEEP_JOBS"
  for j in $KEEP_JOBS; do
    job_json "$j" 1 always >"/tmp/$j.json"
    out=$(outpost run -f "/tmp/$j.json" --timeout 30s 2>&1) || fail "outpost run $j: $out"
  done
  echo 0 >"$D/damaged"
  echo 0 >"$D/slowest"
else
  [ -d "$D" ] || fail "the test's notes in $D were lost in a power cut"
  t0=$(now)
  echo "boot $b: checking the agent and the jobs"
  wait_for 60 outpost status || fail "boot $b: agent not answering 60 s after the runner started: $(wait_output)"
  agent_init_pid >/dev/null || fail "boot $b: no agent started by init"
  wait_for 120 consistent || fail "boot $b: jobs not consistent 120 s after the agent answered: $(wait_output)"
  took=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  # Damaged records: moved aside and reported, never fatal.
  bad=$(grep -c 'moved to .*\.bad' /var/log/outpost.log)
  [ "$bad" -gt 0 ] && grep 'moved to .*\.bad' /var/log/outpost.log | sed 's/^/damaged record: /'
  echo $(( $(cat "$D/damaged") + bad )) >"$D/damaged"
  awk -v a="$took" -v b="$(cat "$D/slowest")" 'BEGIN { print (a > b ? a : b) }' >"$D/slowest.new" &&
    mv "$D/slowest.new" "$D/slowest"
  echo "boot $b: consistent ${took}s after the runner started; $bad damaged record(s)"
fi
sync

if [ "${VMTEST_CUTS_LEFT:-0}" -gt 0 ]; then
  seed=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
  # The churn: detached from the runner. Each operation is reported on the
  # console as it ends, as part of this test's output (the host's
  # logs/power_cut_churn.log), since a file would lose its last lines in
  # the cut. `run --detach` returns once the spec is accepted, so the
  # operations come quickly and the cut finds some half done.
  setsid sh -c '
    RANDOM=$1; shift; prefix=$1; shift; fmt=$1; shift
    g=0
    while :; do
      g=$((g + 1))
      j=churn$((RANDOM % 4))
      case $((RANDOM % 5)) in
        0|1) printf "$fmt" "$j" "$j" "$j" "$g" always >/tmp/churn.json
             op="run $j (GEN $g)"; outpost run -f /tmp/churn.json --detach ;;
        2) op="stop $j"; outpost stop "$j" ;;
        3) op="restart $j"; outpost restart "$j" ;;
        4) op="rm $j"; outpost rm "$j" ;;
      esac >/dev/null 2>&1
      echo "${prefix}churn: $op: exit $?" >/dev/console
    done' churn "$seed" "OUTPOST-VMTEST-OUT: $VMTEST_NAME: " "$JOB_FMT" </dev/null >/dev/null 2>&1 &
  # A random moment: 0.5 to 6 s into the churn.
  ms=$(( 500 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 5500 ))
  sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
  echo "boot $b: churn seed $seed, power cut requested after ${ms} ms of churn"
  power_cycle
fi

cuts=$((b - 1))
[ "$cuts" -gt 0 ] || fail "no power cut happened (run with tools/vmtest --power-cuts N, N >= 1)"
echo "$cuts power cuts during churn: the agent answered and every job was consistent after each; slowest recovery $(cat "$D/slowest") s after the runner started; $(cat "$D/damaged") damaged record(s) moved aside"
rm -rf "$D"
