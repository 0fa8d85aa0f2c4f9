#!/bin/bash
# The fresh-machine test (`make test-fresh`, root): does what a new user does
# on a pristine Debian 12, in chroots of a pristine bookworm minbase.
#
#   1. root A: only `make` and `git` installed, a clone of this repository's
#      HEAD at /src. `make run` until the agent answers `outpost ps` with the
#      example jobs, then the agent is stopped. Then `make test`, a second
#      `make test` in the same tree, one interrupted with SIGINT (Ctrl-C) in
#      the middle of a step, and `make test` once more.
#   2. root A: `make vendor` (connected), then root B: only the packages the
#      README lists for a build without network, the vendored tree copied in,
#      and `make` run with no network at all (its own network namespace).
#
# Each phase prints "fresh: PHASE: exit N" (and the "N passed, N failed" line
# of each make test); the script exits 0 iff every phase did what it should.
# Full logs: $FRESH_DIR/logs/. Takes as long as about three `make test` runs.
#
# Pristine means: the roots come from debootstrap into directories made with
# Debian's own modes (nothing is chmod'ed afterwards), and nothing from the
# host gets in but the clone, /etc/resolv.conf and the apt mirror address.
#
# Environment:
#   FRESH_DIR        where the roots and logs live (default /var/tmp/outpost-fresh;
#                    not under build/, so `make clean` never meets live mounts)
#   FRESH_PHASES     subset of "run test test2 interrupt test3 airgap" (default all)
#   FRESH_INTERRUPT  the make test step to interrupt (default: one picked at
#                    random from build unit integration sanitize fuzz arm64 armhf vm)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FRESH_DIR=${FRESH_DIR:-/var/tmp/outpost-fresh}
PHASES=" ${FRESH_PHASES:-run test test2 interrupt test3 airgap} "
LOGS=$FRESH_DIR/logs
BASE_TAR=$FRESH_DIR/bookworm-minbase.tar
RESULT=0

die() { echo "test-fresh: $*" >&2; exit 2; }
say() { echo "fresh: $*"; }
want() { [[ $PHASES == *" $1 "* ]]; }

(( EUID == 0 )) || die "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || die "debootstrap missing (tools/deps.sh fresh)"
mkdir -p "$LOGS"

MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
[[ -n $MIRROR ]] || MIRROR=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
[[ -n $MIRROR ]] || MIRROR=http://deb.debian.org/debian

if [[ -n $(git -C "$ROOT" status --porcelain 2>/dev/null) ]]; then
  echo "test-fresh: note: uncommitted changes are not tested (the roots get a clone of HEAD)" >&2
fi

# ---- roots -------------------------------------------------------------------

mounts_under() { awk -v r="$1" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts; }

