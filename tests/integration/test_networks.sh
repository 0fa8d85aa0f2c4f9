# Job networks through the real CNI reference plugins (Debian's
# containernetworking-plugins, /usr/lib/cni) and iptables (docs/networking.md).
#
# Nothing here touches the host's network: every test makes a private
# network + mount namespace ("the node", held by a sleeping process) and runs
# the agent in it; the job namespaces the agent pins, the bridge, the veths
# and the iptables rules all live inside it and go with it. A second private
# namespace ("outside"), joined to the node by a veth pair, plays another
# machine reaching the node's address. Helpers are prefixed nt_.

# nsx CMD...: runs CMD in the node's namespaces.
nsx() { nsenter -t "$NT_NODE" -n -m -r -w -- "$@"; }
nt_outside() { nsenter -t "$NT_OUTSIDE" -n -- "$@"; }
nt_in_own_netns() { [ "$(readlink "/proc/$1/ns/net")" != "$(readlink /proc/self/ns/net)" ]; }

# nt_node [EXTRA_CONFIG]: the node's namespaces with loopback up and an
# address 10.99.0.1/24 on a veth to the outside namespace (10.99.0.2), and
# the agent in them, its CNI search path $T/cni-bin then /usr/lib/cni.
nt_node() {
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/portmap ] ||
    fail "the CNI reference plugins are not in /usr/lib/cni: install containernetworking-plugins (tools/deps.sh test)"
  command -v iptables >/dev/null || fail "iptables is missing: install it (tools/deps.sh test)"
  mkdir -p "$T/cni.d" "$T/cni-bin" "$T/jobs.d"
  unshare -n -m --propagation private sleep 100000 &
  NT_NODE=$!
  unshare -n sleep 100000 &
  NT_OUTSIDE=$!
  echo "$NT_NODE $NT_OUTSIDE" >>"$T/.pids"
  wait_for 5 nt_in_own_netns "$NT_NODE" >/dev/null || fail "no private namespace for the node"
  wait_for 5 nt_in_own_netns "$NT_OUTSIDE" >/dev/null || fail "no private namespace for the outside"
  nsx ip link set lo up || fail "lo up"
  nsx ip link add ext0 type veth peer name ext1 || fail "veth to the outside"
  nsx ip link set ext1 netns "$NT_OUTSIDE" || fail "move ext1"
  nsx ip addr add 10.99.0.1/24 dev ext0 && nsx ip link set ext0 up || fail "node address"
  nt_outside ip link set lo up && nt_outside ip addr add 10.99.0.2/24 dev ext1 && nt_outside ip link set ext1 up ||
    fail "outside address"
  write_config "\"cni_path\": [\"$T/cni-bin\", \"/usr/lib/cni\"], \"cni_timeout\": \"${NT_TIMEOUT:-20s}\"${1:+, $1}"
  nt_start_agent
}

# nt_start_agent: (again) starts the agent in the node's namespaces.
nt_start_agent() {
  nsenter -t "$NT_NODE" -n -m -r -w -- "$OUTPOST" agent --config "$T/config.json" >>"$T/agent.log" 2>&1 &
  AGENT_PID=$!
  echo "$AGENT_PID" >>"$T/.pids"
  wait_for 10 op status >/dev/null || fail "agent did not answer status within 10s: $(tail -n 5 "$T/agent.log")"
}

# nt_job ID NETWORK_JSON TASK_JSON...: a job document with a network.
nt_job() {
  local id="$1" net="$2"; shift 2
  local tasks="" t
  for t in "$@"; do tasks="$tasks${tasks:+, }$t"; done
  printf '{"id": "%s", "network": %s, "tasks": [%s]}\n' "$id" "$net" "$tasks"
}
nt_server() { jt_task "$1" "$HELPER" serve "$2" "$3" "${4:-hello-$1}"; }
nt_env() { tr '\0' '\n' <"/proc/$1/environ" | sed -n "s/^$2=//p"; }
nt_ip() { nt_env "$(jt_running_pid "$1")" OUTPOST_IP; }
nt_connect() { nsx "$HELPER" connect "$@"; }
nt_listening() { op logs "$1" 2>/dev/null | grep -q "^listening $2"; }
# nt_snapshot: the node's per-job state: iptables rules (counters dropped),
# links, cache files, pins, host-local reservations.
nt_snapshot() {
  nsx iptables-save | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//'
  nsx ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
  ls "$T/run/cni/results" 2>/dev/null
  nsx ls "$T/netns" 2>/dev/null
  find "$T/run/cni" -path "$T/run/cni/results" -prune -o -type f ! -name lock ! -name 'last_reserved_ip*' -print 2>/dev/null
}

