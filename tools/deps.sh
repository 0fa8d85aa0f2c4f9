#!/bin/bash
# Installs the build and test dependencies of outpost from Debian's archive.
#
# Called by the Makefile's first pass with the groups its goals need (see
# the Makefile's head): `make` needs `build`, `make ARCH=arm64` needs
# `build arm64`, `make test` and `make deps` need `all`. Idempotent and
# silent when everything is already installed: it asks dpkg once and only
# runs apt-get (update + install, quietly, non-interactive) for what is
# missing. Works unattended (CI=true, no stdin). Exits non-zero with a
# message naming the packages that could not be installed.
#
# Usage: tools/deps.sh [--check] [GROUP...]     (default: all)
#   --check   list what is missing and exit 1 if anything is; install nothing
#             (the air-gapped check: see README "Building without network")
#
# Groups:
#   build       native C++ toolchain, the nanopb generator, and nanopb +
#               picojson (unless `make vendor` put them in third_party/)
#   arm64 armhf the cross toolchain and nanopb library of that architecture
#   test-build  GoogleTest (unit tests and the test helper)
#   test        everything `make test` runs: the above for all three
#               architectures, clang/libFuzzer, qemu, busybox, iproute2, ...
#   vm          QEMU, busybox-static and the disk tools of the VM tests
#               (tools/vmtest, `make power-cuts`), and the CNI plugins,
#               iptables and crun it copies into the guest
#   bench       the build, and the peers `make bench` compares with (peers,
#               grpcio for grpc_bench, grpcio, grpc_tools and msgpack for
#               nomad_bench, grpcio and grpc_tools for device_bench)
#   peers       s6 and runit, which peer_bench runs side by side with outpost;
#               only `make bench` asks for them (not in all: `make test` and
#               `make deps` never need them)
#   fuzz        clang and its libFuzzer runtime
#   vendor      what `make vendor` copies from (nanopb, picojson, all arches)
#   fresh       what `make test-fresh` needs (debootstrap)
#   all         every group but peers

set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "deps.sh: $*" >&2; exit 1; }

CHECK_ONLY=0
GROUPS_WANTED=()
for a in "$@"; do
  case "$a" in
    --check) CHECK_ONLY=1 ;;
    build | arm64 | armhf | test-build | test | vm | bench | peers | fuzz | vendor | fresh | all) GROUPS_WANTED+=("$a") ;;
    *) die "unknown group '$a' (groups: build arm64 armhf test-build test vm bench peers fuzz vendor fresh all)" ;;
  esac
done
((${#GROUPS_WANTED[@]})) || GROUPS_WANTED=(all)

command -v dpkg-query >/dev/null || die "this script needs a Debian-based system (dpkg-query not found)"
NATIVE_ARCH=$(dpkg --print-architecture)

# nanopb's runtime for one architecture, unless vendored for it.
triplet_of() {
  case "$1" in
    amd64) echo x86_64-linux-gnu ;; arm64) echo aarch64-linux-gnu ;;
    armhf) echo arm-linux-gnueabihf ;; *) echo "$1" ;;
  esac
}
nanopb_lib() {
  [[ -f third_party/nanopb/lib/$(triplet_of "$1")/libprotobuf-nanopb.a ]] && return 0
  if [[ $1 == "$NATIVE_ARCH" ]]; then echo libnanopb-dev; else echo "libnanopb-dev:$1"; fi
}

