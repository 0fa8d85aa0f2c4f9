// The NRI plugin library's private state (include/outpost/nri.h), shared
// by its connection side (nri_stub.cc) and its request dispatch
// (nri_dispatch.cc). Not part of the public API; nothing outside
// src/sdk/nri_*.cc includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "outpost/nri.h"
#include "wire/mux.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"

namespace outpost::nri {

struct Stub::Reply::State {
  wire::Responder responder;
};

struct Stub::Impl {
  Stub* self = nullptr;
  StubOptions options;
  std::string name, index;
  std::string identity_error;  // from ResolveIdentity: Run fails with it
  ConfigureRequest runtime;
  uint32_t events = 0;

  // Declared first: destroyed last (everything below runs on it).
  std::unique_ptr<Loop> loop;
  std::unique_ptr<wire::MuxTrunk> trunk;
  std::unique_ptr<wire::RpcServer> server;
  std::unique_ptr<wire::RpcClient> client;
  std::vector<std::pair<int64_t, std::function<void()>>> early_timers;

  bool finished = false;        // Run is ending (exit_code is final)
  bool stop_requested = false;  // Stop() or a signal
  int exit_code = 0;
  bool registered = false;
  bool configured = false;

  // Split Synchronize: the requests with more=true so far.
  SynchronizeRequest sync_pending;
  bool sync_buffered = false;

  // The request being handled (for TakeReply), and whether it was taken.
  const wire::Responder* current = nullptr;
  bool reply_taken = false;

  void Log(const std::string& msg) const;
  void Finish(int code, const std::string& why);
  void Lost(const std::string& why);
  Result<UniqueFd> ConnectFd();
  Status Connect();
  void Register();
  void Reset();

  // nri_dispatch.cc: the Plugin service's methods on server.
  void RegisterMethods();
  bool Subscribed(Event e) const { return events == 0 || (events & EventMask(e)) != 0; }
  // Runs fn (which answers with an encoded message or an error) as the
  // handler of method, with TakeReply support.
  using Body = std::function<Result<std::string>(std::string_view payload)>;
  void Serve(const char* method, Body fn);
};

}  // namespace outpost::nri
