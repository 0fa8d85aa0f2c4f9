#include "plugin/registry.h"

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::plugin {

namespace {

// A connection that lasted this long before it dropped is reconnected at
// once; one that drops sooner goes on with the backoff (a plugin that
// accepts and closes at once must not make the agent spin).
constexpr int64_t kStableNanos = 1000LL * 1000000;

std::string UidList(const std::vector<uid_t>& uids) {
  std::string s;
  for (size_t i = 0; i < uids.size(); ++i) {
    if (std::find(uids.begin(), uids.begin() + static_cast<long>(i), uids[i]) != uids.begin() + static_cast<long>(i)) {
      continue;
    }
    s += (s.empty() ? "" : ", ") + std::to_string(uids[i]);
  }
  return s;
}

}  // namespace

Result<UniqueFd> ConnectToPlugin(const std::string& path, const std::vector<uid_t>& allowed_uids) {
  auto fd = sys::UnixConnect(path, true);
  if (!fd.ok()) return fd.error();
  auto cred = sys::GetPeerCred(fd->get());
  if (!cred.ok()) return cred.error().Wrap(path);
  if (std::find(allowed_uids.begin(), allowed_uids.end(), cred->uid) == allowed_uids.end()) {
    return Error(Code::kPermissionDenied,
                 Format("%s is served by uid %u (pid %d); only uid %s may serve plugins", path.c_str(),
                        static_cast<unsigned>(cred->uid), static_cast<int>(cred->pid),
                        UidList(allowed_uids).c_str()));
  }
  return std::move(*fd);
}

struct Registry::Conn {
  Instance inst;
  std::unique_ptr<PluginConn> client;
  int64_t connected_mono = 0;
  int64_t backoff_nanos = 0;  // before the next reconnect; 0 = at once
  Loop::TimerId reconnect_timer = 0;
  std::string last_error;
};

struct Registry::Plugin {
  std::string type;
  std::string name;
  std::vector<std::unique_ptr<Conn>> conns;  // registration order
  Loop::TimerId grace_timer = 0;
  int64_t expires_unix_nanos = 0;
  std::string last_error;
};

Registry::Registry(Loop* loop, RegistryOptions options) : loop_(loop), options_(std::move(options)) {}

Registry::~Registry() {
  *alive_ = false;
  for (auto& [key, p] : plugins_) {
    if (p->grace_timer) loop_->CancelTimer(p->grace_timer);
    for (auto& c : p->conns) {
      if (c->reconnect_timer) loop_->CancelTimer(c->reconnect_timer);
    }
  }
}

Status Registry::AddHandler(Handler* handler) {
  if (!handlers_.emplace(handler->type(), handler).second) {
    return Error(Code::kAlreadyExists, Format("plugin type %s already has a handler", handler->type()));
  }
  return OkStatus();
}

Handler* Registry::HandlerFor(const std::string& type) const {
  auto it = handlers_.find(type);
  return it == handlers_.end() ? nullptr : it->second;
}

std::vector<std::string> Registry::Types() const {
  std::vector<std::string> out;
  for (const auto& [t, h] : handlers_) out.push_back(t);
  return out;
}

Registry::Plugin* Registry::FindPlugin(const std::string& type, const std::string& name) {
  auto it = plugins_.find({type, name});
  return it == plugins_.end() ? nullptr : it->second.get();
}

const Registry::Plugin* Registry::FindPlugin(const std::string& type, const std::string& name) const {
  auto it = plugins_.find({type, name});
  return it == plugins_.end() ? nullptr : it->second.get();
}

Registry::Conn* Registry::FindInstance(uint64_t id, Plugin** plugin) {
  for (auto& [key, p] : plugins_) {
    for (auto& c : p->conns) {
      if (c->inst.id != id) continue;
      if (plugin) *plugin = p.get();
      return c.get();
    }
  }
  return nullptr;
}

void Registry::Register(const std::string& socket, const Info& info, const std::string& version,
                        RegisterDone done) {
  // Always from a deferred callback, so that done never runs inside this
  // call, whatever the handler does.
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([this, alive, socket, info, version, done = std::move(done)]() mutable {
    if (alive.expired()) return;
    const std::string what = Format("%s plugin %s", info.type.c_str(), info.name.c_str());
    Handler* handler = HandlerFor(info.type);
    if (!handler) {
      return done(Error(Code::kNotFound, "no handler registered for plugin type " + info.type));
    }
    if (Plugin* p = FindPlugin(info.type, info.name)) {
      for (const auto& c : p->conns) {
        if (c->inst.endpoint != info.endpoint) continue;
        return done(Error(Code::kAlreadyExists, Format("endpoint %s is already registered for %s (socket %s)",
                                                       info.endpoint.c_str(), what.c_str(),
                                                       c->inst.socket.c_str())));
      }
    }
    auto fd = ConnectToPlugin(info.endpoint, options_.allowed_uids);
    if (!fd.ok()) return done(fd.error().Wrap("connect to the endpoint of " + what));
    auto conn = std::make_shared<Conn>();
    conn->inst.id = next_id_++;
    conn->inst.type = info.type;
    conn->inst.name = info.name;
    conn->inst.socket = socket;
    conn->inst.endpoint = info.endpoint;
    conn->inst.version = version;
    conn->inst.transport = info.transport;
    auto client = PluginConn::Create(loop_, std::move(*fd), info.transport, "plugin " + info.name);
    if (!client.ok()) return done(client.error().Wrap("connect to the endpoint of " + what));
    conn->client = std::move(*client);
    conn->inst.client = conn->client->ttrpc();
    conn->inst.grpc = conn->client->grpc();
    conn->inst.connected = true;
    conn->inst.since_unix_nanos = WallNanos();
    conn->connected_mono = MonotonicNanos();
    // The handler sees the instance before it is added: a refusal leaves
    // nothing behind (kubelet adds first, and a failed Register then is
    // never retried, kubernetes#118317).
    handler->Register(conn->inst, [this, alive, conn, what, done = std::move(done)](Status st) mutable {
      if (alive.expired()) return;
      if (st.ok() && !conn->client->connected()) {
        st = Error(Code::kUnavailable, "the connection to " + conn->inst.endpoint + " closed during registration");
      }
      if (!st.ok()) {
        conn->client->Close();
        loop_->Defer([conn] {});  // the client goes after the callbacks that may still hold it
        return done(st.error());
      }
      auto& slot = plugins_[{conn->inst.type, conn->inst.name}];
      if (!slot) {
        slot = std::make_unique<Plugin>();
        slot->type = conn->inst.type;
        slot->name = conn->inst.name;
      }
      Plugin* p = slot.get();
      auto owned = std::make_unique<Conn>(std::move(*conn));
      Conn* c = owned.get();
      c->inst.client = c->client->ttrpc();
      c->inst.grpc = c->client->grpc();
      c->inst.registered_unix_nanos = WallNanos();
      uint64_t id = c->inst.id;
      c->client->SetCloseCallback([this, id](const Error& why) { OnDisconnect(id, why); });
      p->conns.push_back(std::move(owned));
      Emit("registered", c->inst.type, c->inst.name, c->inst.socket,
           Format("%s registered (version %s, socket %s%s%s)", what.c_str(), c->inst.version.c_str(),
                  c->inst.socket.c_str(), c->inst.endpoint == c->inst.socket ? "" : ", endpoint ",
                  c->inst.endpoint == c->inst.socket ? "" : c->inst.endpoint.c_str()));
      Sync(p);
      done(id);
    });
  });
}

void Registry::Deregister(uint64_t instance_id) {
  Plugin* p = nullptr;
  Conn* c = FindInstance(instance_id, &p);
  if (!c) return;
  auto it = std::find_if(p->conns.begin(), p->conns.end(), [c](const auto& o) { return o.get() == c; });
  std::shared_ptr<Conn> conn(std::move(*it));
  p->conns.erase(it);
  if (conn->reconnect_timer) loop_->CancelTimer(conn->reconnect_timer);
  if (conn->client) {
    conn->client->SetCloseCallback(nullptr);
    conn->client->Close();  // calls in flight fail with Unavailable
  }
  conn->inst.client = nullptr;
  conn->inst.grpc = nullptr;
  conn->inst.connected = false;
  // Destroyed once the callbacks of its calls (which may hold it) ran.
  loop_->Defer([conn] {});
  if (Handler* h = HandlerFor(conn->inst.type)) h->Deregister(conn->inst);
  Emit("deregistered", conn->inst.type, conn->inst.name, conn->inst.socket,
       Format("%s plugin %s deregistered: socket %s went away", conn->inst.type.c_str(), conn->inst.name.c_str(),
              conn->inst.socket.c_str()));
  if ((p = FindPlugin(conn->inst.type, conn->inst.name))) Sync(p);
}

void Registry::OnDisconnect(uint64_t id, const Error& why) {
  Plugin* p = nullptr;
  Conn* c = FindInstance(id, &p);
  if (!c) return;
  // Inside the client's own close callback: it is destroyed later.
  std::shared_ptr<PluginConn> dead(std::move(c->client));
  loop_->Defer([dead] {});
  c->inst.client = nullptr;
  c->inst.grpc = nullptr;
  c->inst.connected = false;
  c->inst.since_unix_nanos = WallNanos();
  c->last_error = why.message();
  p->last_error = why.message();
  bool stable = MonotonicNanos() - c->connected_mono >= kStableNanos;
  if (stable) {
    c->backoff_nanos = 0;
  } else {
    c->backoff_nanos = std::min(std::max(options_.reconnect_initial_nanos, c->backoff_nanos * 2),
                                options_.reconnect_max_nanos);
  }
  Emit("disconnected", c->inst.type, c->inst.name, c->inst.socket,
       Format("%s plugin %s: connection to %s lost (%s); reconnecting", c->inst.type.c_str(), c->inst.name.c_str(),
              c->inst.endpoint.c_str(), why.message().c_str()));
  std::weak_ptr<bool> alive = alive_;
  c->reconnect_timer = loop_->AddTimer(c->backoff_nanos, [this, alive, id] {
    if (!alive.expired()) Reconnect(id);
  });
  Sync(p);
}

void Registry::Reconnect(uint64_t id) {
  Plugin* p = nullptr;
  Conn* c = FindInstance(id, &p);
  if (!c) return;
  c->reconnect_timer = 0;
  auto fd = ConnectToPlugin(c->inst.endpoint, options_.allowed_uids);
  Status st = fd.ok() ? Attach(c, std::move(*fd)) : Status(fd.error());
  if (!st.ok()) {
    if (c->last_error != st.error().message()) {
      log::Debug("plugin reconnect failed", {{"plugin", c->inst.name}, {"error", st.error().message()}});
    }
    c->last_error = st.error().message();
    p->last_error = c->last_error;
    c->backoff_nanos = std::min(std::max(options_.reconnect_initial_nanos, c->backoff_nanos * 2),
                                options_.reconnect_max_nanos);
    std::weak_ptr<bool> alive = alive_;
    c->reconnect_timer = loop_->AddTimer(c->backoff_nanos, [this, alive, id] {
      if (!alive.expired()) Reconnect(id);
    });
    return;
  }
  Emit("reconnected", c->inst.type, c->inst.name, c->inst.socket,
       Format("%s plugin %s: reconnected to %s", c->inst.type.c_str(), c->inst.name.c_str(),
              c->inst.endpoint.c_str()));
  Sync(p);
}

Status Registry::Attach(Conn* c, UniqueFd fd) {
  auto client = PluginConn::Create(loop_, std::move(fd), c->inst.transport, "plugin " + c->inst.name);
  if (!client.ok()) return client.error();
  c->client = std::move(*client);
  c->inst.client = c->client->ttrpc();
  c->inst.grpc = c->client->grpc();
  c->inst.connected = true;
  c->inst.since_unix_nanos = WallNanos();
  c->connected_mono = MonotonicNanos();
  c->last_error.clear();
  uint64_t id = c->inst.id;
  c->client->SetCloseCallback([this, id](const Error& why) { OnDisconnect(id, why); });
  return OkStatus();
}

const Instance* Registry::Active(const std::string& type, const std::string& name) const {
  const Plugin* p = FindPlugin(type, name);
  if (!p) return nullptr;
  for (auto it = p->conns.rbegin(); it != p->conns.rend(); ++it) {
    if ((*it)->inst.connected) return &(*it)->inst;
  }
  return nullptr;
}

const Instance* Registry::Connected(const std::string& type, const std::string& name, uint64_t id) const {
  const Plugin* p = FindPlugin(type, name);
  if (!p) return nullptr;
  for (const auto& c : p->conns) {
    if (c->inst.id == id) return c->inst.connected ? &c->inst : nullptr;
  }
  return nullptr;
}

void Registry::Sync(Plugin* p) {
  bool any = Active(p->type, p->name) != nullptr;
  if (any && p->grace_timer) {
    loop_->CancelTimer(p->grace_timer);
    p->grace_timer = 0;
    p->expires_unix_nanos = 0;
  } else if (!any && !p->grace_timer) {
    // A grace period already running keeps its deadline.
    std::weak_ptr<bool> alive = alive_;
    std::string type = p->type, name = p->name;
    Handler* h = HandlerFor(p->type);
    int64_t grace = h != nullptr && h->GraceNanos() > 0 ? h->GraceNanos() : options_.grace_nanos;
    p->expires_unix_nanos = WallNanos() + grace;
    p->grace_timer = loop_->AddTimer(grace, [this, alive, type, name] {
      if (!alive.expired()) Expire(type, name);
    });
  }
  if (Handler* h = HandlerFor(p->type)) h->Changed(p->name);
}

void Registry::Expire(const std::string& type, const std::string& name) {
  Plugin* p = FindPlugin(type, name);
  if (!p) return;
  p->grace_timer = 0;
  p->expires_unix_nanos = 0;
  Handler* h = HandlerFor(type);
  int64_t grace = h != nullptr && h->GraceNanos() > 0 ? h->GraceNanos() : options_.grace_nanos;
  Emit("expired", type, name, "",
       Format("%s plugin %s: no instance connected for %s; cleaning up", type.c_str(), name.c_str(),
              FormatDuration(grace).c_str()));
  if (p->conns.empty()) plugins_.erase({type, name});
  if (h != nullptr) h->Expired(name);
}

std::vector<Registry::PluginView> Registry::List() const {
  std::vector<PluginView> out;
  for (const auto& [key, p] : plugins_) {
    PluginView v;
    v.type = p->type;
    v.name = p->name;
    v.expires_unix_nanos = p->expires_unix_nanos;
    v.last_error = p->last_error;
    for (const auto& c : p->conns) v.instances.push_back(c->inst);
    out.push_back(std::move(v));
  }
  return out;
}

size_t Registry::instance_count() const {
  size_t n = 0;
  for (const auto& [key, p] : plugins_) n += p->conns.size();
  return n;
}

void Registry::Emit(const char* kind, const std::string& type, const std::string& name, const std::string& socket,
                    const std::string& message) {
  std::string k = kind;
  if (k == "disconnected" || k == "expired" || k == "refused") {
    log::Warn(message);
  } else {
    log::Info(message);
  }
  if (options_.on_event) options_.on_event(Event{k, type, name, socket, message});
}

}  // namespace outpost::plugin
