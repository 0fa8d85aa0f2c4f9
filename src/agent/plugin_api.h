// Plugins in the agent. Owns: starting plugin discovery and registration
// in the worker (the registry with the handlers of the plugin types this
// agent has, then the watcher on plugins_dir), turning their events into
// the event history, the API method ListPlugins behind `outpost plugins`,
// and the one-line summary `outpost status` shows. Does not own:
// registration itself (plugin/) or what a plugin type does (its handler).
#pragma once

#include <string>

namespace outpost {
namespace wire {
class RpcServer;
}
namespace agent {

class Agent;

void RegisterPluginApi(Agent* agent, wire::RpcServer* server);
// "2 plugins (3 instances) in /run/outpost/plugins; /run/.../x.sock not
// registered: ..."; *on: discovery runs and the dir is watched (plugins
// that are not registered are listed, they do not turn it off).
std::string PluginSummary(Agent* agent, bool* on);

}  // namespace agent
}  // namespace outpost
