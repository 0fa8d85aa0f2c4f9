// The adaptation's plugins: accepting external connections, registration,
// Configure, Synchronize (split when too large), the ready list, closing,
// unsolicited updates and required plugins. Events are in
// adaptation_events.cc.
#include "nri/adaptation.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "nri/launcher.h"
#include "nri/plugin.h"
#include "nriproto/codec.h"
#include "wire/rpc_server.h"

namespace outpost::nri {

namespace {

// The largest Synchronize payload sent in one request: the ttRPC Request
// around it (service, method, timeout) must stay within 4 MiB.
constexpr size_t kMaxSyncPayload = (4u << 20) - 1024;
// A split Synchronize gives up below this many objects per chunk.
constexpr size_t kMinSyncChunk = 8;

// Go's %q for the names in upstream's messages.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

Status CheckPluginName(const std::string& name) {
  if (name.empty()) return Error(Code::kInvalidArgument, "invalid plugin name: name is empty");
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.' || c == '+';
    if (!ok) {
      return Error(Code::kInvalidArgument,
                   Format("invalid plugin name %s: contains invalid character '%c'", Quote(name).c_str(), c));
    }
  }
  return OkStatus();
}

Status CheckPluginIndex(const std::string& index) {
  if (index.size() != 2) {
    return Error(Code::kInvalidArgument, Format("invalid plugin index %s, must be 2 digits", Quote(index).c_str()));
  }
  if (index[0] < '0' || index[0] > '9' || index[1] < '0' || index[1] > '9') {
    return Error(Code::kInvalidArgument, Format("invalid plugin index %s (not [0-9][0-9])", Quote(index).c_str()));
  }
  return OkStatus();
}

Status ParsePluginFileName(const std::string& file, std::string* index, std::string* name) {
  size_t dash = file.find('-');
  if (dash == std::string::npos) {
    return Error(Code::kInvalidArgument,
                 Format("invalid plugin name %s, idx-pluginname expected", Quote(file).c_str()));
  }
  OUTPOST_RETURN_IF_ERROR(CheckPluginIndex(file.substr(0, dash)));
  *index = file.substr(0, dash);
  *name = file.substr(dash + 1);
  return OkStatus();
}

Adaptation::Adaptation(Loop* loop, Config config, Host* host) : loop_(loop), config_(std::move(config)), host_(host) {}

Adaptation::~Adaptation() {
  *alive_ = false;
  Stop();
}

Result<std::unique_ptr<Adaptation>> Adaptation::Create(Loop* loop, Config config, Host* host) {
  std::unique_ptr<Adaptation> a(new Adaptation(loop, std::move(config), host));
  wire::ServerOptions so;
  so.name = "nri";
  so.allow_any_uid = true;  // the socket's permissions are the protection, as upstream
  so.idle_timeout_nanos = 0;
  auto server = wire::RpcServer::Create(loop, UniqueFd(), so);
  if (!server.ok()) return server.error();
  a->runtime_server_ = std::move(*server);
  Adaptation* raw = a.get();
  a->runtime_server_->Register(kRuntimeService, "RegisterPlugin",
                               [raw](const wire::CallContext& ctx, std::string_view payload, wire::Responder r) {
                                 PluginConn* p = raw->FindByConnection(ctx.connection_id);
                                 if (!p) return r.Fail(Error(Code::kFailedPrecondition, "unknown connection"));
                                 RegisterPluginRequest req;
                                 Status st = nriproto::Decode(payload, &req);
                                 if (!st.ok()) return r.Fail(st.error());
                                 raw->OnRegister(p, req, [r](Status s) {
                                   if (s.ok()) {
                                     r.Reply("");
                                   } else {
                                     // A Go handler's plain error: status Unknown.
                                     r.Fail(Error(Code::kUnknown, s.error().message()));
                                   }
                                 });
                               });
  a->runtime_server_->Register(
      kRuntimeService, "UpdateContainers",
      [raw](const wire::CallContext& ctx, std::string_view payload, wire::Responder r) {
        PluginConn* p = raw->FindByConnection(ctx.connection_id);
        // Any time after registration; what arrives during the plugin's own
        // Synchronize (or any event) is applied once that is done.
        if (!p || p->state == PluginState::kRegistering) {
          return r.Fail(Error(Code::kFailedPrecondition, "plugin is not registered"));
        }
        UpdateContainersRequest req;
        Status st = nriproto::Decode(payload, &req);
        if (!st.ok()) return r.Fail(st.error());
        raw->OnUpdateContainers(p, req, [r](UpdateContainersResponse resp) { r.Reply(nriproto::Encode(resp)); });
      });
  a->launcher_ = std::make_unique<Launcher>(a.get());
  return a;
}

Status Adaptation::Start() {
  if (!config_.socket_path.empty()) {
    const std::string dir = sys::Dirname(config_.socket_path);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) {
      if (errno != ENOENT) return PathError("stat", dir);
      OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(dir, 0700));
    }
    if (::unlink(config_.socket_path.c_str()) != 0 && errno != ENOENT) {
      return PathError("remove stale socket", config_.socket_path);
    }
    auto fd = sys::UnixListen(config_.socket_path, 64);
    if (!fd.ok()) return fd.error().Wrap("nri socket");
    if (::chmod(config_.socket_path.c_str(), 0600) != 0) return PathError("chmod", config_.socket_path);
    Adaptation* raw = this;
    auto watched = LoopFd::Watch(loop_, std::move(*fd), EPOLLIN, [raw](uint32_t) { raw->OnAcceptable(); });
    if (!watched.ok()) return watched.error();
    listen_ = std::move(*watched);
    log::Info("nri: listening for external plugins", {{"socket", config_.socket_path}});
  }
  if (!config_.plugin_dir.empty()) launcher_->Start();
  return OkStatus();
}

