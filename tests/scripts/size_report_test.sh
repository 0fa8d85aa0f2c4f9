#!/usr/bin/env bash
# Tests tools/size-report.sh with a fake nm (a known symbol table) and fake
# binaries of known sizes. Prints "ok NAME" or "not ok NAME - why" per case;
# exits 1 if any case failed.
set -u
cd "$(dirname "$0")/../.."
REPORT="$PWD/tools/size-report.sh"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0

ok() { echo "ok $1"; }
not_ok() { echo "not ok $1 - $2"; FAILED=1; }
expect_line() {  # NAME PATTERN: OUT has a line matching PATTERN (grep -E)
  if grep -qE -- "$2" <<<"$OUT"; then ok "$1"; else not_ok "$1" "no line matching '$2' in: $OUT"; fi
}

# nm -C --print-size output: address, size, type, demangled name.
cat >"$TMP/nm" <<'EOF'
#!/bin/sh
cat <<'SYMS'
0000000000401000 0000000000000100 T outpost::job::JobManager::Apply(outpost::job::JobSpec)
0000000000401000 0000000000000100 T outpost::job::JobManager::Apply(outpost::job::JobSpec) [clone alias]
0000000000401100 0000000000000040 t std::_Function_handler<void (), outpost::task::TaskManager::Start()::{lambda()#1}>::_M_invoke(std::_Any_data const&)
0000000000401140 0000000000000020 T outpost::Loop::Run()
0000000000401160 0000000000000010 T outpost::Format(char const*, ...)
0000000000700000 0000000000000004 T outpost::plugin::Registry::Types() const
0000000000401170 0000000000000030 T std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_mutate(unsigned long, unsigned long, char const*, unsigned long)
00000000004011a0 0000000000000008 T pb_decode
00000000004011a8 0000000000000008 R outpost_v1_TaskSpec_msg
00000000004011b0 0000000000000018 W picojson::value::~value()
00000000004011c8 0000000000000200 T memcpy
0000000000600000 0000000000004000 B __pthread_keys
                 U some_undefined
SYMS
EOF
chmod +x "$TMP/nm"
touch "$TMP/outpost"
head -c 4096 /dev/zero >"$TMP/small"  # the "stripped" file: 4,096 bytes

OUT=$(NM="$TMP/nm" "$REPORT" "$TMP/outpost" "$TMP/small" testarch "$TMP/none.txt" 2>&1)
RC=$?
[ $RC -eq 0 ] && ok "under the budget exits 0" || not_ok "under the budget exits 0" "exit $RC: $OUT"
expect_line "header names arch, size and what is left" '^size: testarch .*/small 4,096 B, budget 1,835,008 B \(1\.75 MiB\): 1,830,912 B left$'
expect_line "an alias counts once" '^size: testarch +job +256 B'
expect_line "a lambda counts in the folder it was made in" '^size: testarch +task +64 B'
expect_line "outpost::Loop is loop/" '^size: testarch +loop +32 B'
expect_line "other outpost:: names are base/" '^size: testarch +base +16 B'
expect_line "outpost::plugin is plugin/" '^size: testarch +plugin +4 B'
expect_line "std:: is libstdc++" '^size: testarch +libstdc\+\+ +48 B'
expect_line "pb_ and generated descriptors are nanopb" '^size: testarch +nanopb +16 B'
expect_line "picojson" '^size: testarch +picojson +24 B'
expect_line "the rest is libc" '^size: testarch +libc +512 B'
# 4096 - (256+64+32+16+4+48+16+24+512) = 3124; .bss and undefined symbols take no bytes.
expect_line "the rest of the file is unattributed" '^size: testarch +unattributed +3,124 B'
expect_line "no baseline yet" 'not in the baseline'

OUT=$(SIZE_RECORD=1 NM="$TMP/nm" "$REPORT" "$TMP/outpost" "$TMP/small" testarch "$TMP/base.txt" 2>&1)
if grep -qx "testarch job 256" "$TMP/base.txt"; then ok "SIZE_RECORD writes the baseline"; else not_ok "SIZE_RECORD writes the baseline" "$(cat "$TMP/base.txt")"; fi
echo "otherarch job 999" >>"$TMP/base.txt"
sed -i 's/^testarch job 256$/testarch job 200/' "$TMP/base.txt"
OUT=$(NM="$TMP/nm" "$REPORT" "$TMP/outpost" "$TMP/small" testarch "$TMP/base.txt" 2>&1)
expect_line "delta against the baseline" '^size: testarch +job +256 B +\(\+56 since the baseline\)'
OUT=$(SIZE_RECORD=1 NM="$TMP/nm" "$REPORT" "$TMP/outpost" "$TMP/small" testarch "$TMP/base.txt" 2>&1)
if grep -qx "otherarch job 999" "$TMP/base.txt"; then ok "recording keeps the other arches"; else not_ok "recording keeps the other arches" "$(cat "$TMP/base.txt")"; fi

truncate -s $((7 * 256 * 1024 + 10)) "$TMP/big"
OUT=$(NM="$TMP/nm" "$REPORT" "$TMP/outpost" "$TMP/big" testarch "$TMP/none.txt" 2>&1)
RC=$?
[ $RC -eq 1 ] && ok "over the budget exits 1" || not_ok "over the budget exits 1" "exit $RC"
expect_line "over the budget says by how much" 'OVER by 10 B$'

OUT=$(NM="$TMP/nm" "$REPORT" "$TMP/outpost" "$TMP/big" x86_64 "$TMP/none.txt" 2>&1)
RC=$?
[ $RC -eq 0 ] && ok "x86_64 over the budget is reported, exit 0" || not_ok "x86_64 over the budget is reported, exit 0" "exit $RC"
expect_line "x86_64 over the budget says it is reported" 'OVER by 10 B, reported \(the budget holds for aarch64 and armhf\)$'

# The room before the file steps up: the executable LOAD's end against the
# offset of the LOAD after it (readelf -lW of an aarch64 binary).
cat >"$TMP/readelf" <<'EOF'
#!/bin/sh
cat <<'PH'
Program Headers:
  Type           Offset   VirtAddr           PhysAddr           FileSiz  MemSiz   Flg Align
  LOAD           0x000000 0x0000000000400000 0x0000000000400000 0x16b358 0x16b358 R E 0x10000
  LOAD           0x16c390 0x000000000057c390 0x000000000057c390 0x005cd0 0x00bf08 RW  0x10000
  NOTE           0x000190 0x0000000000400190 0x0000000000400190 0x000044 0x000044 R   0x4
PH
EOF
chmod +x "$TMP/readelf"
OUT=$(NM="$TMP/nm" READELF="$TMP/readelf" "$REPORT" "$TMP/outpost" "$TMP/small" testarch "$TMP/none.txt" 2>&1)
# 0x16c390 - 0x16b358 = 4,152
expect_line "the room before the next step" '^size: testarch code may grow by 4,152 B before the file grows by a step of up to 65,536 B$'
OUT=$(NM="$TMP/nm" READELF=false "$REPORT" "$TMP/outpost" "$TMP/small" testarch "$TMP/none.txt" 2>&1)
RC=$?
if [ $RC -eq 0 ] && ! grep -q "may grow" <<<"$OUT"; then ok "no room line when readelf cannot read the file"
else not_ok "no room line when readelf cannot read the file" "exit $RC: $OUT"; fi

OUT=$(NM="$TMP/nm" "$REPORT" "$TMP/missing" "$TMP/small" testarch 2>&1)
RC=$?
[ $RC -eq 2 ] && grep -q "missing" <<<"$OUT" && ok "a missing binary is named" || not_ok "a missing binary is named" "exit $RC: $OUT"

exit $FAILED
