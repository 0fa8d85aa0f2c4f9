#!/usr/bin/env bash
# `make size [ARCH=...]`: where the bytes of the static binary go, by source
# folder, against the size budget and against the last recorded report.
#
#   tools/size-report.sh BINARY STRIPPED ARCH [BASELINE]
#
# BINARY is the linked (unstripped) build/<arch>/outpost, STRIPPED the copy
# that ships. Every sized symbol of BINARY that takes bytes in the file (nm,
# demangled; .bss takes none; an alias counts once) is counted toward
# the first outpost folder its name mentions (outpost::job::... -> job; a
# lambda or template instantiated for a folder's type counts there too), or
# toward libstdc++ (std::, __gnu_cxx, __cxxabiv1, typeinfo/vtables of
# library types), picojson, nanopb (pb_* and the generated descriptors) or
# libc (everything else). Bytes no symbol covers (string literals, unwind
# tables, ELF headers) are shown as "unattributed": with them the folders add
# up to the stripped file. Link-time optimisation inlines across folders; an
# inlined function counts where it was inlined.
#
# BASELINE (default tools/size-baseline.txt) holds "ARCH FOLDER BYTES" lines;
# each folder's delta is printed against it. `SIZE_RECORD=1` rewrites that
# architecture's lines with this report (commit it with the change that
# moved the figures).
#
# The budget (aarch64 <= 1.75 MiB with every plugin system, the gRPC
# transport and its users in; x86_64 reported) holds for the ARM builds; x86_64 code is about 15%
# larger than aarch64's for the same sources and is reported against it
# only ("OVER by N B, reported": exit 0).
#
# Prints, then exits 1 if the stripped binary is over the budget:
#   size: x86_64 build/outpost.stripped 1,481,864 B, budget 1,835,008 B (1.75 MiB): 353,144 B left
#   size: x86_64   job   61,234 B   (+1,024 since the baseline)
set -euo pipefail
bin="${1:?binary}"
stripped="${2:?stripped binary}"
arch="${3:?arch}"
baseline="${4:-$(dirname "$0")/size-baseline.txt}"
budget=$((7 * 256 * 1024))
nm_tool="${NM:-nm}"

[ -f "$bin" ] || { echo "size: $bin missing (build it first)" >&2; exit 2; }
[ -f "$stripped" ] || { echo "size: $stripped missing (build it first)" >&2; exit 2; }
total=$(stat -c %s "$stripped")

report=$("$nm_tool" -C --print-size "$bin" | awk -v total="$total" '
  function hex(h,   i, n) {
    n = 0
    h = tolower(h)
    for (i = 1; i <= length(h); i++) n = n * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
    return n
  }
  # Sized symbols that take bytes in the file (not .bss), each address once
  # (aliases such as __libc_start_main and __libc_start_main_impl).
  NF >= 4 && $2 ~ /^[0-9a-fA-F]+$/ && $3 !~ /^[UBbCc]$/ && !seen[$1]++ {
    size = hex($2)
    name = $4
    for (i = 5; i <= NF; i++) name = name " " $i
    folder = ""
    if (match(name, /outpost::[A-Za-z_]+/)) {
      ns = substr(name, RSTART + 9, RLENGTH - 9)
      if (ns ~ /^(agent|cgroup|cli|devices|driver|driverproto|hooks|job|keeper|logs|loop|net|nri|plugin|proc|sdk|task|wire)$/) folder = ns
      else if (ns ~ /^(Loop|LoopFd|PendingWrites)$/) folder = "loop"
      else folder = "base"
    } else if (name ~ /^outpost_v1_|^ttrpc_|^pluginregistration_/) {
      folder = "nanopb"
    } else if (name ~ /picojson/) {
      folder = "picojson"
    } else if (name ~ /^pb_/) {
      folder = "nanopb"
    } else if (name ~ /(^|[ <(])std::|__gnu_cxx|__cxxabiv1|^typeinfo|^vtable|^operator (new|delete)|^VTT/) {
      folder = "libstdc++"
    } else {
      folder = "libc"
    }
    bytes[folder] += size
    sum += size
  }
  END {
    for (f in bytes) printf "%s %d\n", f, bytes[f]
    printf "unattributed %d\n", total - sum
  }' | sort -k2,2nr)

if [ "${SIZE_RECORD:-0}" = 1 ]; then
  { [ -f "$baseline" ] && grep -v "^$arch " "$baseline" || true; sed "s/^/$arch /" <<<"$report"; } | sort -k1,1 -k3,3nr >"$baseline.tmp"
  mv "$baseline.tmp" "$baseline"
  echo "size: recorded $arch in $baseline"
fi

# 1234567 -> 1,234,567 (whatever the locale)
fmt() { sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta' <<<"$1"; }
left=$((budget - total))
held=1
[ "$arch" = x86_64 ] && held=0
if [ "$left" -ge 0 ]; then
  verdict="$(fmt "$left") B left"
elif [ "$held" = 1 ]; then
  verdict="OVER by $(fmt $((-left))) B"
else
  verdict="OVER by $(fmt $((-left))) B, reported (the budget holds for aarch64 and armhf)"
fi
echo "size: $arch $stripped $(fmt "$total") B, budget $(fmt "$budget") B (1.75 MiB): $verdict"
# The file holds the code segment, then the data segment at an offset that
# keeps their addresses congruent modulo the segment alignment (64 KiB on
# ARM); with RELRO, whose end ld aligns to that, code that grows past where
# the data begins moves the data, and the file, on by a whole step. Printed so that a change sees it coming.
# The executable LOAD and the one after it: "offset filesize align next-offset".
# (Nothing when readelf cannot read it: the line is left out.)
loads=$({ "${READELF:-readelf}" -lW "$stripped" 2>/dev/null || true; } | awk '
  $1 == "LOAD" && code != "" { print code, $2; exit }
  $1 == "LOAD" && / E / { code = $2 " " $5 " " $NF }')
read -r code_off code_size align data_off <<<"$loads"
if [ -n "${data_off:-}" ]; then
  room=$((data_off - code_off - code_size))
  if [ "$room" -lt 4096 ]; then
    # No RELRO padding (aarch64 links with -z norelro): the data follows
    # the code within a 4 KiB page, and the file grows with the code.
    echo "size: $arch the data follows the code: the file grows with the code (no step)"
  else
    echo "size: $arch code may grow by $(fmt "$room") B before the file grows by a step of up to $(fmt $((align))) B"
  fi
fi
while read -r folder bytes; do
  base=""
  if [ -f "$baseline" ]; then base=$(awk -v a="$arch" -v f="$folder" '$1 == a && $2 == f { print $3 }' "$baseline"); fi
  if [ -n "$base" ]; then
    d=$((bytes - base))
    delta="$( [ "$d" -ge 0 ] && echo "+$(fmt "$d")" || echo "-$(fmt $((-d)))") since the baseline"
  else
    delta="not in the baseline"
  fi
  printf "size: %-8s %-13s %10s B   (%s)\n" "$arch" "$folder" "$(fmt "$bytes")" "$delta"
done <<<"$report"
[ "$left" -ge 0 ] || [ "$held" = 0 ]
