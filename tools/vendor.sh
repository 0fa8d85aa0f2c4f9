#!/bin/bash
# Copies the nanopb and picojson files the build uses from the installed
# Debian packages into third_party/, so that a machine without those packages
# (air-gapped) can build with `make` alone. The Makefile uses third_party/
# instead of the system copies as soon as third_party/nanopb/include/pb.h and
# third_party/picojson/picojson.h exist.
#
# Layout written (everything but third_party/README.md is ignored by git):
#   third_party/nanopb/include/pb*.h               headers (the same for every arch)
#   third_party/nanopb/lib/<triplet>/libprotobuf-nanopb.a   one per installed arch
#   third_party/nanopb/generator/nanopb_generator.py        + proto/ beside it
#   third_party/nanopb/copyright, third_party/picojson/copyright
#   third_party/picojson/picojson.h
#   third_party/VENDORED                            package versions copied
#
# Usage: tools/vendor.sh          vendor from the installed packages
#        tools/vendor.sh --clean  remove everything vendored (keeps README.md)

set -euo pipefail
cd "$(dirname "$0")/.."

TP=third_party
die() { echo "vendor.sh: $*" >&2; exit 1; }

clean() {
  rm -rf "$TP/nanopb" "$TP/picojson" "$TP/VENDORED"
}

if [[ ${1:-} == --clean ]]; then
  clean
  exit 0
fi
[[ $# -eq 0 ]] || die "usage: tools/vendor.sh [--clean]"

version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }

for p in libnanopb-dev nanopb picojson-dev; do
  dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed ||
    die "package $p is not installed (run tools/deps.sh)"
done

HEADERS=(pb.h pb_common.h pb_encode.h pb_decode.h)
for h in "${HEADERS[@]}" picojson.h; do
  [[ -f /usr/include/$h ]] || die "/usr/include/$h missing"
done
[[ -f /usr/bin/nanopb_generator.py ]] || die "/usr/bin/nanopb_generator.py missing"
GEN_PKG=/usr/lib/python3/dist-packages/proto
[[ -f $GEN_PKG/nanopb_pb2.py ]] || die "$GEN_PKG (nanopb generator package) missing"

clean
mkdir -p "$TP/nanopb/include" "$TP/nanopb/generator" "$TP/picojson"

for h in "${HEADERS[@]}"; do
  cp /usr/include/"$h" "$TP/nanopb/include/"
done

# One static library per architecture whose libnanopb-dev is installed. The
# directory is the multiarch triplet, which is what the Makefile's TRIPLET is.
libs=()
while read -r arch status; do
  [[ $status == installed ]] || continue
  lib=$(dpkg-query -L "libnanopb-dev:$arch" | grep '/libprotobuf-nanopb\.a$' | head -n1)
  [[ -n $lib && -f $lib ]] || die "libnanopb-dev:$arch has no libprotobuf-nanopb.a"
  triplet=$(basename "$(dirname "$lib")")
  mkdir -p "$TP/nanopb/lib/$triplet"
  cp "$lib" "$TP/nanopb/lib/$triplet/"
  libs+=("$triplet")
done < <(dpkg-query -W -f='${Architecture} ${db:Status-Status}\n' libnanopb-dev)
(( ${#libs[@]} )) || die "no libprotobuf-nanopb.a found"

# The Debian script, run as a file (no __package__), does `import proto`
# from sys.path[0], its own directory: so proto/ goes right beside it.
cp /usr/bin/nanopb_generator.py "$TP/nanopb/generator/"
cp -r "$GEN_PKG" "$TP/nanopb/generator/proto"
find "$TP/nanopb/generator" -name __pycache__ -prune -exec rm -rf {} +

cp /usr/include/picojson.h "$TP/picojson/"
cp /usr/share/doc/libnanopb-dev/copyright "$TP/nanopb/copyright"
cp /usr/share/doc/picojson-dev/copyright "$TP/picojson/copyright"

{
  echo "# written by tools/vendor.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "libnanopb-dev $(version libnanopb-dev:"$(dpkg --print-architecture)") (lib: ${libs[*]})"
  echo "nanopb $(version nanopb)"
  echo "picojson-dev $(version picojson-dev)"
} > "$TP/VENDORED"

# The generator still runs protoc and Python's protobuf module; say so if the
# vendored copy cannot run here.
if ! /usr/bin/python3 "$TP/nanopb/generator/nanopb_generator.py" --version >/dev/null 2>&1; then
  echo "vendor.sh: warning: the vendored generator does not run here" \
       "(it needs python3-protobuf and protoc)" >&2
fi

echo "vendor.sh: vendored nanopb $(version nanopb) (${libs[*]}), picojson $(version picojson-dev) into $TP/"
