#!/bin/sh
# vmtest: power-cycle
# Harness self-test: the state disk survives a power cut. Boot 1 writes a
# random file to /var/lib/outpost (synced), boot 2 finds it intact in a new
# boot (other boot id).
. "$(dirname "$0")/lib/common.sh"

state_disk_ok
D=$(pc_dir)

if [ "$VMTEST_BOOT" = 1 ]; then
  rm -rf "$D"
  mkdir -p "$D" || fail "cannot create $D"
  head -c 4096 /dev/urandom >"$D/random" || fail "cannot write $D/random"
  md5sum <"$D/random" | cut -d' ' -f1 >"$D/random.md5"
  boot_id >"$D/boot_id"
  sync
  echo "wrote $D/random, md5 $(cat "$D/random.md5"), boot id $(cat "$D/boot_id")"
  power_cycle
fi

[ -f "$D/random" ] || fail "$D/random lost in the power cut ($(ls -la "$D" 2>&1 | tr '\n' ' '))"
[ -s "$D/random.md5" ] && [ -s "$D/boot_id" ] || fail "$D/random.md5 or boot_id lost in the power cut"
sum=$(md5sum <"$D/random" | cut -d' ' -f1)
[ "$sum" = "$(cat "$D/random.md5")" ] || fail "$D/random changed in the power cut: md5 $sum, boot 1 wrote $(cat "$D/random.md5")"
[ "$(boot_id)" != "$(cat "$D/boot_id")" ] || fail "same boot id $(boot_id) as boot 1: the VM did not reboot"
echo "$D/random intact (md5 $sum); boot id $(cat "$D/boot_id") -> $(boot_id)"
rm -rf "$D"
