// A fake NRI runtime for the NRI plugin library's tests: the runtime side
// of a socketpair (the NRI mux, the Runtime service on connection 2, a
// Plugin client on connection 1) with the plugin in a forked child that
// gets the other end, as a runtime-launched plugin does.
#pragma once

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "nriproto/codec.h"
#include "outpost/nri_api.h"
#include "test_util.h"
#include "wire/mux.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"

namespace outpost::testing {

class FakeNriRuntime {
 public:
  FakeNriRuntime() { loop_ = MakeLoop(); }
  ~FakeNriRuntime() {
    Disconnect();
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
  }

  // Forks; the child runs child_main(fd) with fd its end of the socketpair
  // (inheritable) and must not return. Waits for RegisterPlugin.
  void Start(const std::function<void(int fd)>& child_main) {
    ASSERT_TRUE(loop_);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      ::close(sv[0]);
      child_main(::dup(sv[1]));  // without CLOEXEC
      ::_exit(99);
    }
    ::close(sv[1]);
    auto trunk = wire::MuxTrunk::Create(loop_.get(), UniqueFd(sv[0]));
    ASSERT_TRUE(trunk.ok()) << trunk.error().message();
    trunk_ = std::move(*trunk);
    wire::ServerOptions so;
    so.allow_any_uid = true;
    auto srv = wire::RpcServer::Create(loop_.get(), UniqueFd(), so);
    ASSERT_TRUE(srv.ok());
    server_ = std::move(*srv);
    server_->Register(nri::kRuntimeService, "RegisterPlugin",
                      [this](const wire::CallContext&, std::string_view payload, wire::Responder r) {
                        register_frames++;
                        EXPECT_TRUE(nriproto::Decode(payload, &registered).ok());
                        r.Reply("");
                      });
    server_->Register(nri::kRuntimeService, "UpdateContainers",
                      [this](const wire::CallContext&, std::string_view payload, wire::Responder r) {
                        nri::UpdateContainersRequest req;
                        EXPECT_TRUE(nriproto::Decode(payload, &req).ok());
                        updates.push_back(req);
                        r.Reply("");
                      });
    sys::PeerCred me{::getpid(), ::getuid(), ::getgid()};
    auto added = server_->AddLink(trunk_->Open(nri::kRuntimeServiceConn), me);
    ASSERT_TRUE(added.ok());
    auto cli = wire::RpcClient::CreateOnLink(loop_.get(), trunk_->Open(nri::kPluginServiceConn));
    ASSERT_TRUE(cli.ok());
    client_ = std::move(*cli);
    ASSERT_TRUE(trunk_->Start().ok());
    ASSERT_TRUE(RunUntil(loop_.get(), [&] { return register_frames > 0; }, 10 * kNanosPerSecond));
  }

  // One call to the plugin: the reply or the error.
  Result<std::string> Call(const char* method, const std::string& payload,
                           int64_t timeout_nanos = 5 * kNanosPerSecond) {
    if (!client_) return Error(Code::kUnavailable, "not started");
    bool done = false;
    Result<std::string> out = Error(Code::kUnknown, "no reply");
    client_->Call(nri::kPluginService, method, payload, timeout_nanos, [&](Result<std::string> r) {
      out = std::move(r);
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }, 10 * kNanosPerSecond)) << method;
    return out;
  }

  nri::ConfigureResponse Configure() {
    nri::ConfigureRequest req;
    req.runtime_name = "fake";
    req.runtime_version = "v0";
    req.registration_timeout_ms = 5000;
    req.request_timeout_ms = 2000;
    auto r = Call("Configure", nriproto::Encode(req));
    EXPECT_TRUE(r.ok()) << r.error().message();
    nri::ConfigureResponse resp;
    if (r.ok()) {
      EXPECT_TRUE(nriproto::Decode(*r, &resp).ok());
    }
    return resp;
  }

  // Closes the connection as a runtime that goes away.
  void Disconnect() {
    client_.reset();
    server_.reset();
    trunk_.reset();
  }

  // The child's exit code (128 + signal), -1 if it did not end in time.
  int WaitChild() {
    int status = 0;
    bool exited = false;
    EXPECT_TRUE(RunUntil(loop_.get(), [&] {
      exited = ::waitpid(child_, &status, WNOHANG) == child_;
      return exited;
    }, 10 * kNanosPerSecond));
    if (!exited) return -1;
    child_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  Loop* loop() { return loop_.get(); }
  pid_t child() const { return child_; }

  int register_frames = 0;
  nri::RegisterPluginRequest registered;
  std::vector<nri::UpdateContainersRequest> updates;

 private:
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<wire::MuxTrunk> trunk_;
  std::unique_ptr<wire::RpcServer> server_;
  std::unique_ptr<wire::RpcClient> client_;
  pid_t child_ = -1;
};

}  // namespace outpost::testing