test_networks_bridge_jobs_reach_each_other_ports_map_and_nothing_is_left() {
  nt_node
  # One job added and removed first: the shared chains (CNI-FORWARD, the
  # admin chain, CNI-HOSTPORT-*) and the bridge exist from then on; every
  # later job must leave the node exactly like this.
  jt_run_doc "$(nt_job warm '{"mode": "bridge", "ports": [{"label": "w", "static": 9999}]}' "$(jt_sleeper t)")" \
    >/dev/null || fail "warm job"
  op rm warm >/dev/null || fail "rm warm"
  nt_snapshot >"$T/before"
  expect_contains "$(cat "$T/before")" "OUTPOST-ADMIN -d 10.46.0.0/20 -o outpost0 -j ACCEPT" "admin chain rule"

  jt_run_doc "$(nt_job web '{"mode": "bridge", "ports": [{"label": "http", "static": 8080, "to": 80},
                              {"label": "dns", "static": 5353, "to": 53, "protocol": "udp"}]}' \
      "$(nt_server tcp tcp 80)" "$(nt_server udp udp 53)")" >/dev/null || fail "run web"
  jt_run_doc "$(nt_job api '{"mode": "bridge", "hostname": "api-1"}' "$(jt_sleeper t)")" >/dev/null ||
    fail "run api"
  wait_for 10 nt_listening web/tcp tcp >/dev/null || fail "web/tcp not listening: $(op logs web/tcp 2>&1)"
  wait_for 10 nt_listening web/udp udp >/dev/null || fail "web/udp not listening: $(op logs web/udp 2>&1)"
  local web_pid api_pid web_ip api_ip
  web_pid="$(jt_running_pid web/tcp)"
  api_pid="$(jt_running_pid api/t)"
  web_ip="$(nt_ip web/tcp)"
  api_ip="$(nt_ip api/t)"
  # Addresses on the bridge; both tasks of web share one namespace.
  expect_contains "$web_ip" "10.46." "web's address"
  expect_contains "$api_ip" "10.46." "api's address"
  [ "$web_ip" != "$api_ip" ] || fail "two jobs got one address $web_ip"
  expect_eq "$(readlink "/proc/$web_pid/ns/net")" "$(readlink "/proc/$(jt_running_pid web/udp)/ns/net")" \
    "tasks of a job share its namespace"
  [ "$(readlink "/proc/$web_pid/ns/net")" != "$(readlink "/proc/$api_pid/ns/net")" ] || fail "jobs share a namespace"
  expect_eq "$(readlink "/proc/$web_pid/ns/net")" "net:[$(nsx stat -L -c %i "$T/netns/outpost-web")]" \
    "web runs in the namespace pinned at netns_dir/outpost-web"
  # The environment.
  expect_eq "$(nt_env "$web_pid" OUTPOST_PORT_HTTP)" 80 "OUTPOST_PORT_HTTP"
  expect_eq "$(nt_env "$web_pid" OUTPOST_HOST_PORT_HTTP)" 8080 "OUTPOST_HOST_PORT_HTTP"
  expect_eq "$(nt_env "$web_pid" OUTPOST_PORT_DNS)" 53 "OUTPOST_PORT_DNS"
  expect_eq "$(nt_env "$web_pid" OUTPOST_HOST_PORT_DNS)" 5353 "OUTPOST_HOST_PORT_DNS"
  expect_eq "$(op exec api/t -- /bin/hostname 2>/dev/null || op exec api/t -- /bin/uname -n)" api-1 "hostname"
  # Job to job over the bridge, from inside api (exec joins its namespace).
  expect_exit 0 op exec api/t -- "$HELPER" connect tcp "$web_ip" 80
  expect_contains "$OUT" "hello-tcp" "api reaches web over the bridge"
  # Port mappings: from the node itself and from outside through its address.
  expect_exit 0 nt_connect tcp 10.99.0.1 8080
  expect_contains "$OUT" "hello-tcp" "tcp mapping from the node"
  expect_exit 0 nt_outside "$HELPER" connect tcp 10.99.0.1 8080
  expect_contains "$OUT" "hello-tcp" "tcp mapping from outside"
  expect_exit 0 nt_outside "$HELPER" connect udp 10.99.0.1 5353
  expect_contains "$OUT" "hello-udp" "udp mapping from outside"
  # `outpost networks` shows them; per-job state exists while they run.
  expect_exit 0 op networks
  expect_contains "$OUT" "job web: bridge $web_ip/20" "networks lists web"
  expect_contains "$OUT" "http *:8080->80/tcp" "networks lists the mapping"
  expect_contains "$(nt_snapshot)" "outpost-web" "per-job rules while web runs"
  expect_contains "$(op events web)" "network bridge ready" "ready event with timings"

  op rm web >/dev/null || fail "rm web"
  op rm api >/dev/null || fail "rm api"
  nt_snapshot >"$T/after"
  diff "$T/before" "$T/after" >"$T/diff" || fail "left behind after rm: $(cat "$T/diff")"
}

