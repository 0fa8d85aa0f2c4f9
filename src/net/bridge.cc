// The built-in bridge network's conflist and admin chain.
#include "net/bridge.h"

#include <arpa/inet.h>

#include <cstdlib>

#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "net/cni_result.h"

namespace outpost::net {

namespace {

bool IsIfaceName(const std::string& s) {
  if (s.empty() || s.size() > 15) return false;
  for (char c : s) {
    if (c == '/' || c == ':' || c == ' ' || c == '\t' || c == '\n') return false;
  }
  return true;
}

}  // namespace

Status CheckBridgeOptions(const BridgeOptions& o) {
  std::vector<std::string> errors;
  size_t slash = o.subnet.find('/');
  unsigned char addr[4];
  char* end = nullptr;
  long prefix = slash == std::string::npos ? -1 : std::strtol(o.subnet.c_str() + slash + 1, &end, 10);
  if (slash == std::string::npos || inet_pton(AF_INET, o.subnet.substr(0, slash).c_str(), addr) != 1 ||
      end == nullptr || *end != '\0' || prefix < 8 || prefix > 29) {
    errors.push_back("bridge_network_subnet: expected an IPv4 subnet like \"10.46.0.0/20\" with a prefix of "
                     "8 to 29 bits, got " + QuoteForMessage(o.subnet));
  }
  if (!IsIfaceName(o.bridge)) {
    errors.push_back("bridge_network_bridge: an interface name of 1-15 characters without '/', ':' or "
                     "spaces, got " + QuoteForMessage(o.bridge));
  }
  bool name_ok = !o.network.empty() && o.network.size() <= 64;
  for (char c : o.network) {
    name_ok = name_ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                          c == '-' || c == '_' || c == '.');
  }
  if (!name_ok) errors.push_back("bridge_network_name: letters, digits, '-', '_' and '.', got " + QuoteForMessage(o.network));
  bool chain_ok = !o.admin_chain.empty() && o.admin_chain.size() <= 28;
  for (char c : o.admin_chain) chain_ok = chain_ok && c > ' ' && c != '!';
  if (!chain_ok) errors.push_back("bridge_network_admin_chain: 1-28 characters, got " + QuoteForMessage(o.admin_chain));
  if (errors.empty()) return OkStatus();
  std::string msg;
  for (const std::string& e : errors) msg += (msg.empty() ? "" : "\n") + e;
  return Error(Code::kInvalidArgument, msg);
}

std::string BridgeConflist(const BridgeOptions& o) {
  picojson::object ipam;
  ipam["type"] = picojson::value("host-local");
  picojson::object range;
  range["subnet"] = picojson::value(o.subnet);
  ipam["ranges"] = picojson::value(picojson::array{picojson::value(picojson::array{picojson::value(range)})});
  picojson::object route;
  route["dst"] = picojson::value("0.0.0.0/0");
  ipam["routes"] = picojson::value(picojson::array{picojson::value(route)});
  if (!o.ipam_data_dir.empty()) ipam["dataDir"] = picojson::value(o.ipam_data_dir);

  picojson::object loopback;
  loopback["type"] = picojson::value("loopback");
  picojson::object bridge;
  bridge["type"] = picojson::value("bridge");
  bridge["bridge"] = picojson::value(o.bridge);
  bridge["ipMasq"] = picojson::value(true);
  bridge["isGateway"] = picojson::value(true);
  bridge["forceAddress"] = picojson::value(true);
  bridge["hairpinMode"] = picojson::value(true);
  bridge["ipam"] = picojson::value(ipam);
  picojson::object firewall;
  firewall["type"] = picojson::value("firewall");
  firewall["backend"] = picojson::value("iptables");
  firewall["iptablesAdminChainName"] = picojson::value(o.admin_chain);
  picojson::object portmap;
  portmap["type"] = picojson::value("portmap");
  picojson::object caps;
  caps["portMappings"] = picojson::value(true);
  portmap["capabilities"] = picojson::value(caps);
  portmap["snat"] = picojson::value(true);

  picojson::object list;
  list["cniVersion"] = picojson::value("0.4.0");
  list["name"] = picojson::value(o.network);
  // portmap 1.1.1's CHECK fails even for a healthy IPv4 attachment ("could
  // not check ipv6 dnat"), so the built-in network is not CHECKed (Nomad
  // skips CHECK for these plugins too); recovery checks the namespace and
  // the cached result instead.
  list["disableCheck"] = picojson::value(true);
  list["plugins"] = picojson::value(picojson::array{picojson::value(loopback), picojson::value(bridge),
                                                    picojson::value(firewall), picojson::value(portmap)});
  return picojson::value(list).serialize(true);
}

NetworkList BridgeNetworkListOrDie(const BridgeOptions& o) {
  auto list = ParseNetworkList(BridgeConflist(o), true, "");
  // Built from options CheckBridgeOptions accepted: a failure is our bug.
  if (!list.ok()) {
    log::Error("built-in bridge conflist does not parse", {{"error", list.error().message()}});
    std::abort();
  }
  return *list;
}

std::vector<std::string> AdminChainCreate(const BridgeOptions& o) {
  return {"iptables", "-w", "-t", "filter", "-N", o.admin_chain};
}

std::vector<std::string> AdminRuleCheck(const BridgeOptions& o) {
  return {"iptables", "-w", "-t", "filter", "-C", o.admin_chain, "-o", o.bridge, "-d", o.subnet, "-j", "ACCEPT"};
}

std::vector<std::string> AdminRuleAppend(const BridgeOptions& o) {
  return {"iptables", "-w", "-t", "filter", "-A", o.admin_chain, "-o", o.bridge, "-d", o.subnet, "-j", "ACCEPT"};
}

}  // namespace outpost::net
