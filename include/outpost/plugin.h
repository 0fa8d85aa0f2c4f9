// outpost plugin library: what a plugin process needs to register with the
// outpost agent on its node and to serve calls. Link build/liboutpost-plugin.a;
// C++17; nothing else is needed at run time (the library is static and
// uses no threads).
//
//   outpost::plugin_sdk::Options o;
//   o.type = "TaskDriver";
//   o.name = "example";
//   o.versions = {"v1"};
//   outpost::plugin_sdk::Plugin p(o);
//   p.Handle("outpost.driver.v1.Driver", "Capabilities", [](const std::string& req, outpost::plugin_sdk::Reply r) {
//     r.Ok(EncodeCapabilities());
//   });
//   return p.Run();  // until SIGTERM or SIGINT
//
// Run creates a socket of its own, <plugins_dir>/<name>-<pid>.sock (so that
// a new instance can start before the old one ends: the agent sends calls to
// the newest), serves outpost's registration service on it
// (pluginregistration.Registration: GetInfo, NotifyRegistrationStatus) and
// every method given to Handle, all on one single-threaded loop, and removes
// its socket when it ends, never another instance's. The protocol is in
// docs/plugins.md, for plugins written in other languages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace outpost::plugin_sdk {

struct Options {
  std::string type;                   // the plugin type, e.g. "TaskDriver"
  std::string name;                   // unique per type on a node: [A-Za-z0-9._-]
  std::vector<std::string> versions;  // supported versions of the type's API, preferred first
  // Where the agent looks for plugin sockets: "" = $OUTPOST_PLUGINS_DIR,
  // else /run/outpost/plugins (the agent's default).
  std::string plugins_dir;
  // Called with each NotifyRegistrationStatus: registered, or the agent's
  // reason for refusing (it tries again by itself, with backoff).
  std::function<void(bool registered, const std::string& error)> on_registration;
};

// gRPC status codes, as ttRPC carries them.
enum class Code : int32_t {
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kFailedPrecondition = 9,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
};

// The answer to one call: exactly one Ok or Fail, at once or later from a
// loop callback (a timer, say). Copies refer to the same call; the first
// answer counts, later ones and answers to a caller that went away are
// dropped.
class Reply {
 public:
  void Ok(const std::string& payload) const;
  void Fail(Code code, const std::string& message) const;
  // False once answered, or when the caller gave up (deadline, closed).
  bool pending() const;

 private:
  friend class Plugin;
  struct State;
  std::shared_ptr<State> state_;
};

// A method: the request's protobuf bytes, and where the answer goes.
using Method = std::function<void(const std::string& request, Reply reply)>;

class Plugin {
 public:
  explicit Plugin(Options options);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // A method of the plugin's own service; call before Run. Calls to a
  // method not given here are answered Unimplemented.
  void Handle(const std::string& service, const std::string& method, Method handler);
  // Runs fn after delay_nanos on the plugin's loop (timers for work that
  // answers later). Usable before and during Run.
  void After(int64_t delay_nanos, std::function<void()> fn);
  // Calls fn(wait status) once child pid has exited, after reaping it
  // (pidfd, or SIGCHLD, on the loop). Only during Run; false if it cannot.
  bool WatchChild(int pid, std::function<void(int status)> fn);
  // Serves until SIGTERM or SIGINT, or Stop(). Returns 0, or 1 after
  // printing why it could not start (bad options, plugins dir missing,
  // socket in use) on stderr. A process forked while it runs (a task)
  // starts with no signal blocked and SIGPIPE at its default, whatever
  // the loop blocks or ignores for itself (a pthread_atfork handler).
  int Run();
  void Stop();
  // The socket Run created ("" before).
  const std::string& socket_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outpost::plugin_sdk