void Adaptation::Stop() {
  if (listen_) {
    listen_.Reset();
    if (!config_.socket_path.empty()) ::unlink(config_.socket_path.c_str());
  }
  if (launcher_) launcher_->Stop();
  for (auto& p : plugins_) {
    if (!p->closed()) p->Close("runtime stopping");
  }
  plugins_.clear();
}

void Adaptation::OnAcceptable() {
  for (int i = 0; i < 16; ++i) {
    auto fd = sys::Accept(listen_.get());
    if (!fd.ok()) {
      if (fd.error().sys_errno() != EAGAIN && fd.error().sys_errno() != EWOULDBLOCK) {
        log::Warn("nri: accept failed", {{"error", fd.error().message()}});
      }
      return;
    }
    Status st = AddConnection(std::move(*fd));
    if (!st.ok()) log::Warn("nri: cannot serve plugin connection", {{"error", st.error().message()}});
  }
}

Status Adaptation::AddConnection(UniqueFd fd, const std::string& source) {
  (void)source;
  auto p = PluginConn::Create(this, next_plugin_++, std::move(fd), false, "", "");
  if (!p.ok()) return p.error();
  PluginConn* raw = p->get();
  std::weak_ptr<bool> alive = alive_;
  uint64_t id = raw->id;
  raw->registration_timer = loop_->AddTimer(config_.registration_timeout_ms * 1000000, [this, alive, id] {
    if (!alive.lock()) return;
    for (auto& q : plugins_) {
      if (q->id == id) {
        q->registration_timer = 0;
        if (q->state == PluginState::kRegistering) q->Close("plugin registration timed out");
      }
    }
  });
  plugins_.push_back(std::move(*p));
  return OkStatus();
}

PluginConn* Adaptation::FindByConnection(uint64_t conn_id) const {
  for (const auto& p : plugins_) {
    if (p->server_conn == conn_id && !p->closed()) return p.get();
  }
  return nullptr;
}

