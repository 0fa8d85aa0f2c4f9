# Helpers for integration tests (sourced by run.sh). Each test function runs
# in its own subshell with a fresh directory $T; the agent it starts is
# killed when the test ends, pass or fail.

# run_one NAME: runs test function NAME, prints ok/not ok.
run_one() {
  local name="$1" out
  local dir t0=$EPOCHREALTIME
  dir="$(mktemp -d /tmp/outpost-it.XXXXXX)"
  out="$(
    T="$dir"
    SOCK="$T/run/outpost.sock"
    AGENT_PID=""
    cd "$T" || exit 1
    trap 'cleanup_agents' EXIT
    set -o pipefail
    "$name" 2>&1
  )"
  local rc=$?
  # How long the test took, for finding the slow ones (not a result).
  local took
  took="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  if [ $rc -eq 0 ]; then
    echo "ok ${name#test_}"
    echo "# ${name#test_} took ${took} s"
    rm -rf "$dir"
  else
    local why
    why="$(printf '%s\n' "$out" | grep -m1 '^FAIL: ' | sed 's/^FAIL: //')"
    echo "not ok ${name#test_} - ${why:-exit $rc}"
    echo "    # took ${took} s"
    printf '%s\n' "$out" | sed 's/^/    # /'
    [ -f "$dir/agent.log" ] && sed 's/^/    # agent: /' "$dir/agent.log" | tail -n 20
  fi
  return $rc
}

