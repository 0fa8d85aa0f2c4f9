// One NRI plugin connection as the runtime sees it. Owns: the trunk (NRI
// multiplexer) and the ttRPC client on its connection 1 (outpost calls the
// Plugin service), the link of connection 2 handed to the adaptation's
// Runtime server, the plugin's identity, state and counters, the per-call
// timeout, the StateChange fallback once a dedicated RPC answered
// Unimplemented, and closing (a launched plugin's process is the
// launcher's). Does not own ordering or merging (nri/adaptation).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "nri/adaptation.h"

namespace outpost::wire {
class MuxTrunk;
class RpcClient;
}  // namespace outpost::wire

namespace outpost::nri {

enum class PluginState { kRegistering, kConfiguring, kSynchronizing, kReady, kClosed };
const char* PluginStateName(PluginState s);

class PluginConn {
 public:
  // A connected socket (accepted, or the runtime's end of a launched
  // plugin's socketpair). launched_name/index: the plugin dir's file name
  // (what RegisterPlugin says is then ignored, as upstream).
  static Result<std::unique_ptr<PluginConn>> Create(Adaptation* owner, uint64_t id, UniqueFd fd,
                                                    bool launched, const std::string& launched_index,
                                                    const std::string& launched_name);
  ~PluginConn();

  // One call of the Plugin service with the plugin's timeout. done gets the
  // reply payload or the error; fatal errors (closed, timed out) close the
  // plugin before done runs, with closed() then true. probe: a dedicated
  // event RPC tried on a plugin that may predate it, whose Unimplemented
  // answer says so (the caller falls back to StateChange) and is no failure.
  void Call(const char* method, const std::string& payload, std::function<void(Result<std::string>)> done,
            bool probe = false);
  void Close(const std::string& why);

  // "10-logger" (once registered; "?" before).
  std::string Id() const;
  bool closed() const { return state == PluginState::kClosed; }
  bool Subscribed(Event e) const { return (events & EventMask(e)) != 0; }
  PluginInfo Info() const;

  uint64_t id;  // the adaptation's number for it
  uint64_t server_conn = 0;  // its connection in the Runtime server
  bool launched;
  std::string index;
  std::string name;
  std::string nri_version;
  std::string config;  // sent in Configure (a launched plugin's conf.d file)
  PluginState state = PluginState::kRegistering;
  uint32_t events = 0;
  bool state_change = false;
  pid_t peer_pid = 0;
  int64_t connected_unix_nanos = 0;
  // Over all the plugin's connections: the adaptation lists a plugin once
  // (index and name), its closed connection taken over by the next one.
  uint64_t restarts = 0;
  uint64_t requests = 0;
  uint64_t failures = 0;
  std::string last_error;
  std::string close_reason;
  Loop::TimerId registration_timer = 0;

 private:
  PluginConn(Adaptation* owner, uint64_t number, bool from_dir);
  void OnTrunkClosed(const Error& why);

  Adaptation* owner_;
  std::unique_ptr<wire::MuxTrunk> trunk_;
  std::unique_ptr<wire::RpcClient> client_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::nri