test_networks_none_has_loopback_only_and_exec_joins_it() {
  nt_node
  jt_run_doc "$(nt_job lo '{"mode": "none"}' "$(nt_server s tcp 7000)")" >/dev/null || fail "run"
  wait_for 10 nt_listening lo/s tcp >/dev/null || fail "not listening"
  local pid; pid="$(jt_running_pid lo/s)"
  [ "$(readlink "/proc/$pid/ns/net")" != "$(readlink "/proc/$NT_NODE/ns/net")" ] || fail "task in the node's namespace"
  expect_eq "$(nt_env "$pid" OUTPOST_IP)" "" "no address for mode none"
  expect_exit 0 op exec lo/s -- "$HELPER" connect tcp 127.0.0.1 7000
  expect_contains "$OUT" "hello-s" "loopback is up inside"
  expect_exit 0 op exec lo/s -- /sbin/ip -o link show
  expect_eq "$(printf '%s\n' "$OUT" | awk -F': ' '{print $2}' | tr '\n' ' ')" "lo " "only loopback"
  expect_exit 0 nsx ls "$T/netns"
  expect_eq "$OUT" "outpost-lo" "pinned"
  op rm lo >/dev/null || fail "rm"
  expect_exit 0 nsx ls -A "$T/netns"
  expect_eq "$OUT" "" "unpinned after rm"
}

