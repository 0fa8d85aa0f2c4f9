// A Nomad plugin binary as go-plugin's host runs it (docs/nomad-drivers.md).
// Owns: the launch (the host's environment plus go-plugin's magic cookie,
// protocol versions and socket dir; the plugin's args), reading the
// handshake line from its stdout within the start timeout and refusing what
// outpost does not host (net/rpc, AutoMTLS, another core or app protocol
// version), connecting to the socket it names over gRPC, draining its
// stdout afterwards, relaying its stderr (hclog's JSON lines or plain ones)
// into the agent log tagged with its name, watching its exit, and stopping
// it (SIGTERM, then SIGKILL after the grace). Does not own: what is said to
// the plugin over gRPC (driver/nomad/nomad_driver), restarts (the manager).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "wire/grpc_client.h"

namespace outpost::driver::nomad {

// go-plugin's handshake for Nomad (plugins/base/plugin.go).
inline constexpr const char kMagicCookieKey[] = "NOMAD_PLUGIN_MAGIC_COOKIE";
inline constexpr const char kMagicCookieValue[] = "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255";
inline constexpr int kCoreProtocolVersion = 1;
inline constexpr int kAppProtocolVersion = 2;

struct Handshake {
  int core_version = 0;
  int app_version = 0;
  std::string network;  // "unix"
  std::string address;  // the socket path
  std::string protocol;  // "grpc"
};

// Parses the first line a plugin prints (`1|2|unix|/tmp/plugin123|grpc|`).
// Refused, each with a sentence saying why: fewer than 4 fields, a core
// version other than 1, an app version other than 2, a network other than
// unix, net/rpc (no protocol field, or "netrpc"), a server certificate
// (AutoMTLS).
Result<Handshake> ParseHandshake(std::string_view line);

// One line of a plugin's stderr as the agent logs it: hclog's JSON (level,
// message, module and the other keys as fields) or plain text (the level
// from a "[DEBUG]"-style prefix; "panic:" and "fatal error:" at error).
struct StderrLine {
  int level = 0;  // log::Level
  std::string message;
  std::vector<std::pair<std::string, std::string>> fields;
};
StderrLine ParseStderrLine(std::string_view line);

struct PluginProcessOptions {
  std::string path;  // the executable
  std::vector<std::string> args;
  std::string name;        // in log lines (the file name until PluginInfo names it)
  std::string socket_dir;  // PLUGIN_UNIX_SOCKET_DIR: a private dir of the agent's
  int64_t start_timeout_nanos = 60LL * 1000000000;  // go-plugin's StartTimeout
  int64_t stop_grace_nanos = 2LL * 1000000000;      // then SIGKILL, as go-plugin's Kill
};

class PluginProcess {
 public:
  // ready runs once: the connected client, or why the plugin could not be
  // reached (the process is then killed). exited runs once when the
  // process is gone (wait status as from waitpid), after ready.
  using ReadyFn = std::function<void(Result<std::unique_ptr<wire::GrpcClient>>)>;
  using ExitFn = std::function<void(int wait_status)>;

  static Result<std::unique_ptr<PluginProcess>> Launch(Loop* loop, PluginProcessOptions options, ReadyFn ready,
                                                       ExitFn exited);
  // Kills a process still running (SIGKILL) and reaps it.
  ~PluginProcess();
  PluginProcess(const PluginProcess&) = delete;
  PluginProcess& operator=(const PluginProcess&) = delete;

  // SIGTERM (go-plugin's plugins ignore SIGINT), SIGKILL after the grace;
  // exited runs when it is gone. The caller asks GRPCController/Shutdown
  // first where it can.
  void Stop();
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  void set_name(std::string name) { opts_.name = std::move(name); }
  const std::string& name() const { return opts_.name; }

 private:
  PluginProcess(Loop* loop, PluginProcessOptions options) : loop_(loop), opts_(std::move(options)) {}
  void OnStdout();
  void OnStderr();
  void OnHandshakeLine(const std::string& line);
  void Ready(Result<std::unique_ptr<wire::GrpcClient>> r);
  void OnExit(int wait_status);
  void RelayStderr(std::string_view line);

  Loop* loop_;
  PluginProcessOptions opts_;
  pid_t pid_ = 0;
  LoopFd stdout_;
  LoopFd stderr_;
  std::string stdout_partial_;
  std::string stderr_partial_;
  bool handshaken_ = false;
  ReadyFn ready_;
  ExitFn exited_;
  Loop::TimerId start_timer_ = 0;
  Loop::TimerId kill_timer_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::driver::nomad
