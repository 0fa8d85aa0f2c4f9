// The built-in `bridge` network (docs/networking.md "Bridge mode"), after
// Nomad's: loopback, bridge (a Linux bridge as the gateway, masquerading,
// host-local addresses kept on tmpfs so that reservations go with the
// namespaces at reboot), firewall (iptables backend, with our admin chain)
// and portmap (port mappings, SNAT for hairpin traffic). Owns the conflist
// text for the options, and the iptables commands that make the admin
// chain accept the bridge's subnet (Nomad's NOMAD-ADMIN rule), run before
// every ADD of this network.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "net/cni_config.h"

namespace outpost::net {

struct BridgeOptions {
  std::string network = "outpost";       // the CNI network name (cache, chains)
  std::string bridge = "outpost0";       // the Linux bridge
  // Clear of Docker's default pools (172.17.0.0/16 to 172.31.0.0/16,
  // 192.168.0.0/16), Nomad's 172.26.64.0/20, Podman's 10.88.0.0/16 and
  // CRI-O's 10.85.0.0/16.
  std::string subnet = "10.46.0.0/20";
  std::string admin_chain = "OUTPOST-ADMIN";
  std::string ipam_data_dir;             // host-local's dataDir (volatile: <runtime_dir>/cni/networks)
};

// The options' problems, one per line naming the config key
// ("bridge_network_subnet: ..."); OK when usable.
Status CheckBridgeOptions(const BridgeOptions& o);
std::string BridgeConflist(const BridgeOptions& o);
NetworkList BridgeNetworkListOrDie(const BridgeOptions& o);
// argv lists, run in order: create the admin chain (fails harmlessly when
// it exists), then the accept rule unless present (-C, then -A).
std::vector<std::string> AdminChainCreate(const BridgeOptions& o);
std::vector<std::string> AdminRuleCheck(const BridgeOptions& o);
std::vector<std::string> AdminRuleAppend(const BridgeOptions& o);

}  // namespace outpost::net
