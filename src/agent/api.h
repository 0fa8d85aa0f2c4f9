// The agent's API service "outpost.v1.Agent" (proto/agent.proto). Owns the
// request handlers: decoding requests, asking the agent and encoding
// replies. Does not own the socket or connections (wire/rpc_server).
#pragma once

namespace outpost {
namespace wire {
class RpcServer;
}
namespace agent {

class Agent;

constexpr const char* kAgentService = "outpost.v1.Agent";

void RegisterApi(Agent* agent, wire::RpcServer* server);

}  // namespace agent
}  // namespace outpost
