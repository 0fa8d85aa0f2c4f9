// Registered plugins (kubelet's "actual state of the world", plus DRA's
// connection monitoring, for every plugin type). Owns: the handlers by
// plugin type; the plugins by type and name, each with its instances in
// registration order; one monitored connection per instance (reconnected
// with backoff when it drops); the grace period after which a plugin with
// no connected instance is cleaned up by its handler; which instance calls
// go to (the most recently registered connected one); the events and the
// listing behind `outpost plugins`.
// Does not own: finding sockets and the registration sequence
// (plugin/watcher), or what a plugin type means (its Handler).
//
// What ends an instance is its socket going away (Deregister, from the
// watcher), never a dropped connection: an instance whose connection drops
// is "disconnected" and reconnected, and its plugin is cleaned up only if no
// instance of it is connected for the whole grace period. An instance that
// is deregistered does not end the plugin either: the grace period runs
// from the moment the plugin has no connected instance, whether its
// instances dropped or went away (a plugin restarted by its supervisor
// removes its socket and makes a new one).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "plugin/conn.h"
#include "wire/grpc_client.h"
#include "wire/rpc_client.h"

namespace outpost::plugin {

// What a plugin said about itself (GetInfo), endpoint already resolved: the
// registration socket itself when the plugin left it empty.
struct Info {
  Transport transport = Transport::kTtrpc;  // of the directory it was found in
  std::string type;
  std::string name;
  std::string endpoint;
  std::vector<std::string> supported_versions;
};

// One registered instance of a plugin, as handlers and the listing see it.
struct Instance {
  uint64_t id = 0;  // unique for the agent's lifetime
  std::string type;
  std::string name;
  std::string socket;    // the registration socket in the plugins dir
  std::string endpoint;  // where its service is (== socket when it said "")
  std::string version;   // the supported version the handler chose
  int64_t registered_unix_nanos = 0;
  bool connected = false;
  int64_t since_unix_nanos = 0;       // connected or disconnected since
  Transport transport = Transport::kTtrpc;
  // While connected, the client of its transport (the other is null);
  // owned by the registry.
  wire::RpcClient* client = nullptr;
  wire::GrpcClient* grpc = nullptr;
};

// What a plugin type means to the agent. All calls come from the loop.
class Handler {
 public:
  virtual ~Handler() = default;
  virtual const char* type() const = 0;
  // Checks what GetInfo said before anything is done with it; returns the
  // version to use (the first of info.supported_versions the handler
  // speaks) or why the plugin is refused.
  virtual Result<std::string> Validate(const Info& info) = 0;
  // A new instance, connected (instance.client is usable): get it ready
  // (ask its capabilities...). done(error) refuses the registration; done
  // must run exactly once, from a loop callback or before Register returns.
  // The instance is not yet in the registry while this runs.
  virtual void Register(const Instance& instance, std::function<void(Status)> done) = 0;
  // The instance's socket went away. The plugin may have other instances.
  virtual void Deregister(const Instance& instance) { (void)instance; }
  // How long the plugin may have no connected instance before Expired
  // runs; 0: the registry's grace period.
  virtual int64_t GraceNanos() const { return 0; }
  // Which instance calls go to changed, or whether there is a connected
  // one: see Registry::Active. An instance that reconnected counts as a
  // change (the process behind it may be new).
  virtual void Changed(const std::string& name) { (void)name; }
  // No instance of the plugin was connected for the whole grace period:
  // clean up what depended on it (its tasks are lost...).
  virtual void Expired(const std::string& name) { (void)name; }
};

struct Event {
  // registered, deregistered, disconnected, reconnected, expired, refused
  std::string kind;
  std::string type;  // "" for a socket refused before GetInfo answered
  std::string name;
  std::string socket;
  std::string message;  // human-readable, one line
};

struct RegistryOptions {
  int64_t grace_nanos = 30LL * 1000000000;
  // Reconnecting a dropped instance: at once, then after this delay,
  // doubling up to the cap, while its socket exists.
  int64_t reconnect_initial_nanos = 100LL * 1000000;
  int64_t reconnect_max_nanos = 5LL * 1000000000;
  // The uids that may serve a plugin socket (SO_PEERCRED): root and the
  // agent's own.
  std::vector<uid_t> allowed_uids = {0, ::geteuid()};
  std::function<void(const Event&)> on_event;  // may be null
};

// Connects to a plugin's unix socket (not blocking) and checks who serves
// it: only root and the agent's own uid may (a socket in the plugins dir
// made by someone else, or an endpoint pointing at another user's socket,
// is refused with an error that names the uid and pid).
Result<UniqueFd> ConnectToPlugin(const std::string& path, const std::vector<uid_t>& allowed_uids);

class Registry {
 public:
  Registry(Loop* loop, RegistryOptions options);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Handlers are not owned and must outlive the registry. AlreadyExists if
  // the type has one.
  Status AddHandler(Handler* handler);
  Handler* HandlerFor(const std::string& type) const;
  std::vector<std::string> Types() const;

  // Registers an instance: connects to info.endpoint, runs the handler's
  // Register, and only when both succeed adds the instance (newest of its
  // plugin). done gets the new instance's id, or why it was refused (no
  // handler, the endpoint already registered for that plugin, cannot
  // connect, the handler's error); it runs exactly once, from a loop
  // callback. Nothing is kept of a refused attempt.
  using RegisterDone = std::function<void(Result<uint64_t> instance_id)>;
  void Register(const std::string& socket, const Info& info, const std::string& version, RegisterDone done);
  // The instance's socket went away: the instance is dropped (its
  // handler's Deregister runs), the next most recent connected instance
  // takes over, and a plugin left without a connected instance starts its
  // grace period. Unknown ids are ignored.
  void Deregister(uint64_t instance_id);

  // The instance calls of a plugin go to: the most recently registered
  // connected instance; nullptr when none is connected.
  const Instance* Active(const std::string& type, const std::string& name) const;
  // The plugin's instance with that id while it is registered and
  // connected; nullptr otherwise.
  const Instance* Connected(const std::string& type, const std::string& name, uint64_t id) const;

  struct PluginView {
    std::string type;
    std::string name;
    std::vector<Instance> instances;  // registration order, oldest first
    // Set while no instance is connected: when the handler's cleanup runs.
    int64_t expires_unix_nanos = 0;
    std::string last_error;  // of its connections ("" = none)
  };
  std::vector<PluginView> List() const;
  size_t instance_count() const;

 private:
  struct Conn;
  struct Plugin;

  Plugin* FindPlugin(const std::string& type, const std::string& name);
  const Plugin* FindPlugin(const std::string& type, const std::string& name) const;
  Conn* FindInstance(uint64_t id, Plugin** plugin);
  Status Attach(Conn* conn, UniqueFd fd);
  void OnDisconnect(uint64_t id, const Error& why);
  void Reconnect(uint64_t id);
  // Starts or cancels the plugin's grace period after a change; tells its
  // handler which instance is active now.
  void Sync(Plugin* plugin);
  void Expire(const std::string& type, const std::string& name);
  void Emit(const char* kind, const std::string& type, const std::string& name, const std::string& socket,
            const std::string& message);

  Loop* loop_;
  RegistryOptions options_;
  std::map<std::string, Handler*> handlers_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Plugin>> plugins_;
  uint64_t next_id_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::plugin
