#include "nri/plugin.h"

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "wire/mux.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"

namespace outpost::nri {

const char* PluginStateName(PluginState s) {
  switch (s) {
    case PluginState::kRegistering: return "registering";
    case PluginState::kConfiguring: return "configuring";
    case PluginState::kSynchronizing: return "synchronizing";
    case PluginState::kReady: return "ready";
    case PluginState::kClosed: return "closed";
  }
  return "?";
}

PluginConn::PluginConn(Adaptation* owner, uint64_t number, bool from_dir)
    : id(number), launched(from_dir), owner_(owner) {}

PluginConn::~PluginConn() {
  *alive_ = false;
  if (registration_timer) owner_->loop_->CancelTimer(registration_timer);
}

Result<std::unique_ptr<PluginConn>> PluginConn::Create(Adaptation* owner, uint64_t id, UniqueFd fd, bool launched,
                                                       const std::string& launched_index,
                                                       const std::string& launched_name) {
  std::unique_ptr<PluginConn> p(new PluginConn(owner, id, launched));
  p->connected_unix_nanos = WallNanos();
  if (launched) {
    p->index = launched_index;
    p->name = launched_name;
  }
  sys::PeerCred peer{};
  if (auto cred = sys::GetPeerCred(fd.get()); cred.ok()) peer = *cred;
  p->peer_pid = peer.pid;
  wire::MuxOptions mo;
  mo.name = "nri";
  auto trunk = wire::MuxTrunk::Create(owner->loop_, std::move(fd), mo);
  if (!trunk.ok()) return trunk.error();
  p->trunk_ = std::move(*trunk);
  wire::ClientOptions co;
  co.name = "nri-plugin";
  auto client = wire::RpcClient::CreateOnLink(owner->loop_, p->trunk_->Open(kPluginServiceConn), co);
  if (!client.ok()) return client.error();
  p->client_ = std::move(*client);
  auto conn = owner->runtime_server_->AddLink(p->trunk_->Open(kRuntimeServiceConn), peer);
  if (!conn.ok()) return conn.error();
  p->server_conn = *conn;
  PluginConn* raw = p.get();
  std::weak_ptr<bool> alive = p->alive_;
  p->trunk_->SetCloseCallback([raw, alive](const Error& why) {
    if (alive.lock()) raw->OnTrunkClosed(why);
  });
  OUTPOST_RETURN_IF_ERROR(p->trunk_->Start());
  return p;
}

std::string PluginConn::Id() const { return index.empty() ? "?" : PluginId(index, name); }

void PluginConn::OnTrunkClosed(const Error& why) {
  if (state == PluginState::kClosed) return;
  Close("connection closed: " + why.message());
}

void PluginConn::Close(const std::string& why) {
  if (state == PluginState::kClosed) return;
  state = PluginState::kClosed;
  close_reason = why;
  last_error = why;
  if (registration_timer) {
    owner_->loop_->CancelTimer(registration_timer);
    registration_timer = 0;
  }
  // Pending calls fail (Unavailable) from inside Close; they see closed().
  std::shared_ptr<bool> alive = alive_;
  if (client_) client_->Close();
  if (!*alive) return;
  if (trunk_) trunk_->Close();
  owner_->OnPluginClosed(this, why);
}

void PluginConn::Call(const char* method, const std::string& payload, std::function<void(Result<std::string>)> done,
                      bool probe) {
  if (closed()) {
    done(Error(Code::kUnavailable, "plugin " + Id() + " is closed: " + close_reason));
    return;
  }
  ++requests;
  int64_t timeout_ms = owner_->TimeoutMs(name);
  std::weak_ptr<bool> alive = alive_;
  std::string m = method;
  client_->Call(kPluginService, method, payload, timeout_ms * 1000000,
                [this, alive, m, timeout_ms, probe, done = std::move(done)](Result<std::string> r) {
                  if (!alive.lock()) return done(Error(Code::kUnavailable, "plugin is gone"));
                  if (!r.ok() && !(probe && r.error().code() == Code::kUnimplemented)) {
                    ++failures;
                    last_error = m + ": " + r.error().message();
                    if (r.error().code() == Code::kDeadlineExceeded) {
                      Close(Format("%s timed out after %lld ms", m.c_str(), static_cast<long long>(timeout_ms)));
                      return done(Error(Code::kDeadlineExceeded,
                                        Format("timed out after %lld ms", static_cast<long long>(timeout_ms))));
                    }
                    if (r.error().code() == Code::kUnavailable && !closed()) {
                      Close(r.error().message());
                    }
                  }
                  done(std::move(r));
                });
}

PluginInfo PluginConn::Info() const {
  PluginInfo i;
  i.index = index;
  i.name = name;
  i.source = launched ? "launched" : "external";
  i.state = PluginStateName(state);
  i.events = events;
  i.pid = peer_pid;
  i.nri_version = nri_version;
  i.state_change = state_change;
  i.connected_unix_nanos = connected_unix_nanos;
  i.restarts = restarts;
  i.requests = requests;
  i.failures = failures;
  i.last_error = last_error;
  i.request_timeout_ms = owner_->TimeoutMs(name);
  i.fail_policy = owner_->PolicyOf(name) == FailPolicy::kFail ? "fail" : "ignore";
  return i;
}

}  // namespace outpost::nri