void Adaptation::OnRegister(PluginConn* p, const RegisterPluginRequest& req, std::function<void(Status)> reply) {
  if (p->state != PluginState::kRegistering) {
    return reply(Error(Code::kFailedPrecondition, "plugin " + p->Id() + " is already registered"));
  }
  if (!p->launched) {
    Status st = CheckPluginName(req.plugin_name);
    if (st.ok()) st = CheckPluginIndex(req.plugin_idx);
    if (!st.ok()) {
      log::Warn("nri: plugin registration refused", {{"error", st.error().message()}});
      reply(st);
      uint64_t id = p->id;
      std::weak_ptr<bool> alive = alive_;
      // Closed once the refusal is on its way.
      loop_->Defer([this, alive, id, why = st.error().message()] {
        if (!alive.lock()) return;
        for (auto& q : plugins_) {
          if (q->id == id) q->Close("registration refused: " + why);
        }
      });
      return;
    }
    p->name = req.plugin_name;
    p->index = req.plugin_idx;
  }
  p->nri_version = req.nri_version;
  if (p->registration_timer) {
    loop_->CancelTimer(p->registration_timer);
    p->registration_timer = 0;
  }
  p->state = PluginState::kConfiguring;
  log::Info("nri: plugin registered", {{"plugin", p->Id()},
                                        {"source", p->launched ? "launched" : "external"},
                                        {"nri_version", req.nri_version.empty() ? "unknown" : req.nri_version}});
  reply(OkStatus());
  // Configure goes out after the registration's answer, as from a Go
  // runtime (the answer leaves when the server's batch is flushed); the
  // plugin's closed connection, if any, goes then too (not from inside
  // the Runtime server's dispatch).
  uint64_t id = p->id;
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([this, alive, id] {
    if (!alive.lock()) return;
    for (auto& q : plugins_) {
      if (q->id != id || q->state != PluginState::kConfiguring) continue;
      PluginConn* fresh = q.get();
      TakeOver(fresh);  // may erase entries: q is not used after it
      Configure(fresh);
      return;
    }
  });
}

void Adaptation::Configure(PluginConn* p) {
  ConfigureRequest req;
  req.config = p->config;
  req.runtime_name = config_.runtime_name;
  req.runtime_version = config_.runtime_version;
  req.registration_timeout_ms = config_.registration_timeout_ms;
  req.request_timeout_ms = TimeoutMs(p->name);
  req.nri_version = kNriVersion;
  uint64_t id = p->id;
  std::weak_ptr<bool> alive = alive_;
  p->Call("Configure", nriproto::Encode(req), [this, alive, id, p](Result<std::string> r) {
    if (!alive.lock() || p->closed()) return;
    (void)id;
    if (!r.ok()) return p->Close("Configure failed: " + r.error().message());
    ConfigureResponse resp;
    Status st = nriproto::Decode(*r, &resp);
    if (!st.ok()) return p->Close("Configure: " + st.error().message());
    uint32_t events = static_cast<uint32_t>(resp.events);
    if (events == 0) events = kValidEvents;
    if ((events & ~kValidEvents) != 0) return p->Close(Format("invalid plugin events: 0x%x", events));
    p->events = events;
    p->state = PluginState::kSynchronizing;
    Enqueue([this, alive, p, id](std::function<void()> finished) {
      if (!alive.lock()) return;
      // Still there and not closed meanwhile?
      bool found = false;
      for (auto& q : plugins_) found = found || (q.get() == p && q->id == id && !q->closed());
      if (!found) return finished();
      Synchronize(p, std::move(finished));
    });
  });
}

void Adaptation::Synchronize(PluginConn* p, std::function<void()> finished) {
  auto all = std::make_shared<SynchronizeRequest>();
  host_->ListState(&all->pods, &all->containers);
  SyncChunk(p, std::move(all), 0, 0, 1.0, std::move(finished));
}