# nt_lan_conflist NAME [EXTRA_PLUGIN_JSON...]: a cni/<NAME> network of ptp +
# host-local on 10.47.0.0/24 (reservations under $T), then the extra plugins.
nt_lan_conflist() {
  local name="$1" extra="" p; shift
  for p in "$@"; do extra="$extra, $p"; done
  cat >"$T/cni.d/10-$name.conflist" <<JSON
{"cniVersion": "${NT_CNI_VERSION:-1.0.0}", "name": "$name", "plugins": [
  {"type": "ptp", "ipMasq": false,
   "ipam": {"type": "host-local", "subnet": "10.47.0.0/24", "dataDir": "$T/run/cni/$name"}}$extra]}
JSON
}
# nt_plugin NAME SCRIPT: a fake plugin in $T/cni-bin (first in cni_path).
nt_plugin() { printf '#!/bin/sh\n%s\n' "$2" >"$T/cni-bin/$1" && chmod +x "$T/cni-bin/$1"; }
# nt_gate_plugin: "gate", a chained plugin that, for ADD and DEL, touches
# $T/gate/in-<CMD> and waits for $T/gate/open-<CMD> before answering (ADD
# echoes prevResult): the tests catch the agent in the middle of an operation.
nt_gate_plugin() {
  mkdir -p "$T/gate"
  nt_plugin gate "in=\$(cat)
case \"\$CNI_COMMAND\" in ADD|DEL)
  touch \"$T/gate/in-\$CNI_COMMAND\"
  while [ ! -e \"$T/gate/open-\$CNI_COMMAND\" ]; do sleep 0.05; done;; esac
case \"\$CNI_COMMAND\" in
  ADD) printf '%s' \"\$in\" | python3 -c 'import json,sys; d=json.load(sys.stdin); r=d[\"prevResult\"]; r[\"cniVersion\"]=d[\"cniVersion\"]; print(json.dumps(r))';;
  VERSION) echo '{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.4.0\",\"1.0.0\"]}';;
esac
exit 0"
}
nt_lan_leases() { find "$T/run/cni/$1" -type f ! -name lock ! -name 'last_reserved_ip*' 2>/dev/null | wc -l; }
nt_kill_agent() {
  local w k
  w="$(op status --json 2>/dev/null | json_get pid)"
  k="$AGENT_PID"
  kill -9 "$k" "$w" 2>/dev/null
  wait_gone "$k" 10 && wait_gone "$w" 10 || fail "agent did not die"
}
nt_task_reason() { op --json inspect "$1" 2>/dev/null | json_get reason; }
nt_reason_has() { nt_task_reason "$1" | grep -qF -- "$2"; }
nt_networks_has() { op networks 2>/dev/null | grep -qF -- "$1"; }
nt_no_ptp_veth() { ! nsx ip -o link show | grep -q 'veth'; }
# nt_job_cidr JOB: the job's address as the agent has it ("" = not attached).
nt_job_cidr() {
  op networks --json 2>/dev/null | python3 -c 'import json,sys
print("".join(j["cidr"] or "" for j in json.load(sys.stdin).get("attached", []) if j["job"] == sys.argv[1]))' "$1"
}
nt_attached() { [ -n "$(nt_job_cidr "$1")" ]; }

test_networks_custom_cni_network_with_ptp_and_host_local() {
  nt_node
  nt_lan_conflist lan
  wait_for 10 nt_networks_has "cni/lan" >/dev/null || fail "cni/lan never listed: $(op networks)"
  expect_exit 0 op networks
  expect_contains "$OUT" "cni/lan  (network lan, cniVersion 1.0.0" "networks lists cni/lan"
  expect_contains "$OUT" "ptp        /usr/lib/cni/ptp" "plugin found in cni_path"
  jt_run_doc "$(nt_job db '{"mode": "cni/lan"}' "$(nt_server s tcp 5432)")" >/dev/null || fail "run db"
  wait_for 10 nt_listening db/s tcp >/dev/null || fail "not listening"
  local ip; ip="$(nt_ip db/s)"
  expect_contains "$ip" "10.47.0." "address from host-local"
  expect_exit 0 nt_connect tcp "$ip" 5432
  expect_contains "$OUT" "hello-s" "the node reaches the job over ptp"
  expect_eq "$(nt_lan_leases lan)" 1 "one reservation"
  op rm db >/dev/null || fail "rm"
  expect_eq "$(nt_lan_leases lan)" 0 "reservation released"
  nt_no_ptp_veth || fail "veth left: $(nsx ip -o link show)"
  expect_eq "$(ls "$T/run/cni/results" 2>/dev/null)" "" "cache entry removed"
}

