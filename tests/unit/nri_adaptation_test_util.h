// The fixture of the nri/adaptation tests (nri_adaptation_test.cc,
// nri_start_test.cc): fake plugins in the test's own loop, each a mux trunk
// on a socketpair with the Plugin service served on connection 1 and a
// client of the Runtime service on connection 2, as a stock plugin has
// them; every message through the real codec.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/strings.h"
#include "loop/loop.h"
#include "nri/adaptation.h"
#include "nriproto/codec.h"
#include "test_util.h"
#include "wire/mux.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"

namespace outpost::nri::adaptation_test {

using Handler = std::function<void(std::string_view payload, wire::Responder r)>;

class FakeHost : public Host {
 public:
  void ListState(std::vector<PodSandbox>* p, std::vector<Container>* c) override {
    *p = pods;
    *c = containers;
  }
  Status ApplyUpdate(const std::string& plugin, const ContainerUpdate& u) override {
    log.push_back("update " + u.container_id + " by " + plugin);
    return fail_updates ? Status(Error(Code::kNotFound, "no such container")) : OkStatus();
  }
  void Evict(const std::string& plugin, const ContainerEviction& e) override {
    log.push_back("evict " + e.container_id + " by " + plugin + ": " + e.reason);
  }
  void PluginsChanged() override {}
  std::vector<PodSandbox> pods;
  std::vector<Container> containers;
  std::vector<std::string> log;
  bool fail_updates = false;
};

// A plugin as the Go stub is one, made of outpost's wire pieces.
class FakePlugin {
 public:
  FakePlugin(Loop* loop, UniqueFd fd) : loop_(loop) {
    auto trunk = wire::MuxTrunk::Create(loop, std::move(fd));
    EXPECT_TRUE(trunk.ok());
    trunk_ = std::move(trunk.value());
    wire::ServerOptions so;
    so.allow_any_uid = true;
    auto server = wire::RpcServer::Create(loop, UniqueFd(), so);
    server_ = std::move(server.value());
    EXPECT_TRUE(server_->AddLink(trunk_->Open(kPluginServiceConn), sys::PeerCred{0, 0, 0}).ok());
    auto client = wire::RpcClient::CreateOnLink(loop, trunk_->Open(kRuntimeServiceConn));
    client_ = std::move(client.value());
    trunk_->SetCloseCallback([this](const Error&) { closed = true; });
    EXPECT_TRUE(trunk_->Start().ok());
    // Configure and Synchronize answered like a stub subscribed to `events`.
    Handle("Configure", [this](std::string_view p, wire::Responder r) {
      EXPECT_TRUE(nriproto::Decode(p, &configure).ok());
      ConfigureResponse resp;
      resp.events = static_cast<int32_t>(events);
      r.Reply(nriproto::Encode(resp));
    });
    Handle("Synchronize", [this](std::string_view p, wire::Responder r) {
      SynchronizeRequest req;
      EXPECT_TRUE(nriproto::Decode(p, &req).ok());
      sync_chunks.push_back(req);
      SynchronizeResponse resp;
      resp.more = req.more;
      r.Reply(nriproto::Encode(resp));
    });
  }
  void Handle(const std::string& method, Handler h) {
    server_->Register(kPluginService, method, [this, method, h](const wire::CallContext&, std::string_view p,
                                                                wire::Responder r) {
      calls.push_back(method);
      h(p, r);
    });
  }
  void Register(const std::string& name, const std::string& idx) {
    RegisterPluginRequest req{name, idx, "v0.12.2"};
    client_->Call(kRuntimeService, "RegisterPlugin", nriproto::Encode(req), 5 * kNanosPerSecond,
                  [this](Result<std::string> r) { register_result = r.ok() ? "ok" : r.error().message(); });
  }
  void UpdateContainers(const UpdateContainersRequest& req, std::function<void()> answered = nullptr) {
    client_->Call(kRuntimeService, "UpdateContainers", nriproto::Encode(req), 5 * kNanosPerSecond,
                  [this, answered](Result<std::string> r) {
                    updates_answered = r.ok();
                    if (answered) answered();
                  });
  }
  Loop* loop_;
  std::unique_ptr<wire::MuxTrunk> trunk_;
  std::unique_ptr<wire::RpcServer> server_;
  std::unique_ptr<wire::RpcClient> client_;
  uint32_t events = 0;
  ConfigureRequest configure;
  std::vector<SynchronizeRequest> sync_chunks;
  std::vector<std::string> calls;
  std::string register_result;
  bool updates_answered = false;
  bool closed = false;
};

class NriAdaptation : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_ = testing::MakeLoop();
    config_.enabled = true;
    config_.socket_path = "";
    config_.plugin_dir = "";
    config_.runtime_version = "test";
  }
  void Make() {
    auto a = Adaptation::Create(loop_.get(), config_, &host_);
    ASSERT_TRUE(a.ok());
    a_ = std::move(*a);
    ASSERT_TRUE(a_->Start().ok());
  }
  // A plugin connected (and, with a name, registered and ready).
  // ready_within: a bound, not a pace (5000 containers under ASan on a
  // loaded machine take seconds).
  FakePlugin* Plugin(const std::string& name, const std::string& idx, uint32_t events,
                     int64_t ready_within = 5 * kNanosPerSecond) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    EXPECT_TRUE(a_->AddConnection(UniqueFd(sv[0])).ok());
    plugins_.push_back(std::make_unique<FakePlugin>(loop_.get(), UniqueFd(sv[1])));
    FakePlugin* p = plugins_.back().get();
    p->events = events;
    if (!name.empty()) {
      p->Register(name, idx);
      EXPECT_TRUE(testing::RunUntil(loop_.get(), [&] { return State(name) == "ready"; }, ready_within))
          << name << ": " << State(name);
    }
    return p;
  }
  std::string State(const std::string& name) {
    std::string s;
    for (const PluginInfo& i : a_->List()) {
      if (i.name == name) s = i.state;
    }
    return s;
  }
  PluginInfo Info(const std::string& name) {
    for (const PluginInfo& i : a_->List()) {
      if (i.name == name) return i;
    }
    return {};
  }
  static Container Ctr(const std::string& id) {
    Container c;
    c.id = id;
    c.pod_sandbox_id = "job";
    c.name = id;
    c.env = {"A=1"};
    return c;
  }
  static PodSandbox Pod() {
    PodSandbox p;
    p.id = p.name = p.uid = "job";
    return p;
  }
  Result<CreateOutcome> Create(const std::string& id, bool run_pod = false) {
    std::optional<Result<CreateOutcome>> out;
    a_->CreateContainer(Pod(), Ctr(id), [&](Result<CreateOutcome> r) { out = std::move(r); }, run_pod);
    EXPECT_TRUE(testing::RunUntil(loop_.get(), [&] { return out.has_value(); }));
    return out ? std::move(*out) : Result<CreateOutcome>(Error(Code::kInternal, "no answer"));
  }
  static void Adjust(FakePlugin* p, std::function<void(ContainerAdjustment*)> fill) {
    p->Handle("CreateContainer", [fill](std::string_view, wire::Responder r) {
      CreateContainerResponse resp;
      fill(&resp.adjust.emplace());
      r.Reply(nriproto::Encode(resp));
    });
  }

  std::unique_ptr<Loop> loop_;
  Config config_;
  FakeHost host_;
  std::unique_ptr<Adaptation> a_;
  std::vector<std::unique_ptr<FakePlugin>> plugins_;
};

}  // namespace outpost::nri::adaptation_test