cleanup_agents() {
  local p
  for p in $(cat "$T/.pids" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  # Tasks outlive their agent by design: kill this test's tasks too (found
  # by the task dir the agent puts in their environment, under $T).
  for p in $(grep -lsaF "OUTPOST_TASK_DIR=$T/" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    kill -9 "$p" 2>/dev/null
  done
  local d
  for d in $(cat "$T/.tmpfs-dirs" 2>/dev/null); do rm -rf "$d"; done
}

fail() { echo "FAIL: $*"; exit 1; }

# write_config [EXTRA_JSON_MEMBERS]: config using dirs under $T. Unless the
# extra members say otherwise, jobs.d is $T/jobs.d, the runtime dir $T/run
# and the cgroup root is outside any cgroup2 mount, so a test never touches
# the host's /etc or its cgroups (the agent reports cgroup v2 as unusable).
write_config() {
  local extra="${1:-}" defaults=""
  [[ "$extra" == *'"jobs_dir"'* ]] || defaults+="\"jobs_dir\": \"$T/jobs.d\", "
  [[ "$extra" == *'"cgroup_root"'* ]] || defaults+="\"cgroup_root\": \"$T/no-cgroup\", "
  [[ "$extra" == *'"runtime_dir"'* ]] || defaults+="\"runtime_dir\": \"$T/run\", "
  # The host's hook directories never reach a test's tasks.
  [[ "$extra" == *'"hooks_dirs"'* ]] || defaults+="\"hooks_dirs\": [\"$T/hooks.d\"], "
  [[ "$extra" == *'"hook_path"'* ]] || defaults+="\"hook_path\": \"$T/hooks\", "
  # Nor the host's CNI configs or its /run/netns.
  [[ "$extra" == *'"netns_dir"'* ]] || defaults+="\"netns_dir\": \"$T/netns\", "
  [[ "$extra" == *'"cni_config_dir"'* ]] || defaults+="\"cni_config_dir\": \"$T/cni.d\", "
  # (and the same output whether the host has CNI plugins or not)
  [[ "$extra" == *'"cni_path"'* ]] || defaults+="\"cni_path\": [\"$T/cni-bin\"], "
  # Nor the host's kubelet plugin directories.
  [[ "$extra" == *'"kubelet_plugins_dir"'* ]] || defaults+="\"kubelet_plugins_dir\": \"$T/kubelet/plugins_registry\", "
  [[ "$extra" == *'"device_plugins_dir"'* ]] || defaults+="\"device_plugins_dir\": \"$T/kubelet/device-plugins\", "
  [[ "$extra" == *'"nomad_plugin_dir"'* ]] || defaults+="\"nomad_plugin_dir\": \"$T/nomad-plugins\", "
  cat >"$T/config.json" <<JSON
{
  $defaults"state_dir": "$T/state",
  "api_socket": "$SOCK"${extra:+,
  $extra}
}
JSON
}

# tmpfs_dir: prints a new empty directory on tmpfs (/dev/shm), removed when
# the test ends; fails if /dev/shm is not tmpfs.
tmpfs_dir() {
  [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] || return 1
  local d
  d="$(mktemp -d /dev/shm/outpost-it.XXXXXX)" || return 1
  echo "$d" >>"$T/.tmpfs-dirs"
  echo "$d"
}

# start_agent [ARGS...]: starts the agent in the background with $T/config.json
# (written by write_config if missing) and waits until `status` answers.
start_agent() {
  [ -f "$T/config.json" ] || write_config
  "$OUTPOST" agent --config "$T/config.json" "$@" >>"$T/agent.log" 2>&1 &
  AGENT_PID=$!
  echo "$AGENT_PID" >>"$T/.pids"
  wait_for 10 op status >/dev/null || fail "agent did not answer status within 10s: $(tail -n 5 "$T/agent.log")"
}

# op ARGS...: the CLI against this test's agent.
op() { "$OUTPOST" --socket "$SOCK" "$@"; }

# wait_for SECONDS CMD...: polls CMD until it succeeds or the deadline passes.
# Polling with a deadline is synchronisation on an observable condition, not
# a sleep standing in for one.
wait_for() {
  local secs="$1"; shift
  local deadline=$((SECONDS + secs))
  local out
  # The output is that of the run that succeeded (running the command again
  # could see a state that has moved on).
  while ! out=$("$@" 2>/dev/null); do
    [ $SECONDS -ge $deadline ] && { printf '%s\n' "$out"; return 1; }
    sleep 0.02
  done
  [ -n "$out" ] && printf '%s\n' "$out"
  return 0
}

# wait_gone PID SECONDS: waits for a process to exit (it must be our child
# for `wait` to report its status; this only polls for its absence).
wait_gone() {
  local pid="$1" secs="${2:-10}"
  local deadline=$((SECONDS + secs))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.02
  done
}

expect_eq() {  # ACTUAL EXPECTED WHAT
  [ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"
}
expect_contains() {  # HAYSTACK NEEDLE WHAT
  case "$1" in *"$2"*) ;; *) fail "$3: expected to contain '$2', got: $1" ;; esac
}
expect_not_contains() {
  case "$1" in *"$2"*) fail "$3: expected not to contain '$2', got: $1" ;; esac
}
# expect_exit CODE CMD...: runs CMD, checks its exit code, leaves output in $OUT.
expect_exit() {
  local want="$1"; shift
  OUT="$("$@" 2>&1)"
  local got=$?
  [ "$got" = "$want" ] || fail "'$*' exited $got, expected $want; output: $OUT"
}
# json_get FIELD: reads a top-level scalar from JSON on stdin (no jq needed);
# null (an empty text or unset time, docs/cli-json.md) prints as "".
json_get() {
  python3 -c 'import json,sys; v=json.load(sys.stdin); 
for k in sys.argv[1].split("."): v=v[k]
print("" if v is None else v)' "$1"
}

# proc_alive PID: PID runs and is not a zombie. Its state is read once: a
# zombie reaped between a `kill -0` and a read of /proc/PID/stat would
# otherwise count as alive. proc_gone PID: the opposite, for wait_for.
proc_alive() {
  local s
  s="$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null)"
  [ -n "$s" ] && [ "$s" != Z ]
}
proc_gone() { ! proc_alive "$1"; }

# sig_in_mask PID FIELD SIGNO: FIELD (SigIgn, SigCgt) of /proc/PID/status
# has SIGNO set — the process has installed its handler (or SIG_IGN).
sig_in_mask() {
  local hex
  hex="$(sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" 2>/dev/null)" || return 1
  [ -n "$hex" ] && [ $(( (0x$hex >> ($3 - 1)) & 1 )) = 1 ]
}