test_networks_submission_refuses_what_the_node_cannot_do() {
  nt_node
  nt_lan_conflist lan
  expect_exit 2 jt_run_doc "$(nt_job j '{"mode": "cni/nosuch"}' "$(jt_sleeper t)")"
  expect_contains "$OUT" "network.mode: network 'nosuch' is not in $T/cni.d" "missing network named"
  expect_contains "$OUT" "lan" "the networks the node has are listed"
  expect_exit 2 jt_run_doc "$(nt_job j '{"mode": "cni/lan", "ports": [{"label": "a", "static": 80}]}' "$(jt_sleeper t)")"
  expect_contains "$OUT" "network.ports: network \"lan\" has no plugin with the portMappings capability" "ports need portmap"
  expect_exit 2 jt_run_doc "$(nt_job j '{"mode": "bridge", "ports": [{"label": "a", "static": 99999}]}' "$(jt_sleeper t)")"
  expect_contains "$OUT" "network.ports[0].static: must be between 1 and 65535, got 99999" "port range"
  expect_eq "$(jt_job_ids)" "" "nothing was created"
}

test_networks_failing_missing_old_and_hanging_plugins_leave_nothing() {
  NT_TIMEOUT=2s nt_node
  nt_plugin refuse 'case "$CNI_COMMAND" in
ADD) echo "{\"code\": 7, \"msg\": \"denied by test\", \"details\": \"always\"}"; exit 1;;
VERSION) echo "{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.4.0\",\"1.0.0\"]}";;
esac
exit 0'
  nt_plugin hang 'case "$CNI_COMMAND" in ADD) exec sleep 1000;;
VERSION) echo "{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.4.0\",\"1.0.0\"]}";; esac; exit 0'
  nt_lan_conflist refusing '{"type": "refuse"}'
  nt_lan_conflist missing '{"type": "nosuchplugin"}'
  nt_lan_conflist hanging '{"type": "hang"}'
  NT_CNI_VERSION=0.3.1 nt_lan_conflist old '{"type": "firewall", "backend": "iptables"}'
  nt_snapshot >"$T/before"
  local never='"restart": {"policy": "never"}'
  local net want
  # Never restarted: a retry's ADD in flight would be in the snapshot below.
  for net in refusing missing old hanging; do
    jt_run_doc "$(nt_job "j-$net" "{\"mode\": \"cni/$net\"}" "$(JT_EXTRA="$never" jt_sleeper t)")" -d >/dev/null ||
      fail "submit j-$net"
  done
  want='network cni/refusing: plugin refuse: [code 7] denied by test: always'
  wait_for 20 nt_reason_has j-refusing/t "$want" >/dev/null || fail "refusing: $(nt_task_reason j-refusing/t)"
  wait_for 20 nt_reason_has j-missing/t 'failed to find plugin "nosuchplugin" in path' >/dev/null ||
    fail "missing: $(nt_task_reason j-missing/t)"
  wait_for 20 nt_reason_has j-old/t 'plugin firewall' >/dev/null || fail "old: $(nt_task_reason j-old/t)"
  expect_contains "$(nt_task_reason j-old/t)" "cniVersion 0.3.1" "unsupported version named"
  wait_for 30 nt_reason_has j-hanging/t 'plugin hang: ran past its timeout' >/dev/null ||
    fail "hanging: $(nt_task_reason j-hanging/t)"
  pgrep -f "$T/cni-bin/hang" >/dev/null && fail "the hanging plugin still runs"
  # Each failed ADD was undone whole: no veth, reservation, rule, cache or pin.
  nt_snapshot >"$T/after"
  diff "$T/before" "$T/after" >"$T/diff" || fail "left behind: $(cat "$T/diff")"
}

