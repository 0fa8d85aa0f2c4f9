# Network helpers of the VM tests (busybox ash), sourced after common.sh.
#
# What the VM has for network tests (tools/vmtest puts it in, x86_64 only,
# when the host has it; else /etc/vmtest/no-net says why):
#   /usr/lib/cni/{loopback,bridge,host-local,firewall,portmap,ptp}  Debian's
#       CNI reference plugins (dynamically linked: the loader and libc are in
#       /lib64, /lib/x86_64-linux-gnu as on Debian)
#   /usr/sbin/iptables, ip6tables (-save, -restore) -> xtables-nft-multi,
#       iptables-legacy -> xtables-legacy-multi, the xtables extensions
#   kernel modules (veth, bridge, nf_tables + nft_compat, ip_tables, the xt_
#       matches and targets, nf_nat, nf_conntrack), not loaded at boot: the
#       VM has no modules.dep, so the kernel cannot load them on demand;
#       net_ready loads them all (lib/modules/<kver>/vmtest-net.load)
#   busybox: ip (no `ip netns`), unshare, nsenter, nc (-l -p PORT; one
#       connection), no network device but lo (QEMU runs with -nic none)
# A test of job networking has a line "# vmtest: net" (tools/vmtest copies
# all this only into a run with such a test) and starts with
#   . "$(dirname "$0")/lib/net.sh"
#   net_ready || skip "$NET_WHY"
# and may then use netns_add/netns_del and cni_run (below) or let the agent
# run the plugins (CNI_PATH is /usr/lib/cni; /etc/cni/net.d exists, empty).

CNI_PATH=/usr/lib/cni
NETNS_DIR=/run/netns
NET_WHY=

# net_ready: the network tools are there and their modules loaded (once per
# boot; later calls are cheap). Else returns 1 with the reason in $NET_WHY.
net_ready() {
  if [ -s /etc/vmtest/no-net ]; then
    NET_WHY="no network tools in the VM: $(cat /etc/vmtest/no-net)"
    return 1
  fi
  for _p in loopback bridge host-local firewall portmap; do
    [ -x "$CNI_PATH/$_p" ] || { NET_WHY="$CNI_PATH/$_p missing in the VM"; return 1; }
  done
  [ -f /run/vmtest/net-modules ] && return 0
  _mods=/lib/modules/$(uname -r)
  [ -s "$_mods/vmtest-net.load" ] || { NET_WHY="no $_mods/vmtest-net.load in the initramfs"; return 1; }
  for _m in $(cat "$_mods/vmtest-net.load"); do
    # "File exists": built in or loaded already.
    _err=$(insmod "$_mods/$_m.ko" 2>&1) || case $_err in
      *exists*) ;;
      *) NET_WHY="insmod $_m: $_err"; return 1 ;;
    esac
  done
  _err=$(iptables -w -t nat -S 2>&1) || { NET_WHY="iptables does not work in the VM: $_err"; return 1; }
  : >/run/vmtest/net-modules
}

# netns_add NAME: a new network namespace pinned at $NETNS_DIR/NAME (as
# `ip netns add` does; busybox ip has no netns), loopback up.
netns_add() {
  mkdir -p "$NETNS_DIR"
  : >"$NETNS_DIR/$1" || return 1
  unshare --net="$NETNS_DIR/$1" ip link set lo up
}
# netns_del NAME: unpins (the namespace goes once nothing uses it).
netns_del() {
  umount "$NETNS_DIR/$1" 2>/dev/null
  rm -f "$NETNS_DIR/$1"
}
# netns_exec NAME CMD...: CMD inside the namespace.
netns_exec() {
  _ns=$1; shift
  nsenter --net="$NETNS_DIR/$_ns" "$@"
}

# cni_run COMMAND CONF NETNS CONTAINERID IFNAME [EXTRA]: runs one plugin as a
# runtime does, in the namespace $NETNS_DIR/NETNS. CONF is the plugin's
# object from a conflist, on one line ending in "}" (its first "type" names
# the binary: write it before "ipam"); "name" and "cniVersion" ($NET_NAME,
# $NET_VERSION: "vmtest", "0.4.0") are added, and EXTRA (e.g.
# '"prevResult": {...}, "runtimeConfig": {...}'). The plugin's stdout goes
# to stdout, its stderr to $CNI_ERR (its stdin is kept in
# /tmp/cni.TYPE.COMMAND.in); the plugin's exit status is returned.
NET_NAME=vmtest
NET_VERSION=0.4.0
CNI_ERR=/tmp/cni.err
cni_run() {
  _cmd=$1 _conf=$2 _ns=$3 _id=$4 _if=$5 _extra=${6:-}
  _type=$(printf '%s' "$_conf" | grep -o '"type" *: *"[^"]*"' | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/')
  [ -n "$_type" ] || { echo "cni_run: no \"type\" in $_conf" >"$CNI_ERR"; return 1; }
  _stdin="${_conf%\}}, \"name\": \"$NET_NAME\", \"cniVersion\": \"$NET_VERSION\"${_extra:+, $_extra}}"
  printf '%s\n' "$_stdin" >"/tmp/cni.$_type.$_cmd.in"
  # (CNI_PATH=$CNI_PATH: the plugin's environment gets the shell variable)
  # shellcheck disable=SC2097,SC2098
  printf '%s\n' "$_stdin" |
    CNI_COMMAND=$_cmd CNI_CONTAINERID=$_id CNI_NETNS=$NETNS_DIR/$_ns CNI_IFNAME=$_if \
    CNI_PATH=$CNI_PATH "$CNI_PATH/$_type" 2>"$CNI_ERR"
}