PACKAGES=()
FOREIGN_ARCHES=()
add() { PACKAGES+=("$@"); }
cross() {  # cross ARCH: toolchain + library for a foreign architecture
  local arch=$1
  [[ $arch == "$NATIVE_ARCH" ]] && { add "$(nanopb_lib "$arch")"; return; }
  case "$arch" in
    arm64) add g++-aarch64-linux-gnu ;;
    armhf) add g++-arm-linux-gnueabihf ;;
  esac
  local lib
  lib=$(nanopb_lib "$arch")
  if [[ -n $lib ]]; then add "$lib"; FOREIGN_ARCHES+=("$arch"); fi
}
group() {
  case "$1" in
    build)
      # The generator (vendored or not) runs protoc and Python's protobuf.
      add build-essential g++ make file python3 python3-protobuf python3-pkg-resources protobuf-compiler
      [[ -f third_party/nanopb/generator/nanopb_generator.py ]] || add nanopb
      [[ -f third_party/nanopb/include/pb.h ]] || add "$(nanopb_lib "$NATIVE_ARCH")"
      [[ -f third_party/picojson/picojson.h ]] || add picojson-dev
      ;;
    arm64 | armhf) cross "$1" ;;
    test-build) add googletest ;;
    test)
      group build; group arm64; group armhf; group test-build; group fuzz
      # integration tests (the job network tests run the CNI reference
      # plugins and iptables in private namespaces)
      add iproute2 util-linux procps containernetworking-plugins iptables
      # the gRPC interop tests (test_grpc.sh): Python's grpcio on Debian's
      # python3, and grpc_tools to generate its stubs at test time
      add python3-grpcio python3-grpc-tools
      # the Nomad driver tests (test_nomad.sh): the test driver plugin and
      # fake host decode and encode Nomad's msgpack configs with it
      add python3-msgpack
      # grpc-go peers (tests/helpers/go/, make go-peers): stock device
      # plugins and Nomad drivers are Go programs on grpc-go and go-plugin;
      # hcl/v2, go-cty and go-msgpack: Nomad's config encoding to compare with
      add golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-github-hashicorp-go-plugin-dev \
          golang-github-hashicorp-hcl-v2-dev golang-github-zclconf-go-cty-dev golang-github-hashicorp-go-msgpack-dev
      # the oci driver's tests: the OCI runtimes it drives (busybox-static
      # for the containers' root file systems comes with group vm)
      add crun runc
      group vm
      add qemu-user-static
      ;;
    vm)
      # VM tests: emulators, initramfs and state-disk tools, busybox for the guest
      add qemu-system-x86 qemu-system-arm busybox-static cpio gzip e2fsprogs file
      # what tools/vmtest copies into the x86_64 guest for the network tests
      # (tests/vm/lib/net.sh): the CNI reference plugins and iptables
      add containernetworking-plugins iptables
      # and for the oci driver's tests (tests/vm/oci_*.sh): crun, the OCI
      # runtime, with the libraries it loads
      add crun
      ;;
    bench)
      group build; group test-build; group peers
      add containernetworking-plugins iptables  # cni_bench
      add crun busybox-static  # oci_bench
      add python3-grpcio  # grpc_bench's grpcio client and server
      add python3-grpc-tools python3-msgpack  # nomad_bench's Python Nomad driver plugin, device_bench's device plugin
      ;;
    peers)
      # the peers peer_bench compares with. It starts its own s6-svscan and
      # runsvdir on private dirs; these two packages start no supervisor of
      # their own (runit-init or runit-systemd would: not installed)
      add s6 runit
      ;;
    fuzz) add clang libclang-rt-14-dev llvm ;;
    vendor)
      add nanopb libnanopb-dev picojson-dev python3-protobuf protobuf-compiler
      local a
      for a in arm64 armhf; do
        [[ $a == "$NATIVE_ARCH" ]] || { add "libnanopb-dev:$a"; FOREIGN_ARCHES+=("$a"); }
      done
      ;;
    fresh) add debootstrap git ;;
    all) group test; group build; group test-build; group fresh ;;
  esac
}
for g in "${GROUPS_WANTED[@]}"; do group "$g"; done
# Unique, in first-seen order.
mapfile -t PACKAGES < <(printf '%s\n' "${PACKAGES[@]}" | awk 'NF && !seen[$0]++')
mapfile -t FOREIGN_ARCHES < <(printf '%s\n' "${FOREIGN_ARCHES[@]+"${FOREIGN_ARCHES[@]}"}" | awk 'NF && !seen[$0]++')