# Crash safety: the agent killed (keeper and worker, kill -9) in the middle
# of ADD, of DEL, and between ADD and the task's start; and a restart with a
# job's network in place, CHECKed, and re-created when CHECK fails.
test_networks_agent_killed_during_add_then_job_runs_with_one_network() {
  nt_node
  nt_gate_plugin
  nt_lan_conflist lan '{"type": "gate"}'
  jt_run_doc "$(nt_job db '{"mode": "cni/lan"}' "$(nt_server s tcp 5432)")" -d >/dev/null || fail "submit"
  wait_for 20 test -e "$T/gate/in-ADD" || fail "ADD never reached the gate"
  nt_kill_agent
  touch "$T/gate/open-ADD"  # the orphaned ADD finishes; nobody reads its answer
  nt_start_agent
  wait_for 30 nt_listening db/s tcp >/dev/null || fail "job not running after the restart: $(nt_task_reason db/s)"
  local ip; ip="$(nt_ip db/s)"
  expect_exit 0 nt_connect tcp "$ip" 5432
  expect_contains "$OUT" "hello-s" "network works after the restart"
  expect_eq "$(nt_lan_leases lan)" 1 "exactly one reservation (the half-done ADD was DELeted first)"
  expect_eq "$(nsx ip -o link show | grep -c veth)" 1 "exactly one veth"
  op rm db >/dev/null || fail "rm"
  expect_eq "$(nt_lan_leases lan)" 0 "released"
  nt_no_ptp_veth || fail "veth left"
}

test_networks_agent_killed_during_del_then_nothing_is_left() {
  nt_node
  nt_gate_plugin
  touch "$T/gate/open-ADD"
  nt_lan_conflist lan '{"type": "gate"}'
  nt_snapshot >"$T/before"
  jt_run_doc "$(nt_job db '{"mode": "cni/lan"}' "$(jt_sleeper t)")" >/dev/null || fail "run"
  op rm db >/dev/null 2>&1 &
  wait_for 20 test -e "$T/gate/in-DEL" || fail "DEL never reached the gate"
  nt_kill_agent
  touch "$T/gate/open-DEL"
  nt_start_agent
  # The job may be gone from the store or still be there, stopped: either
  # way its network is torn down by recovery.
  wait_for 20 nsx test ! -e "$T/netns/outpost-db" || fail "pin left"
  op rm db >/dev/null 2>&1
  nt_snapshot >"$T/after"
  diff "$T/before" "$T/after" >"$T/diff" || fail "left behind: $(cat "$T/diff")"
}

test_networks_agent_killed_between_add_and_task_start() {
  mkdir -p "$T/hooks/prestart"
  # A prestart hook (after the network step) that holds the start; there
  # before the agent starts, so the first start runs it.
  printf '#!/bin/sh\ntouch %s/hook-in\nwhile [ ! -e %s/hook-open ]; do sleep 0.05; done\n' "$T" "$T" \
    >"$T/hooks/prestart/hold"
  chmod +x "$T/hooks/prestart/hold"
  nt_node
  nt_lan_conflist lan
  jt_run_doc "$(nt_job db '{"mode": "cni/lan"}' "$(nt_server s tcp 5432)")" -d >/dev/null || fail "submit"
  wait_for 20 test -e "$T/hook-in" || fail "the start never reached the hook"
  nt_kill_agent
  touch "$T/hook-open"
  nt_start_agent
  wait_for 30 nt_listening db/s tcp >/dev/null || fail "job not running after the restart: $(nt_task_reason db/s)"
  expect_exit 0 nt_connect tcp "$(nt_ip db/s)" 5432
  expect_contains "$OUT" "hello-s" "network works"
  expect_contains "$(op events db)" "recovered" "the network found in place was taken over"
  expect_eq "$(nt_lan_leases lan)" 1 "one reservation"
}

