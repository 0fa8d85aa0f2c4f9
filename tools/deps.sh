#!/bin/bash
# Installs every build and test dependency of outpost from Debian's archive.
#
# Called by `make deps`, `make test` and `make run`. Idempotent and silent
# when everything is already installed: it asks dpkg first and only runs
# apt-get (update + install, quietly, non-interactive) for what is missing.
# Works unattended (CI=true, no stdin). Exits non-zero with a message naming
# the packages that could not be installed.
#
# Usage: tools/deps.sh [--check]   (--check: list missing packages, exit 1 if any)

set -euo pipefail

# Package names; "name:arch" for foreign-architecture (multiarch) packages.
PACKAGES=(
  # toolchain
  build-essential g++ make file
  g++-aarch64-linux-gnu g++-arm-linux-gnueabihf
  # libFuzzer (clang), its runtime, and llvm-symbolizer for sanitizer traces
  clang libclang-rt-14-dev llvm
  # nanopb: runtime library + headers for every target, generator and what
  # the generator runs (python3-protobuf, protoc)
  nanopb libnanopb-dev libnanopb-dev:arm64 libnanopb-dev:armhf
  python3 python3-protobuf python3-pkg-resources protobuf-compiler
  # picojson (header only), googletest (sources in /usr/src/googletest)
  picojson-dev googletest
  # integration tests
  iproute2 util-linux procps
  # VM tests: emulators, initramfs tools, busybox for the guest
  qemu-system-x86 qemu-system-arm qemu-user-static
  busybox-static cpio gzip
)
FOREIGN_ARCHES=(arm64 armhf)

CHECK_ONLY=0
if [[ ${1:-} == --check ]]; then CHECK_ONLY=1; fi

die() { echo "deps.sh: $*" >&2; exit 1; }

command -v dpkg-query >/dev/null || die "this script needs a Debian-based system (dpkg-query not found)"

NATIVE_ARCH=$(dpkg --print-architecture)

# is_installed NAME[:ARCH]: true if dpkg has the package fully installed.
# An unqualified name means the native architecture or "all".
is_installed() {
  local pkg=$1 name arch line
  if [[ $pkg == *:* ]]; then
    name=${pkg%%:*} arch=${pkg#*:}
  else
    name=$pkg arch=
  fi
  while read -r line; do
    local a=${line%% *} s=${line#* }
    if [[ $s == installed ]]; then
      if [[ -z $arch && ( $a == "$NATIVE_ARCH" || $a == all ) ]] || [[ $a == "$arch" ]]; then
        return 0
      fi
    fi
  done < <(dpkg-query -W -f='${Architecture} ${db:Status-Status}\n' "$name" 2>/dev/null || true)
  return 1
}

missing_arches=()
foreign=" $(dpkg --print-foreign-architectures | tr '\n' ' ') "
for a in "${FOREIGN_ARCHES[@]}"; do
  [[ $a == "$NATIVE_ARCH" || $foreign == *" $a "* ]] || missing_arches+=("$a")
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
for a in "${missing_arches[@]}"; do what+=("(architecture $a)"); done
echo "deps.sh: installing: ${what[*]}" >&2

log=$(mktemp /tmp/outpost-deps.XXXXXX)
trap 'rm -f "$log"' EXIT

for a in "${missing_arches[@]}"; do
  "${SUDO[@]}" dpkg --add-architecture "$a" || die "dpkg --add-architecture $a failed"
done

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-q -y -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=300
          -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

# A partial index failure (seen here: "Mirror sync in progress" for one
# architecture) makes apt-get update exit non-zero although the lists it
# needs are fine, so its status is not fatal: the install below decides.
if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" update </dev/null >"$log" 2>&1; then
  echo "deps.sh: warning: apt-get update reported errors (continuing):" >&2
  grep -E '^(E|W):' "$log" | head -5 | sed 's/^/  /' >&2 || true
fi

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
  die "could not install: ${missing[*]}"
fi

still=()
for p in "${missing[@]}"; do
  is_installed "$p" || still+=("$p")
done
(( ${#still[@]} == 0 )) || die "still not installed after apt-get: ${still[*]}"
echo "deps.sh: done" >&2