void Adaptation::SyncChunk(PluginConn* p, std::shared_ptr<SynchronizeRequest> all, size_t pod_at, size_t ctr_at,
                           double scale, std::function<void()> finished) {
  const size_t pods_left = all->pods.size() - pod_at;
  const size_t ctrs_left = all->containers.size() - ctr_at;
  SynchronizeRequest chunk;
  std::string payload;
  for (;;) {
    size_t np = scale >= 1.0 ? pods_left : static_cast<size_t>(static_cast<double>(pods_left) * scale);
    size_t nc = scale >= 1.0 ? ctrs_left : static_cast<size_t>(static_cast<double>(ctrs_left) * scale);
    if (scale < 1.0 && np + nc < kMinSyncChunk) {
      np = std::min(pods_left, kMinSyncChunk);
      nc = std::min(ctrs_left, kMinSyncChunk - np);
    }
    chunk.pods.assign(all->pods.begin() + pod_at, all->pods.begin() + pod_at + np);
    chunk.containers.assign(all->containers.begin() + ctr_at, all->containers.begin() + ctr_at + nc);
    chunk.more = np < pods_left || nc < ctrs_left;
    payload = nriproto::Encode(chunk);
    if (payload.size() <= kMaxSyncPayload) break;
    if (np + nc <= kMinSyncChunk) {
      p->Close("failed to synchronize plugin with split messages");
      return finished();
    }
    scale *= std::min(0.9, static_cast<double>(kMaxSyncPayload) / static_cast<double>(payload.size()));
  }
  const size_t next_pod = pod_at + chunk.pods.size();
  const size_t next_ctr = ctr_at + chunk.containers.size();
  const bool more = chunk.more;
  std::weak_ptr<bool> alive = alive_;
  p->Call("Synchronize", payload,
          [this, alive, p, all, next_pod, next_ctr, more, scale, finished](Result<std::string> r) {
            if (!alive.lock()) return;
            if (p->closed()) return finished();
            if (!r.ok()) {
              p->Close("Synchronize failed: " + r.error().message());
              return finished();
            }
            SynchronizeResponse resp;
            Status st = nriproto::Decode(*r, &resp);
            if (!st.ok()) {
              p->Close("Synchronize: " + st.error().message());
              return finished();
            }
            if (resp.more != more || (more && !resp.update.empty())) {
              p->Close("plugin does not handle split sync requests");
              return finished();
            }
            if (more) return SyncChunk(p, all, next_pod, next_ctr, scale, finished);
            std::vector<ContainerUpdate> failed;
            ApplyOtherUpdates(p->Id(), resp.update, &failed);
            for (const auto& f : failed) {
              log::Warn("nri: update from Synchronize failed", {{"plugin", p->Id()}, {"container", f.container_id}});
            }
            MakeReady(p);
            finished();
          });
}

void Adaptation::MakeReady(PluginConn* p) {
  p->state = PluginState::kReady;
  // Ready plugins first, sorted by index then name; the rest keep their order.
  std::stable_sort(plugins_.begin(), plugins_.end(), [](const auto& a, const auto& b) {
    if (a->index != b->index) return a->index < b->index;
    return a->name < b->name;
  });
  log::Info("nri: plugin ready", {{"plugin", p->Id()}, {"events", Format("0x%x", p->events)}});
  if (p->launched) launcher_->OnReady(p->index + "-" + p->name);
  CheckWaiters();
  host_->PluginsChanged();
}

void Adaptation::OnPluginClosed(PluginConn* p, const std::string& why) {
  log::Warn("nri: closing plugin", {{"plugin", p->Id()}, {"reason", why}});
  if (p->launched) launcher_->OnClosed(p->index + "-" + p->name, why);
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([this, alive] {
    if (alive.lock()) RemoveClosed();
  });
  host_->PluginsChanged();
}

void Adaptation::RemoveClosed() {
  // A closed connection stays listed (state "closed", with the reason)
  // until the plugin connects again (TakeOver); at most a few are kept.
  size_t closed = 0;
  for (const auto& q : plugins_) closed += q->closed();
  while (closed > 16) {
    auto it = std::find_if(plugins_.begin(), plugins_.end(), [](const auto& q) { return q->closed(); });
    plugins_.erase(it);
    --closed;
  }
}

void Adaptation::TakeOver(PluginConn* fresh) {
  for (auto it = plugins_.begin(); it != plugins_.end();) {
    const PluginConn* old = it->get();
    if (old == fresh || !old->closed() || old->launched != fresh->launched || old->index != fresh->index ||
        old->name != fresh->name) {
      ++it;
      continue;
    }
    fresh->restarts += old->restarts + 1;
    fresh->requests += old->requests;
    fresh->failures += old->failures;
    if (fresh->last_error.empty()) fresh->last_error = old->last_error;
    it = plugins_.erase(it);
  }
}

bool Adaptation::IsRequired(const std::string& name) const {
  return std::find(config_.required_plugins.begin(), config_.required_plugins.end(), name) !=
         config_.required_plugins.end();
}

std::vector<PluginConn*> Adaptation::Ordered(Event e) const {
  std::vector<PluginConn*> out;
  for (const auto& p : plugins_) {
    if (p->state == PluginState::kReady && p->Subscribed(e)) out.push_back(p.get());
  }
  return out;
}

