// Plugin discovery and registration (kubelet's pluginwatcher, desired state
// and operation executor). Owns: watching the plugins dir and its
// subdirectories for unix sockets (names starting with '.' and other files
// are ignored), one appearance number per socket appearance (kubelet's UUID:
// a socket re-created at the same path is a new plugin instance), and the
// registration sequence per socket, one at a time: connect and check the
// peer's uid, GetInfo (1 s), the handler for the type, Validate, Register
// (plugin/registry), NotifyRegistrationStatus; any failure tells the
// plugin why (once it answered GetInfo) and tries the whole sequence again
// after 0.5 s, doubling up to 122 s, for as long as the socket is there.
// Does not own: registered instances, their connections and grace periods
// (plugin/registry).
//
// Differences from kubelet, each on purpose (docs/plugins.md):
// - A socket renamed away deregisters, like one deleted.
// - A failed attempt is always retried while the socket exists: nothing is
//   recorded as registered before the handler's Register succeeded
//   (kubernetes#118317 leaves such a socket unregistered until it is
//   re-created).
// - A socket that appears again starts with no backoff (after a reboot or
//   a plugin restart, node-driver-registrar#206).
// - Events drive it; there is no 1 s reconcile loop.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "loop/dir_watch.h"
#include "loop/loop.h"
#include "plugin/conn.h"
#include "plugin/registry.h"

namespace outpost::plugin {

// The registration service every plugin serves on its socket.
inline constexpr const char kRegistrationService[] = "pluginregistration.Registration";

// A GetInfo reply (untrusted bytes): decoded and checked, the endpoint
// resolved ("" = socket). InvalidArgument names the field.
Result<Info> DecodePluginInfo(std::string_view bytes, const std::string& socket, Transport transport);

struct WatcherOptions {
  std::string dir;  // must exist
  // How the plugins in dir are spoken to: ttRPC (outpost's plugins dir) or
  // gRPC (kubelet's plugins_registry, with kubelet's wording for refusals).
  Transport transport = Transport::kTtrpc;
  std::string name = "plugins dir";  // in log lines
  int64_t getinfo_timeout_nanos = 1LL * 1000000000;
  int64_t notify_timeout_nanos = 5LL * 1000000000;
  int64_t backoff_initial_nanos = 500LL * 1000000;
  int64_t backoff_max_nanos = 122LL * 1000000000;
  std::vector<uid_t> allowed_uids = {0, ::geteuid()};
  // Refused and failed attempts (the registry reports the rest).
  std::function<void(const Event&)> on_event;
};

class Watcher {
 public:
  // Starts watching and looks at what is already there (from the loop,
  // right after Start returns). A dir that cannot be watched is retried by
  // DirWatch; problem() says why.
  static Result<std::unique_ptr<Watcher>> Start(Loop* loop, Registry* registry, WatcherOptions options);
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Looks at the whole dir again (SIGHUP).
  void Rescan();
  const std::string& problem() const;

  struct SocketView {
    std::string path;
    uint64_t appearance = 0;
    // registered, registering, waiting (for the next attempt)
    std::string state;
    std::string type;  // from its last GetInfo answer ("" before one)
    std::string name;
    uint64_t instance_id = 0;  // while registered
    int failures = 0;          // attempts failed in a row
    std::string last_error;
    int64_t next_attempt_unix_nanos = 0;  // while waiting
    int64_t retry_in_nanos = 0;           // the backoff before that attempt
  };
  std::vector<SocketView> Sockets() const;

 private:
  struct Socket;

  Watcher(Loop* loop, Registry* registry, WatcherOptions options);
  void OnChanges(const std::vector<loop::DirWatch::Change>& changes);
  void Appear(const std::string& path);
  void Vanish(const std::string& path);
  void Attempt(const std::string& path);
  void OnInfo(const std::string& path, uint64_t appearance, Result<std::string> reply);
  void OnRegistered(const std::string& path, uint64_t appearance, Result<uint64_t> id);
  // Tells the plugin how its registration went, then ends the attempt.
  void NotifyAndEnd(const std::string& path, uint64_t appearance, bool registered, const std::string& error);
  // Ends an attempt: failed (error non-empty: recorded, retried after the
  // backoff) or done. An attempt overtaken by a new appearance or by the
  // socket going away is dropped and, if the socket is there, the new
  // appearance is tried at once.
  void End(const std::string& path, uint64_t appearance, const std::string& error, bool refused = false);
  // nullptr unless the socket is there with that appearance and busy.
  Socket* Current(const std::string& path, uint64_t appearance);

  Loop* loop_;
  Registry* registry_;
  WatcherOptions options_;
  std::unique_ptr<loop::DirWatch> watch_;
  std::map<std::string, std::unique_ptr<Socket>> sockets_;  // by absolute path
  uint64_t next_appearance_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::plugin
