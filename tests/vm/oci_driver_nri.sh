#!/bin/sh
# vmtest: crun
# vmtest-timeout: 120
# An NRI plugin (test_nri_plugin, as in nri_plugin.sh) adjusts an oci task
# with a bind mount and a device: the container sees the mount's file,
# read-only, and /dev/kmsg (char 1:11, not among crun's default devices:
# oci_driver.sh's container has none), which it may open (the device
# cgroup allows it: its line reaches the VM's kernel log). The config is put
# back and the agent restarted at the end.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
. "$(dirname "$0")/lib/oci.sh"
oci_ready || skip "$OCI_WHY"
PLUGIN=/usr/bin/test_nri_plugin
[ -x "$PLUGIN" ] || skip "no test_nri_plugin in the image (tools/vmtest --extra build/test_nri_plugin)"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"
oci_rootfs

restart_agent() {
  before=$(outpost_pids | tr '\n' ' ')
  for p in $before; do kill -9 "$p"; done
  respawned() { agent_init_pid "$before" >/dev/null && outpost status >/dev/null; }
  wait_for 30 respawned || fail "agent not respawned by init: $(wait_output)"
}
cp /etc/outpost/config.json /tmp/config.before-ocinri
cleanup() {
  outpost rm ocnri >/dev/null 2>&1
  if [ -f /opt/nri/plugins/10-ocinri ]; then
    rm -f /opt/nri/plugins/10-ocinri
    cp /tmp/config.before-ocinri /etc/outpost/config.json
    restart_agent
  fi
  oci_driver_rm
}
trap cleanup EXIT
# The driver first, with NRI off: the plugin adjusts every task, and the
# exec driver that runs the oci driver cannot apply mounts.
oci_driver_start

mkdir -p /tmp/ocinri-shared /opt/nri/plugins
echo from-nri-mount >/tmp/ocinri-shared/file
cat >/opt/nri/plugins/10-ocinri <<EOS
#!/bin/sh
exec $PLUGIN -events all -log /tmp/ocinri.log -adjust-mount /tmp/ocinri-shared:/nri-data:rbind,ro -adjust-device /dev/kmsg
EOS
chmod 0755 /opt/nri/plugins/10-ocinri
sed 's/}$/, "nri": {}}/' /tmp/config.before-ocinri >/etc/outpost/config.json
restart_agent
ready() { outpost nri | grep -q '^10-ocinri  launched ready'; }
wait_for 30 ready || fail "plugin not ready: $(outpost nri 2>&1 | tr '\n' ' ')"
wait_for 20 oci_registered || fail "driver not registered with the new agent: $(outpost plugins 2>&1)"

mark=oci-nri-kmsg-$(cut -c1-8 /proc/sys/kernel/random/uuid)
oci_job ocnri 'cat /nri-data/file; touch /nri-data/x 2>/dev/null || echo mount-ro; ls -l /dev/kmsg; echo '$mark' >/dev/kmsg && echo kmsg-written; echo done; exec sleep 600'
outpost run --detach -f /tmp/ocnri.json >/dev/null || fail "oci job not submitted"
wait_for 30 oci_logs_have ocnri/t done || fail "no output: $(outpost logs ocnri/t 2>&1; outpost events ocnri 2>&1 | tail -n 5)"
out=$(outpost logs ocnri/t)
echo "$out" | grep -qx from-nri-mount || fail "the NRI bind mount is not in the container: $out"
echo "$out" | grep -qx mount-ro || fail "the NRI bind mount is not read-only: $out"
echo "$out" | grep -q '^c.* 1, *11 .*/dev/kmsg$' || fail "no /dev/kmsg (char 1:11) in the container: $out"
echo "$out" | grep -qx kmsg-written || fail "the container could not open /dev/kmsg: $out $(outpost logs --stderr ocnri/t 2>&1)"
dmesg | grep -q "$mark" || fail "the container's line is not in the kernel log"
grep -q '^CreateContainer t ' /tmp/ocinri.log || fail "the plugin saw no CreateContainer: $(cut -d' ' -f1,2 /tmp/ocinri.log | tr '\n' ' ')"
echo "NRI bind mount (read-only) and device /dev/kmsg reached the container"
