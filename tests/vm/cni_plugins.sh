#!/bin/sh
# The CNI reference plugins work in the VM (what job networking needs; see
# tests/vm/lib/net.sh for what the VM has): a pinned network namespace gets
# the chain of outpost's built-in bridge network, run by hand as a runtime
# runs it (loopback, bridge with ipMasq and host-local IPAM, firewall with
# the iptables backend, portmap with snat, each given the one before's
# result as prevResult):
# - ADD: eth0 in the namespace has an address of the subnet, the bridge has
#   the gateway, iptables has the CNI chains (nat: masquerade and hostport
#   DNAT; filter: CNI-FORWARD);
# - a TCP connection to the gateway's port 8080 reaches `nc -l -p 80` in the
#   namespace through portmap's DNAT, both ways;
# - DEL in reverse order, each given the ADD's result: the rules of this
#   container, its address lease and its veth are gone; portmap's DEL
#   again succeeds (runtimes retry DEL).
# About 20 s of the VM's time on a loaded 2-core host (load 8): Go plugins
# and iptables under TCG; most of it is the plugins' ADD and DEL.
# vmtest: net
# vmtest-timeout: 120
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/net.sh"

net_ready || skip "$NET_WHY"

NS=cni-smoke
ID=vmtest-cni-smoke
BR=cni-vm0
SUBNET=10.88.7
IPAM=/run/vmtest/cni-ipam
cleanup() {
  [ -n "${SRV:-}" ] && kill "$SRV" 2>/dev/null
  netns_del "$NS"
}
trap cleanup EXIT

LO='{"type": "loopback"}'
BRIDGE='{"type": "bridge", "bridge": "'$BR'", "isGateway": true, "ipMasq": true, "hairpinMode": true, "ipam": {"type": "host-local", "ranges": [[{"subnet": "'$SUBNET'.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "'$IPAM'"}}'
FW='{"type": "firewall", "backend": "iptables"}'
PM='{"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}'
RC='"runtimeConfig": {"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}'

netns_add "$NS" || fail "cannot pin a network namespace at $NETNS_DIR/$NS"

# ---- ADD ----
add() {  # NAME CONF [EXTRA]: ADD, its result in /tmp/cni.NAME.out
  cni_run ADD "$2" "$NS" "$ID" eth0 "${3:-}" >"/tmp/cni.$1.out" ||
    fail "$1 ADD failed: $(tr '\n' ' ' <"$CNI_ERR") $(tr '\n' ' ' <"/tmp/cni.$1.out")"
}
add lo "$LO"
add bridge "$BRIDGE" "\"prevResult\": $(cat /tmp/cni.lo.out)"
add firewall "$FW" "\"prevResult\": $(cat /tmp/cni.bridge.out)"
add portmap "$PM" "\"prevResult\": $(cat /tmp/cni.firewall.out), $RC"
RESULT=$(cat /tmp/cni.portmap.out)

ip4=$(netns_exec "$NS" ip -4 addr show eth0 | sed -n 's/.*inet \([0-9.]*\)\/24.*/\1/p')
case $ip4 in
  "$SUBNET".*) ;;
  *) fail "eth0 in the namespace has no address in $SUBNET.0/24: $(netns_exec "$NS" ip addr show eth0 | tr '\n' ' ')" ;;
esac
printf '%s' "$RESULT" | grep -q "\"$ip4/24\"" || fail "the chain's result does not name $ip4: $(printf '%s' "$RESULT" | tr '\n' ' ')"
ip -4 addr show "$BR" | grep -q "inet $SUBNET.1/24" || fail "bridge $BR has no gateway $SUBNET.1: $(ip addr show "$BR" 2>&1 | tr '\n' ' ')"
netns_exec "$NS" ip link show lo | grep -q 'UP' || fail "lo is not up in the namespace"
netns_exec "$NS" ip route | grep -q "default via $SUBNET.1" || fail "no default route via $SUBNET.1: $(netns_exec "$NS" ip route | tr '\n' ' ')"
[ -f "$IPAM/$NET_NAME/$ip4" ] || fail "host-local has no lease file $IPAM/$NET_NAME/$ip4"

iptables -w -t nat -S >/tmp/cni.nat 2>&1 || fail "iptables -t nat -S: $(cat /tmp/cni.nat)"
iptables -w -t filter -S >/tmp/cni.filter 2>&1 || fail "iptables -t filter -S: $(cat /tmp/cni.filter)"
for c in CNI-HOSTPORT-DNAT CNI-HOSTPORT-MASQ CNI-HOSTPORT-SETMARK; do
  grep -q -- "^-N $c\$" /tmp/cni.nat || fail "no nat chain $c: $(tr '\n' ' ' </tmp/cni.nat | cut -c1-400)"