# What dpkg has fully installed, as "name:arch" lines (one dpkg-query call).
installed=$(dpkg-query -W -f='${Package}:${Architecture} ${db:Status-Status}\n' 2>/dev/null |
            awk '$2 == "installed" {print $1}')
is_installed() {
  local pkg=$1
  if [[ $pkg == *:* ]]; then
    grep -qxF "$pkg" <<<"$installed"
  else
    grep -qxF "$pkg:$NATIVE_ARCH" <<<"$installed" || grep -qxF "$pkg:all" <<<"$installed"
  fi
}

missing_arches=()
foreign=" $(dpkg --print-foreign-architectures | tr '\n' ' ') "
for a in "${FOREIGN_ARCHES[@]+"${FOREIGN_ARCHES[@]}"}"; do
  [[ $foreign == *" $a "* ]] || missing_arches+=("$a")
done

missing=()
for p in "${PACKAGES[@]}"; do
  is_installed "$p" || missing+=("$p")
done

if (( ${#missing[@]} == 0 && ${#missing_arches[@]} == 0 )); then
  exit 0
fi

if (( CHECK_ONLY )); then
  (( ${#missing_arches[@]} )) && echo "missing dpkg architectures: ${missing_arches[*]}"
  (( ${#missing[@]} )) && echo "missing packages: ${missing[*]}"
  exit 1
fi

SUDO=()
if (( EUID != 0 )); then
  command -v sudo >/dev/null || die "missing packages (${missing[*]}) and not root (no sudo to install them)"
  SUDO=(sudo -n)
fi

what=("${missing[@]}")
for a in "${missing_arches[@]+"${missing_arches[@]}"}"; do what+=("(architecture $a)"); done
echo "deps.sh: installing ${#missing[@]} package(s) with apt-get: ${what[*]}" >&2
if (( ${#missing[@]} > 20 )); then
  echo "deps.sh: on a fresh machine this is about 1 GB and usually takes 5 to 10 minutes" >&2
else
  echo "deps.sh: this usually takes under 2 minutes" >&2
fi

log=$(mktemp /tmp/outpost-deps.XXXXXX)
trap 'rm -f "$log"' EXIT

for a in "${missing_arches[@]+"${missing_arches[@]}"}"; do
  "${SUDO[@]}" dpkg --add-architecture "$a" || die "dpkg --add-architecture $a failed"
done

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-q -y -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=300
          -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

# A partial index failure (seen here: "Mirror sync in progress" for one
# architecture) makes apt-get update exit non-zero although the lists it
# needs are fine, so its status is not fatal: the install below decides.
echo "deps.sh: apt-get update" >&2
if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" update </dev/null >"$log" 2>&1; then
  echo "deps.sh: warning: apt-get update reported errors (continuing):" >&2
  grep -E '^(E|W):' "$log" | head -5 | sed 's/^/  /' >&2 || true
fi

echo "deps.sh: apt-get install" >&2
if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install --no-install-recommends "${missing[@]}" \
     </dev/null >"$log" 2>&1; then
  echo "deps.sh: apt-get install failed. Last lines:" >&2
  tail -n 15 "$log" | sed 's/^/  /' >&2
  # Name the packages apt has no candidate for: the usual reason.
  for p in "${missing[@]}"; do
    cand=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: //p')
    if [[ -z $cand || $cand == "(none)" ]]; then
      echo "deps.sh: no installable candidate for '$p'" >&2
    fi
  done
  echo "deps.sh: without network, install these packages from local media (or build with a vendored tree:" \
       "README, \"Building without network\")" >&2
  die "could not install: ${missing[*]}"
fi

installed=$(dpkg-query -W -f='${Package}:${Architecture} ${db:Status-Status}\n' 2>/dev/null |
            awk '$2 == "installed" {print $1}')
still=()
for p in "${missing[@]}"; do
  is_installed "$p" || still+=("$p")
done
(( ${#still[@]} == 0 )) || die "still not installed after apt-get: ${still[*]}"
echo "deps.sh: done" >&2