# Signals the processes whose root directory is inside $1 (agents and tasks
# a phase left), optionally only those whose command line ends with $3 (so
# the keeper "outpost agent --config X" is matched, not its worker, whose
# command line goes on with --worker).
kill_inside() {
  local r=$1 sig=${2:-KILL} match=${3:-} p link cmd
  for p in /proc/[0-9]*; do
    link=$(readlink "$p/root" 2>/dev/null) || continue
    [[ $link == "$r" || $link == "$r"/* ]] || continue
    if [[ -n $match ]]; then
      cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)
      [[ ${cmd% } == *"$match" ]] || continue
    fi
    kill "-$sig" "${p#/proc/}" 2>/dev/null
  done
  return 0
}

umount_root() {
  local r=$1 m
  kill_inside "$r"
  for _ in 1 2 3; do
    for m in $(mounts_under "$r" | sort -r); do umount -l "$m" 2>/dev/null; done
    [[ -z $(mounts_under "$r") ]] && return 0
  done
  return 1
}

remove_root() {
  local r=$1
  [[ -d $r ]] || return 0
  umount_root "$r" || die "mounts left under $r; not removing it"
  rm -rf --one-file-system "$r"
}

make_base() {
  [[ -f $BASE_TAR ]] && return 0
  local tmp=$FRESH_DIR/debootstrap.tmp
  remove_root "$tmp"
  # Debian's root is 0755 root:root: make it so before debootstrap fills it.
  install -d -m 0755 -o root -g root "$tmp"
  say "debootstrap bookworm minbase from $MIRROR (once; cached in $BASE_TAR)"
  debootstrap --variant=minbase bookworm "$tmp" "$MIRROR" >"$LOGS/debootstrap.log" 2>&1 ||
    die "debootstrap failed (see $LOGS/debootstrap.log)"
  tar -C "$tmp" -cpf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR" || die "cannot write $BASE_TAR"
  remove_root "$tmp"
}

# new_root DIR: a pristine root from the cached debootstrap, mounted and
# with DNS, ready for chroot.
new_root() {
  local r=$1
  remove_root "$r"
  install -d -m 0755 -o root -g root "$r"
  tar -C "$r" -xpf "$BASE_TAR" || die "cannot unpack $BASE_TAR"
  cp /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null
  # The root is a mount point of its own, as / is on a machine, and private:
  # tests that make / private in a mount namespace of theirs (the network
  # tests) can, and nothing mounted inside reaches the host's mount table.
  mount --bind "$r" "$r" && mount --make-private "$r" || die "cannot make $r a private mount point"
  mount --bind /dev "$r/dev" && mount --bind /dev/pts "$r/dev/pts" &&
    mount -t proc proc "$r/proc" && mount -t sysfs sys "$r/sys" || die "cannot mount /dev, /proc, /sys in $r"
}

# in_root DIR CMD: runs CMD with bash in the root, environment of a login.
in_root() {
  local r=$1; shift
  chroot "$r" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8 \
    bash -c "$*"
}

apt_install() {  # apt_install ROOT PACKAGE...
  local r=$1; shift
  in_root "$r" "export DEBIAN_FRONTEND=noninteractive; apt-get -q update >/dev/null 2>&1;
               apt-get -q -y install --no-install-recommends $* >/tmp/apt.log 2>&1 || { tail -5 /tmp/apt.log; exit 1; }"
}

clone_into() {  # clone_into ROOT: HEAD of this repository at ROOT/src
  rm -rf "$1/src"
  git clone -q "$ROOT" "$1/src" || die "git clone failed"
}

# ---- phases ------------------------------------------------------------------

A=$FRESH_DIR/root-a
B=$FRESH_DIR/root-b
make_base

test_line() { grep -aE '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n1; }

# run_test NAME: `make test` in root A; expects exit 0 and "N passed, 0 failed".
run_test() {
  local name=$1 log=$LOGS/$1.log rc line
  say "$name: make test (log: $log)"
  in_root "$A" "cd /src && make test" >"$log" 2>&1
  rc=$?
  line=$(test_line "$log")
  say "$name: exit $rc: ${line:-no summary line}"
  if (( rc != 0 )) || [[ ! $line =~ ^[0-9]+\ passed,\ 0\ failed ]]; then
    RESULT=1
    grep -a '^FAIL' "$log" | head -20 | sed 's/^/  /'
  fi
}

if want run || want test || want test2 || want interrupt || want test3 || want airgap; then
  new_root "$A"
  say "root A: installing make and git only"
  apt_install "$A" make git || die "cannot install make and git in root A"
  clone_into "$A"
fi

if want run; then
  log=$LOGS/run.log
  say "run: make run (log: $log)"
  in_root "$A" "cd /src && exec make run" >"$log" 2>&1 &
  run_pid=$!
  ok=0
  # The first make run installs and builds: allow an hour.
  for ((i = 0; i < 3600; i++)); do
    if ! kill -0 "$run_pid" 2>/dev/null; then break; fi
    out=$(in_root "$A" "cd /src && build/outpost --socket run/outpost.sock ps" 2>/dev/null)
    if [[ $out == *hello* && $out == *running* ]]; then ok=1; break; fi
    sleep 1
  done
  {
    echo "--- outpost ps"
    in_root "$A" "cd /src && build/outpost --socket run/outpost.sock ps" 2>&1
  } >"$LOGS/run-ps.log"
  kill_inside "$A" TERM "outpost agent --config run/config.json"
  wait "$run_pid"
  rc=$?
  kill_inside "$A"
  if (( ok )); then
    say "run: exit $rc: the agent answered outpost ps with the example jobs running:"
    sed -n '2,$p' "$LOGS/run-ps.log" | sed 's/^/  /'
  else
    say "run: exit $rc: the agent never answered outpost ps with the example jobs running"
    tail -n 20 "$log" | sed 's/^/  /'
    RESULT=1
  fi
fi

want test && run_test test
want test2 && run_test test2

if want interrupt; then
  steps=(build unit integration sanitize fuzz arm64 armhf vm)
  step=${FRESH_INTERRUPT:-${steps[RANDOM % ${#steps[@]}]}}
  log=$LOGS/interrupt.log
  # The log file name tools/test.sh gives that step.
  case "$step" in
    build) marker="build_native.log" ;; sanitize) marker="build_sanitized.log" ;;
    arm64 | armhf) marker="build_$step.log" ;; fuzz) marker="build_fuzzers.log" ;;
    *) marker="$step.log" ;;
  esac
  say "interrupt: make test, SIGINT to its process group 5 s into step '$step'"
  rm -f "$A/src/build/test-logs/$marker"
  setsid bash -c "$(declare -f in_root); in_root '$A' 'cd /src && exec make test'" >"$log" 2>&1 &
  pid=$!
  for ((i = 0; i < 3600; i++)); do
    [[ -e $A/src/build/test-logs/$marker ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  sleep 5
  kill -INT -- "-$pid" 2>/dev/null
  wait "$pid"
  rc=$?
  kill_inside "$A"
  say "interrupt: make test exited $rc after SIGINT in step '$step'"
  (( rc != 0 )) || { say "interrupt: an interrupted make test must not exit 0"; RESULT=1; }
fi

want test3 && run_test test3

if want airgap; then
  log=$LOGS/airgap.log
  say "airgap: make vendor in root A (connected) (log: $log)"
  in_root "$A" "cd /src && make vendor" >"$log" 2>&1 || { say "airgap: make vendor failed"; RESULT=1; }
  # What the README lists for a build without network.
  # The README's own command, under its heading "Building without network".
  pkgs=$(awk '/^## Building without network/ {on = 1; next} /^## / {on = 0}
              on && /^apt-get install/ {sub(/^apt-get install( --no-install-recommends)? */, ""); print; exit}' \
         "$ROOT/README.md")
  [[ -n $pkgs ]] || die "README has no 'apt-get install' line under '## Building without network'"
  new_root "$B"
  say "airgap: root B: installing only: $pkgs"
  apt_install "$B" "$pkgs" >>"$log" 2>&1 || die "cannot install the air-gap packages in root B"
  rm -rf "$B/src"
  tar -C "$A" --exclude=./src/build --exclude=./src/run -cpf - ./src | tar -C "$B" -xpf -
  say "airgap: make in root B with no network (unshare -n)"
  unshare -n chroot "$B" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
    bash -c 'cd /src && make -j2 && test -x build/outpost && build/outpost version' >>"$log" 2>&1
  rc=$?
  say "airgap: exit $rc: $(tail -n1 "$log")"
  (( rc == 0 )) || { RESULT=1; tail -n 20 "$log" | sed 's/^/  /'; }
  umount_root "$B"
fi

umount_root "$A" || echo "test-fresh: warning: mounts left under $A" >&2
if (( RESULT == 0 )); then say "all phases passed"; else say "FAILED (logs in $LOGS)"; fi
exit $RESULT