int64_t Adaptation::TimeoutMs(const std::string& name) const {
  auto it = config_.plugins.find(name);
  if (it != config_.plugins.end() && it->second.request_timeout_ms > 0) return it->second.request_timeout_ms;
  return config_.request_timeout_ms;
}

FailPolicy Adaptation::PolicyOf(const std::string& name) const {
  auto it = config_.plugins.find(name);
  return it == config_.plugins.end() ? FailPolicy::kIgnore : it->second.fail_policy;
}

void Adaptation::OnUpdateContainers(PluginConn* p, const UpdateContainersRequest& req,
                                    std::function<void(UpdateContainersResponse)> reply) {
  // Applied between events, never inside one. One that arrives during an
  // event is answered at once (nothing failed yet) and applied after it: a
  // plugin that waits for this answer before answering the event (the
  // event waits for it) must not deadlock until its timeout. Failures of
  // such a deferred update are logged with the plugin's name instead.
  std::string plugin = p->Id();
  std::weak_ptr<bool> alive = alive_;
  const bool deferred = busy_;
  if (deferred) reply(UpdateContainersResponse());
  Enqueue([this, alive, plugin, req, deferred, reply = std::move(reply)](std::function<void()> finished) {
    if (!alive.lock()) return;
    UpdateContainersResponse resp;
    ApplyOtherUpdates(plugin, req.update, &resp.failed);
    for (const auto& e : req.evict) host_->Evict(plugin, e);
    if (!deferred) reply(std::move(resp));
    finished();
  });
}

void Adaptation::ApplyOtherUpdates(const std::string& plugin, const std::vector<ContainerUpdate>& updates,
                                   std::vector<ContainerUpdate>* failed) {
  for (const auto& u : updates) {
    Status st = host_->ApplyUpdate(plugin, u);
    if (!st.ok()) {
      log::Warn("nri: container update failed",
                {{"plugin", plugin}, {"container", u.container_id}, {"error", st.error().message()}});
      if (!u.ignore_failure) failed->push_back(u);
    }
  }
}

void Adaptation::ApplyMerged(const std::vector<ContainerUpdate>& updates,
                             const std::map<std::string, std::string>& who) {
  for (const auto& u : updates) {
    auto it = who.find(u.container_id);
    std::vector<ContainerUpdate> failed;
    ApplyOtherUpdates(it == who.end() ? "?" : it->second, {u}, &failed);
  }
}

std::string Adaptation::MissingRequired() const {
  std::string missing;
  for (const auto& name : config_.required_plugins) {
    bool ready = false;
    for (const auto& p : plugins_) ready = ready || (p->state == PluginState::kReady && p->name == name);
    if (!ready) missing += (missing.empty() ? "" : ", ") + name;
  }
  return missing;
}

uint64_t Adaptation::WaitForRequired(std::function<void()> cb) {
  uint64_t id = next_waiter_++;
  waiters_.emplace(id, std::move(cb));
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([this, alive] {
    if (alive.lock()) CheckWaiters();
  });
  return id;
}

void Adaptation::CancelWait(uint64_t id) { waiters_.erase(id); }

void Adaptation::CheckWaiters() {
  if (waiters_.empty() || !MissingRequired().empty()) return;
  auto ready = std::move(waiters_);
  waiters_.clear();
  for (auto& [id, cb] : ready) cb();
}

std::vector<PluginInfo> Adaptation::List() const {
  std::vector<PluginInfo> out;
  for (const auto& p : plugins_) {
    PluginInfo i = p->Info();
    i.required = IsRequired(p->name);
    out.push_back(std::move(i));
  }
  return out;
}

std::vector<std::string> Adaptation::Problems() const { return launcher_->Problems(); }

bool Adaptation::Wants(Event e) const {
  for (const auto& p : plugins_) {
    if (p->state == PluginState::kReady && p->Subscribed(e)) return true;
  }
  return false;
}

bool Adaptation::active() const {
  if (!config_.required_plugins.empty()) return true;
  for (const auto& p : plugins_) {
    if (!p->closed()) return true;
  }
  return false;
}

}  // namespace outpost::nri
