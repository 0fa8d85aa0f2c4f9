// The agent's API service "outpost.v1.Agent" (proto/agent.proto). Owns the
// request handlers: decoding requests, asking the agent and encoding
// replies. Does not own the socket or connections (wire/rpc_server).
#pragma once

#include <string>

namespace outpost {
namespace wire {
class RpcServer;
}
namespace agent {

class Agent;

constexpr const char* kAgentService = "outpost.v1.Agent";

void RegisterApi(Agent* agent, wire::RpcServer* server);
// ListHooks (agent/hooks_api.cc).
void RegisterHooksApi(Agent* agent, wire::RpcServer* server);
void RegisterNetworkApi(Agent* agent, wire::RpcServer* server);  // network_api.cc
void RegisterNriApi(Agent* agent, wire::RpcServer* server);      // nri_api.cc
void RegisterDevicesApi(Agent* agent, wire::RpcServer* server);  // devices_api.cc
// One line for `outpost status`: the hooks.d files and per-stage hooks in
// use, and every invalid file with its error (*ok false when there is one).
std::string HooksSummary(Agent* agent, bool* ok);
// The networks feature line of `outpost status`.
std::string NetworksSummary(Agent* agent, bool* ok);
// The NRI feature line of `outpost status` (*ok false when off, a required
// plugin is missing or a plugin file is not launched).
std::string NriSummary(Agent* agent, bool* ok);

}  // namespace agent
}  // namespace outpost