done
grep -q -- "-A POSTROUTING -s $ip4/32 .*-j CNI-" /tmp/cni.nat || fail "no ipMasq rule for $ip4 in nat POSTROUTING: $(tr '\n' ' ' </tmp/cni.nat | cut -c1-400)"
grep -q -- "--dport 8080 .*-j DNAT --to-destination $ip4:80" /tmp/cni.nat || fail "no DNAT 8080 -> $ip4:80: $(tr '\n' ' ' </tmp/cni.nat | cut -c1-600)"
grep -q -- "^-N CNI-FORWARD\$" /tmp/cni.filter || fail "no filter chain CNI-FORWARD: $(tr '\n' ' ' </tmp/cni.filter | cut -c1-400)"
grep -q -- "-d $ip4/32 .*-j ACCEPT" /tmp/cni.filter || fail "firewall let nothing in to $ip4: $(tr '\n' ' ' </tmp/cni.filter | cut -c1-400)"
echo "ADD: eth0 $ip4, gateway $SUBNET.1 on $BR; nat: $(grep -c . /tmp/cni.nat) rules/chains, filter: $(grep -c . /tmp/cni.filter)"

# ---- TCP through the port mapping ----
# The server answers one connection with "pong" and keeps what it got. Port
# 8080 on the gateway (a local address: portmap DNATs it in nat OUTPUT)
# reaches port 80 in the namespace.
rm -f /tmp/cni.srv.got
printf 'pong\n' | netns_exec "$NS" nc -l -p 80 >/tmp/cni.srv.got 2>/tmp/cni.srv.err &
SRV=$!
listening() { netns_exec "$NS" netstat -tln | grep -q ':80 '; }
wait_for 10 listening || fail "nc -l -p 80 does not listen in the namespace: $(cat /tmp/cni.srv.err)"
got=$(printf 'ping\n' | timeout 10 nc -w 5 "$SUBNET.1" 8080 2>/tmp/cni.cli.err) ||
  true
[ "$got" = pong ] || fail "connecting to $SUBNET.1:8080 got '$got' instead of pong ($(cat /tmp/cni.cli.err))"
wait_for 5 grep -q ping /tmp/cni.srv.got || fail "the server in the namespace did not get ping: '$(cat /tmp/cni.srv.got)'"
wait "$SRV" 2>/dev/null
SRV=
echo "TCP: $SUBNET.1:8080 -> $ip4:80 both ways"
# For the record (not checked): 127.0.0.1:8080, which portmap's snat (with
# route_localnet on the bridge) is meant to allow.
printf 'pong\n' | netns_exec "$NS" nc -l -p 80 >/tmp/cni.srv.got 2>/tmp/cni.srv.err &
SRV=$!
wait_for 10 listening || fail "nc -l -p 80 does not listen in the namespace again: $(cat /tmp/cni.srv.err)"
got=$(printf 'ping\n' | timeout 10 nc -w 5 127.0.0.1 8080 2>&1) || true
if [ "$got" = pong ]; then echo "TCP: 127.0.0.1:8080 -> $ip4:80 works too"
else echo "TCP: 127.0.0.1:8080 -> $ip4:80 does not work: '$got'"; fi
kill "$SRV" 2>/dev/null
wait "$SRV" 2>/dev/null
SRV=
echo "nat table after ADD:"
sed 's/^/  /' /tmp/cni.nat

# ---- DEL, in reverse, each with the ADD's result ----
del() {  # NAME CONF [EXTRA]
  cni_run DEL "$2" "$NS" "$ID" eth0 "\"prevResult\": $RESULT${3:+, $3}" >/dev/null ||
    fail "$1 DEL failed: $(tr '\n' ' ' <"$CNI_ERR")"
}
del portmap "$PM" "$RC"
del firewall "$FW"
del bridge "$BRIDGE"
del lo "$LO"

iptables -w -t nat -S >/tmp/cni.nat 2>&1 || fail "iptables -t nat -S: $(cat /tmp/cni.nat)"
iptables -w -t filter -S >/tmp/cni.filter 2>&1 || fail "iptables -t filter -S: $(cat /tmp/cni.filter)"
grep -q -- "$ip4" /tmp/cni.nat && fail "nat rules for $ip4 left after DEL: $(grep -- "$ip4" /tmp/cni.nat | tr '\n' ' ')"
grep -q -- "$ip4" /tmp/cni.filter && fail "filter rules for $ip4 left after DEL: $(grep -- "$ip4" /tmp/cni.filter | tr '\n' ' ')"
grep -q -- "CNI-DN-" /tmp/cni.nat && fail "a hostport chain left after DEL: $(grep -- CNI-DN- /tmp/cni.nat | tr '\n' ' ')"
[ -f "$IPAM/$NET_NAME/$ip4" ] && fail "host-local kept the lease $ip4 after DEL"
netns_exec "$NS" ip link show eth0 >/dev/null 2>&1 && fail "eth0 still in the namespace after DEL"
# A second DEL must succeed too (runtimes retry): portmap's, which looks
# for chains that are gone now.
del portmap "$PM" "$RC"
echo "DEL: rules, lease and eth0 gone; a second portmap DEL succeeds"