test_networks_running_job_is_checked_at_restart_and_recreated_when_broken() {
  nt_node
  nt_lan_conflist lan
  jt_run_doc "$(nt_job db '{"mode": "cni/lan"}' "$(nt_server s tcp 5432)")" >/dev/null || fail "run"
  wait_for 10 nt_listening db/s tcp >/dev/null || fail "not listening"
  local pid ip; pid="$(jt_running_pid db/s)"; ip="$(nt_ip db/s)"
  nt_kill_agent
  nt_start_agent
  wait_for 20 jt_events_contain db "CHECK passed" || fail "no CHECK at restart: $(op events db)"
  expect_eq "$(jt_running_pid db/s)" "$pid" "the task kept running"
  expect_exit 0 nt_connect tcp "$ip" 5432
  expect_contains "$OUT" "hello-s" "same address works"
  # Broken while no agent runs: the host side of the ptp veth is deleted.
  nt_kill_agent
  nsx ip -o link show | awk -F': ' '/veth/ {print $2}' | sed 's/@.*//' | while read -r l; do nsx ip link del "$l"; done
  nt_start_agent
  wait_for 30 jt_events_contain db "network cni/lan: broken: " || fail "no re-creation: $(op events db)"
  expect_contains "$(op events db)" "eth0 is not in $T/netns/outpost-db" "the broken part named"
  wait_for 30 jt_events_contain db "network cni/lan ready" || fail "not re-created: $(op events db)"
  expect_eq "$(jt_running_pid db/s)" "$pid" "the task kept running in its namespace"
  expect_eq "$(nt_job_cidr db)" "$ip/24" "the re-created network has the address the task knows"
  expect_exit 0 nt_connect tcp "$ip" 5432
  expect_contains "$OUT" "hello-s" "re-created network works"
  expect_eq "$(nt_lan_leases lan)" 1 "one reservation after re-creation"
}

# Nomad's bridge conflist exactly as its CNI documentation publishes it
# (tests/integration/cni/nomad.conflist, byte for byte), as cni/nomad with
# a port map. portmap 1.1.1's CHECK fails on it ("could not check ipv6
# dnat"), and the conflist has no disableCheck: a restart must still keep
# the job's namespace, address and open connections; only a namespace that
# is really broken is re-created, with its address. Its host-local keeps
# reservations in the default /var/lib/cni: a tmpfs of the node's own here.
nt_eth0_cidr() { nsx nsenter --net="$T/netns/outpost-$1" ip -4 -o addr show dev eth0 | awk '{print $4}'; }
nt_has_line() { grep -qxF -- "$2" "$1" 2>/dev/null; }
nt_nomad_leases() { nsx find /var/lib/cni/networks/nomad -name '172.*' | wc -l; }

