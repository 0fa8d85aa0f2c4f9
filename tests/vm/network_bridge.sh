#!/bin/sh
# vmtest: net
# A bridge-mode job with a port mapping under busybox init, as on a board
# (docs/networking.md): the agent started by init runs the CNI reference
# plugins and iptables; the job's task (test helper `serve tcp 80`) answers
# on the node's port 8080 through the bridge's gateway address, sees
# OUTPOST_IP, runs in the namespace pinned at /run/netns/outpost-web; after
# `outpost rm` no pin, veth, per-job iptables rule or cache entry is left.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
. "$(dirname "$0")/lib/net.sh"
net_ready || skip "$NET_WHY"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

submit web '{"id": "web", "network": {"mode": "bridge", "ports": [{"label": "http", "static": 8080, "to": 80}]},
  "tasks": [{"name": "s", "command": "'$HELPER'", "args": ["serve", "tcp", "80", "hello-vm"]}]}' >/dev/null
wait_for 60 state_is web/s running || fail "task not running: $(wait_output) $(outpost inspect web/s 2>&1)"
pid=$(tpid web/s)
ip=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^OUTPOST_IP=//p')
case "$ip" in 10.46.*) ;; *) fail "OUTPOST_IP is '$ip'" ;; esac
pin=/run/netns/outpost-web
[ "$(readlink "/proc/$pid/ns/net")" = "net:[$(stat -L -c %i "$pin")]" ] || fail "task not in $pin"
answers() { "$HELPER" connect tcp 10.46.0.1 8080 >/tmp/nb.out 2>&1 && grep -q hello-vm /tmp/nb.out; }
wait_for 20 answers || fail "no answer on the mapped port: $(cat /tmp/nb.out)"
iptables-save | grep -q 'outpost-web' || fail "no per-job rule while the job runs"
outpost events web 2>&1 | grep -q 'network bridge ready' || fail "no ready event: $(outpost events web 2>&1)"
outpost rm web >/dev/null || fail "rm failed"
[ ! -e "$pin" ] || fail "$pin left after rm"
! iptables-save | grep -q 'outpost-web' || fail "rules left: $(iptables-save | grep outpost-web)"
! ip -o link show | grep -q veth || fail "veth left: $(ip -o link show)"
[ -z "$(ls /run/outpost/cni/results 2>/dev/null)" ] || fail "cache left: $(ls /run/outpost/cni/results)"
echo "bridge job $ip answered on 8080; nothing left after rm"
