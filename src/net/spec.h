// A job's network as its spec asks for it (docs/networking.md). Owns: the
// NetworkSpec type with its defaults, reading the job spec's `network`
// object with every problem reported by JSON path, its canonical form, and
// the environment a task of such a job gets (OUTPOST_IP, OUTPOST_PORT_*,
// OUTPOST_HOST_PORT_*). Does not know which networks the node has (net/
// networks checks that at submission) and runs nothing.
#pragma once

#include <picojson.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/json.h"

namespace outpost::net {

// One entry of `network.ports`: host port `static` on `host_ip` (all
// addresses when empty) forwarded to port `to` inside the job's namespace.
struct PortMapping {
  std::string label;          // [A-Za-z0-9_]+, unique in the job
  int64_t host_port = 0;      // `static`: 1-65535
  int64_t to = 0;             // 1-65535; defaults to host_port
  std::string protocol = "tcp";  // tcp | udp
  std::string host_ip;        // "" = every address of the host
};

struct NetworkSpec {
  // "host" (the agent's namespace: nothing is done), "none" (a namespace
  // with loopback only), "bridge" (the built-in CNI network) or
  // "cni/<name>" (a network from the CNI config dir).
  std::string mode = "host";
  std::vector<PortMapping> ports;
  std::map<std::string, std::string> cni_args;  // CNI_ARGS for every plugin
  std::string hostname;  // "" = the node's

  bool Isolated() const { return mode != "host"; }  // the job has its own namespace
  bool UsesCni() const { return mode == "bridge" || mode.compare(0, 4, "cni/") == 0; }
  // The CNI network name for "cni/<name>" ("" otherwise).
  std::string CniName() const { return mode.compare(0, 4, "cni/") == 0 ? mode.substr(4) : std::string(); }
};

// Reads `network` at path ("network"), adding one "<path>.<field>: <problem>"
// line to errors per problem: the mode's form, port numbers, protocols,
// duplicate labels or host ports, cni_args keys and values (no ';' or '='
// in keys, no ';' in values), the hostname (RFC 1123 label rules, <= 63).
NetworkSpec NetworkSpecFromJson(const picojson::value& v, const std::string& path, json::Errors* errors);
// Canonical form: every field with its effective value (`to` filled in).
picojson::value NetworkSpecToJson(const NetworkSpec& spec);

// OUTPOST_IP (when ip is set), and per port label L (upper-cased)
// OUTPOST_PORT_L (the port inside) and OUTPOST_HOST_PORT_L (the host's).
void AddNetworkEnv(const std::string& ip, const std::vector<PortMapping>& ports,
                   std::map<std::string, std::string>* env);

}  // namespace outpost::net
