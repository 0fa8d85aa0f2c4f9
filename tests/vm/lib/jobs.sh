# Job helpers of the VM tests (busybox ash), sourced after common.sh.
HELPER=/usr/bin/outpost-test-helper
CG=/sys/fs/cgroup/outpost.slice

# submit NAME JSON: writes /tmp/NAME.json and runs it (waits until running).
submit() {
  printf '%s\n' "$2" >"/tmp/$1.json"
  outpost run -f "/tmp/$1.json" --timeout 30s || fail "outpost run $1 failed"
}
# tfield JOB/TASK KEY: a scalar of `outpost inspect JOB/TASK --json`
# (first match, so the task's summary before the driver's view).
tfield() {
  outpost --json inspect "$1" 2>/dev/null | tr -d '\n' | sed 's/"task": *{.*//' |
    sed -n "s/.*\"$2\": *\"\{0,1\}\([^\",}]*\)\"\{0,1\}.*/\1/p" | head -n 1
}
tpid() { tfield "$1" pid; }
tstate() { tfield "$1" state; }
# task_cgroup JOB TASK: the task's cgroup dir.
task_cgroup() { echo "$CG/$1/$1.$2"; }
state_is() { [ "$(tstate "$1")" = "$2" ]; }