test_networks_nomad_conflist_keeps_the_address_and_connections_across_restarts() {
  nt_node
  nsx mount -t tmpfs tmpfs /var/lib && nsx mkdir /var/lib/cni || fail "no tmpfs for /var/lib/cni in the node"
  cp "$here/cni/nomad.conflist" "$T/cni.d/nomad.conflist"
  wait_for 10 nt_networks_has "cni/nomad" >/dev/null || fail "cni/nomad never listed: $(op networks)"
  jt_run_doc "$(nt_job web '{"mode": "cni/nomad", "ports": [{"label": "http", "static": 8080, "to": 80}]}' \
    "$(jt_task s /usr/bin/python3 "$here/net_echo.py" serve 80)")" >/dev/null || fail "run web"
  wait_for 10 nt_listening web/s tcp >/dev/null || fail "not listening: $(op logs web/s 2>&1)"
  local pid ip
  pid="$(jt_running_pid web/s)"
  ip="$(nt_ip web/s)"
  expect_contains "$ip" "172.26.64." "address from the conflist's range"
  expect_eq "$(nt_job_cidr web)" "$ip/20" "the agent's address of the job"
  # One connection from outside through the port map, kept open throughout.
  # (nsenter execs python: $! is the client itself, for the kill below.)
  nsenter -t "$NT_OUTSIDE" -n -- python3 "$here/net_echo.py" hold 10.99.0.1 8080 "$T/conn.log" "$T/conn-go" \
    >>"$T/conn.out" 2>&1 &
  local client=$!
  echo "$client" >>"$T/.pids"
  wait_for 10 nt_has_line "$T/conn.log" "echo ping 1" || fail "no connection through the port map: $(cat "$T/conn.log")"

  local how events round=2
  for how in SIGTERM "kill -9"; do
    if [ "$how" = SIGTERM ]; then
      kill -TERM "$AGENT_PID" && wait_gone "$AGENT_PID" 40 || fail "agent did not stop on SIGTERM"
    else
      nt_kill_agent
    fi
    nt_start_agent
    wait_for 30 nt_attached web >/dev/null || fail "not recovered after $how: $(op events web)"
    expect_eq "$(nt_job_cidr web)" "$ip/20" "the job's address after a $how restart"
    expect_eq "$(nt_eth0_cidr web)" "$ip/20" "eth0's address in the namespace after a $how restart"
    expect_eq "$(jt_running_pid web/s)" "$pid" "the task kept running ($how)"
    # The event history survives restarts: the first ADD's "ready" stays the
    # only one, and each restart adds one recovery.
    events="$(op events web)"
    expect_contains "$events" "network cni/nomad recovered: $ip/20 (CHECK failed, kept: its interfaces and addresses" \
      "the recovery after $how reports the failed CHECK and keeps the network"
    expect_contains "$events" "are in place: plugin portmap: [code 999] could not check ipv6 dnat" "CHECK's error"
    expect_eq "$(printf '%s\n' "$events" | grep -c "network cni/nomad recovered: ")" "$((round - 1))" \
      "one recovery per restart, after $how"
    expect_eq "$(printf '%s\n' "$events" | grep -c "network cni/nomad ready")" 1 "no second ADD after $how"
    touch "$T/conn-go-$round"
    wait_for 10 nt_has_line "$T/conn.log" "echo ping $round" ||
      fail "the connection did not survive the $how restart: $(cat "$T/conn.log")"
    round=$((round + 1))
  done
  expect_eq "$(nt_nomad_leases)" 1 "one reservation"

  # Really broken while no agent runs: eth0 (and with it the veth pair) gone.
  kill "$client" 2>/dev/null
  nt_kill_agent
  nsx nsenter --net="$T/netns/outpost-web" ip link del eth0 || fail "delete eth0"
  nt_start_agent
  wait_for 30 jt_events_contain web "network cni/nomad ready" >/dev/null ||
    fail "the broken network was not re-created: $(op events web)"
  events="$(op events web)"
  expect_contains "$events" "network cni/nomad: broken: host interface veth" "why it was re-created: the veth"
  expect_contains "$events" "; eth0 is not in $T/netns/outpost-web; re-creating it with its address $ip/20" \
    "why it was re-created: eth0"
  wait_for 10 nt_attached web >/dev/null || fail "not attached after the re-creation"
  expect_eq "$(nt_job_cidr web)" "$ip/20" "the re-created network kept the address"
  expect_eq "$(nt_eth0_cidr web)" "$ip/20" "eth0 is back with the address"
  expect_eq "$(jt_running_pid web/s)" "$pid" "the task kept running in its namespace"
  expect_exit 0 nt_outside python3 "$here/net_echo.py" once 10.99.0.1 8080
  expect_eq "$OUT" "once" "the port map reaches the task again"
  expect_eq "$(nt_nomad_leases)" 1 "one reservation after the re-creation"
}

# Twenty bridge jobs with a port map, each run and removed: a leak of any
# kind (interface, iptables rule or chain, address lease, netns pin, cache
# file) shows in the diff after one. (Fifty took 155 s of make test's
# integration suite under the cross builds' load.)
test_networks_twenty_jobs_started_and_removed_leak_nothing() {
  nt_node
  jt_run_doc "$(nt_job warm '{"mode": "bridge", "ports": [{"label": "p", "static": 9000}]}' "$(jt_sleeper t)")" \
    >/dev/null || fail "warm"
  op rm warm >/dev/null || fail "rm warm"
  nt_snapshot >"$T/before"
  local i
  for i in $(seq 1 20); do
    jt_run_doc "$(nt_job "j$i" '{"mode": "bridge", "ports": [{"label": "p", "static": 9000}]}' "$(jt_sleeper t)")" \
      >"$T/run.out" 2>&1 || fail "run j$i: $(cat "$T/run.out")"
    op rm "j$i" >/dev/null || fail "rm j$i"
  done
  nt_snapshot >"$T/after"
  diff "$T/before" "$T/after" >"$T/diff" || fail "leaked after 20 jobs: $(cat "$T/diff")"
}
