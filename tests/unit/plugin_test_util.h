// A plugin process, simulated on the test's own loop, for the plugin/ and
// driver/remote tests: a listening socket it accepts on itself (so Drop can
// close every connection while the socket stays), the registration service
// answering with its type, name, endpoint and versions, and any methods of
// its own service.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/pb.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "plugin/watcher.h"
#include "pluginregistration.pb.h"
#include "wire/rpc_server.h"

namespace outpost::testing {

using plugin::kRegistrationService;

// A plugin process, simulated: listens on its socket, accepts connections
// itself (so that Drop can close every connection while the socket stays)
// and serves the registration service.
class FakePlugin {
 public:
  std::string type = "TestPlugin";
  std::string name;
  std::string endpoint;  // what GetInfo says ("" = this socket)
  std::vector<std::string> versions = {"v1"};
  std::vector<std::pair<bool, std::string>> notified;
  std::vector<int64_t> getinfo_mono;  // when each GetInfo arrived
  int open_connections() const { return server_ ? static_cast<int>(server_->connection_count()) : 0; }

  static std::unique_ptr<FakePlugin> Serve(Loop* loop, const std::string& path, const std::string& name) {
    std::unique_ptr<FakePlugin> p(new FakePlugin(loop));
    p->name = name;
    p->path_ = path;
    auto fd = sys::UnixListen(path, 64);
    EXPECT_TRUE(fd.ok()) << path << ": " << (fd.ok() ? "" : fd.error().message());
    if (!fd.ok()) return nullptr;
    FakePlugin* self = p.get();
    auto lfd = LoopFd::Watch(loop, std::move(*fd), EPOLLIN, [self](uint32_t) { self->AcceptAll(); });
    EXPECT_TRUE(lfd.ok());
    p->listen_ = std::move(*lfd);
    p->NewServer();
    return p;
  }

  // A method of the plugin's own service, on every server it makes.
  void Handle(const std::string& service, const std::string& method, wire::Handler h) {
    extra_.emplace_back(service, method, h);
    if (server_) server_->Register(service, method, h);
  }
  // Every connection closes; the socket stays and accepts again.
  void Drop() { NewServer(); }
  // The plugin exits: connections close and (remove) its socket goes.
  void Exit(bool remove) {
    server_.reset();
    listen_ = LoopFd();
    if (remove) ::unlink(path_.c_str());
  }

 private:
  explicit FakePlugin(Loop* loop) : loop_(loop) {}

  void NewServer() {
    wire::ServerOptions o;
    o.name = "fake plugin";
    o.idle_timeout_nanos = 0;
    auto s = wire::RpcServer::Create(loop_, UniqueFd(), o);
    ASSERT_TRUE(s.ok());
    server_ = std::move(*s);
    server_->Register(kRegistrationService, "GetInfo",
                      [this](const wire::CallContext&, std::string_view, wire::Responder r) {
                        getinfo_mono.push_back(MonotonicNanos());
                        std::vector<char*> vs;
                        for (const std::string& v : versions) vs.push_back(PbStr(v));
                        pluginregistration_PluginInfo m = pluginregistration_PluginInfo_init_zero;
                        m.type = PbStr(type);
                        m.name = PbStr(name);
                        m.endpoint = PbStr(endpoint);
                        m.supported_versions_count = static_cast<pb_size_t>(vs.size());
                        m.supported_versions = vs.data();
                        r.Finish(PbEncode(pluginregistration_PluginInfo_fields, &m, "PluginInfo"));
                      });
    server_->Register(kRegistrationService, "NotifyRegistrationStatus",
                      [this](const wire::CallContext&, std::string_view payload, wire::Responder r) {
                        PbOwned<pluginregistration_RegistrationStatus> m(pluginregistration_RegistrationStatus_fields);
                        Status st = m.Decode(payload, "RegistrationStatus");
                        EXPECT_TRUE(st.ok());
                        notified.emplace_back(m->plugin_registered, PbString(m->error));
                        r.Reply("");
                      });
    RegisterExtra();
  }

  void RegisterExtra() {
    for (auto& [service, method, h] : extra_) server_->Register(service, method, h);
  }

  void AcceptAll() {
    for (;;) {
      auto fd = sys::Accept(listen_.get());
      if (!fd.ok()) return;
      if (server_) (void)server_->AddConnection(std::move(*fd));
    }
  }

  Loop* loop_;
  std::string path_;
  LoopFd listen_;
  std::unique_ptr<wire::RpcServer> server_;
  std::vector<std::tuple<std::string, std::string, wire::Handler>> extra_;
};

}  // namespace outpost::testing
