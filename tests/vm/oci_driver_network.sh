#!/bin/sh
# vmtest: crun
# vmtest: net
# A bridge-mode job (docs/networking.md) with an oci task: the container
# joins the job's namespace pinned at /run/netns/outpost-JOB (by path,
# through the spec) and has the job's address on its interface.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
. "$(dirname "$0")/lib/net.sh"
. "$(dirname "$0")/lib/oci.sh"
oci_ready || skip "$OCI_WHY"
net_ready || skip "$NET_WHY"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"
oci_rootfs
trap 'outpost rm ocnet >/dev/null 2>&1; oci_driver_rm' EXIT
oci_driver_start

oci_job ocnet 'ip -o -4 addr show; echo ip=$OUTPOST_IP; exec sleep 600' '' '' '"network": {"mode": "bridge"}'
outpost run --detach -f /tmp/ocnet.json >/dev/null || fail "oci job not submitted"
wait_for 60 oci_logs_have ocnet/t ip= || fail "no output: $(outpost logs ocnet/t 2>&1; outpost events ocnet 2>&1 | tail -n 5)"
out=$(outpost logs ocnet/t)
ip=$(echo "$out" | sed -n 's/^ip=//p')
case "$ip" in 10.46.*) ;; *) fail "OUTPOST_IP is '$ip': $out" ;; esac
echo "$out" | grep -q "inet $ip/" || fail "the container lacks the job's address $ip: $out"
pid=$(tpid ocnet/t)
pin=/run/netns/outpost-ocnet
[ -e "$pin" ] || fail "no pin $pin"
[ "$(readlink "/proc/$pid/ns/net")" = "net:[$(stat -L -c %i "$pin")]" ] ||
  fail "container $pid in $(readlink "/proc/$pid/ns/net"), not in $pin"
[ "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/self/ns/net)" ] || fail "container in the node's namespace"
outpost rm ocnet >/dev/null || fail "rm failed"
[ ! -e "$pin" ] || fail "$pin left after rm"
wait_for 10 oci_nothing_left ocnet || fail "after rm: $(wait_output)"
echo "container $pid in the job's namespace $pin with $ip"
