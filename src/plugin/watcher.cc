#include "plugin/watcher.h"

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "pluginregistration.pb.h"

namespace outpost::plugin {

namespace {

// What GetInfo may carry: names are shown and used as keys, versions are
// compared; none of it needs to be long.
constexpr size_t kMaxNameBytes = 253;
constexpr size_t kMaxVersions = 64;

// A plugin's string as shown in an error: control bytes as \xNN.
std::string Shown(const std::string& s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? Format("\\x%02x", u) : std::string(1, c);
  }
  return out;
}

}  // namespace

Result<Info> DecodePluginInfo(std::string_view bytes, const std::string& socket, Transport transport) {
  PbOwned<pluginregistration_PluginInfo> m(pluginregistration_PluginInfo_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "PluginInfo"));
  Info info;
  info.transport = transport;
  info.type = PbString(m->type);
  info.name = PbString(m->name);
  info.endpoint = PbString(m->endpoint);
  for (pb_size_t i = 0; i < m->supported_versions_count; ++i) {
    info.supported_versions.push_back(PbString(m->supported_versions[i]));
  }
  auto bad = [](const char* field, const std::string& why) {
    return Error(Code::kInvalidArgument, Format("PluginInfo.%s %s", field, why.c_str()));
  };
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"type", &info.type},
                                     {"name", &info.name}}) {
    if (value->empty()) return bad(field, "is empty");
    if (value->size() > kMaxNameBytes) return bad(field, Format("is longer than %zu bytes", kMaxNameBytes));
    // A name may hold '/': device plugins are named by resource
    // ("vendor.example/gpu"), as the kubelet has them; a type may not.
    const bool slash_ok = value == &info.name;
    for (char c : *value) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || (c == '/' && !slash_ok)) {
        return bad(field, "\"" + Shown(*value) + (slash_ok ? "\" contains a control character"
                                                            : "\" contains '/' or a control character"));
      }
    }
  }
  if (info.supported_versions.size() > kMaxVersions) {
    return bad("supported_versions", Format("lists more than %zu versions", kMaxVersions));
  }
  if (info.endpoint.empty()) {
    info.endpoint = socket;
  } else if (info.endpoint[0] != '/' || info.endpoint.size() > 107) {
    return bad("endpoint", "\"" + Shown(info.endpoint) + "\" is not an absolute unix socket path of at most 107 bytes");
  }
  return info;
}

struct Watcher::Socket {
  uint64_t appearance = 0;
  bool present = false;
  bool busy = false;                          // an attempt runs
  std::unique_ptr<PluginConn> client;         // of the attempt
  uint64_t instance_id = 0;
  int failures = 0;
  int64_t backoff_nanos = 0;
  Loop::TimerId retry_timer = 0;
  int64_t next_attempt_unix_nanos = 0;
  std::string last_error;
  Info info;
};

Watcher::Watcher(Loop* loop, Registry* registry, WatcherOptions options)
    : loop_(loop), registry_(registry), options_(std::move(options)) {}

Watcher::~Watcher() {
  *alive_ = false;
  for (auto& [path, s] : sockets_) {
    if (s->retry_timer) loop_->CancelTimer(s->retry_timer);
  }
}

Result<std::unique_ptr<Watcher>> Watcher::Start(Loop* loop, Registry* registry, WatcherOptions options) {
  std::unique_ptr<Watcher> w(new Watcher(loop, registry, std::move(options)));
  loop::DirWatch::Options o;
  o.dir = w->options_.dir;
  o.recursive = true;
  o.types = loop::DirWatch::kSocket;
  o.ignore_dot_names = true;
  o.log_name = w->options_.name;
  Watcher* self = w.get();
  auto watch = loop::DirWatch::Start(loop, o, [self](const auto& changes) { self->OnChanges(changes); });
  if (!watch.ok()) return watch.error();
  w->watch_ = std::move(*watch);
  std::weak_ptr<bool> alive = w->alive_;
  loop->Defer([self, alive] {
    if (!alive.expired()) self->Rescan();
  });
  return w;
}

void Watcher::Rescan() { watch_->Rescan(); }

const std::string& Watcher::problem() const { return watch_->problem(); }

void Watcher::OnChanges(const std::vector<loop::DirWatch::Change>& changes) {
  for (const auto& c : changes) {
    std::string path = watch_->Abs(c.path);
    if (c.kind == loop::DirWatch::Kind::kRemoved) {
      Vanish(path);
      continue;
    }
    // A chmod or a touch of the same socket is not a new appearance.
    if (c.kind == loop::DirWatch::Kind::kChanged && !c.replaced) continue;
    Appear(path);
  }
}

void Watcher::Appear(const std::string& path) {
  auto& slot = sockets_[path];
  if (!slot) slot = std::make_unique<Socket>();
  Socket* s = slot.get();
  s->appearance = next_appearance_++;
  s->present = true;
  s->failures = 0;
  s->backoff_nanos = 0;
  s->last_error.clear();
  if (s->retry_timer) loop_->CancelTimer(s->retry_timer);
  s->retry_timer = 0;
  s->next_attempt_unix_nanos = 0;
  // A socket made anew at a registered path is a new instance: the old one
  // goes first (kubelet: deregister, then register).
  if (uint64_t id = std::exchange(s->instance_id, 0)) registry_->Deregister(id);
  if (!s->busy) Attempt(path);
}

void Watcher::Vanish(const std::string& path) {
  auto it = sockets_.find(path);
  if (it == sockets_.end()) return;
  Socket* s = it->second.get();
  s->present = false;
  s->appearance = next_appearance_++;  // an attempt in flight is overtaken
  if (s->retry_timer) loop_->CancelTimer(s->retry_timer);
  s->retry_timer = 0;
  uint64_t id = std::exchange(s->instance_id, 0);
  if (!s->busy) sockets_.erase(it);
  if (id) registry_->Deregister(id);
}

Watcher::Socket* Watcher::Current(const std::string& path, uint64_t appearance) {
  auto it = sockets_.find(path);
  if (it == sockets_.end()) return nullptr;
  Socket* s = it->second.get();
  return s->present && s->busy && s->appearance == appearance ? s : nullptr;
}

void Watcher::Attempt(const std::string& path) {
  Socket* s = sockets_.at(path).get();
  s->retry_timer = 0;
  s->next_attempt_unix_nanos = 0;
  s->busy = true;
  const uint64_t appearance = s->appearance;
  auto fd = ConnectToPlugin(path, options_.allowed_uids);
  if (!fd.ok()) {
    bool refused = fd.error().code() == Code::kPermissionDenied;
    return End(path, appearance, (refused ? "refused: " : "connect: ") + fd.error().message(), refused);
  }
  auto client = PluginConn::Create(loop_, std::move(*fd), options_.transport, "plugin registration");
  if (!client.ok()) return End(path, appearance, client.error().message());
  s->client = std::move(*client);
  std::weak_ptr<bool> alive = alive_;
  s->client->Call(kRegistrationService, "GetInfo", "", options_.getinfo_timeout_nanos,
                  [this, alive, path, appearance](Result<std::string> reply) {
                    if (!alive.expired()) OnInfo(path, appearance, std::move(reply));
                  });
}

void Watcher::OnInfo(const std::string& path, uint64_t appearance, Result<std::string> reply) {
  Socket* s = Current(path, appearance);
  if (!s) return End(path, appearance, "");
  if (!reply.ok()) return End(path, appearance, "GetInfo: " + reply.error().message());
  auto info = DecodePluginInfo(*reply, path, options_.transport);
  if (!info.ok()) return NotifyAndEnd(path, appearance, false, "GetInfo: " + info.error().message());
  s->info = *info;
  Handler* handler = registry_->HandlerFor(info->type);
  if (!handler) {
    // kubelet's words in kubelet's directory (its plugins may match them).
    return NotifyAndEnd(path, appearance, false,
                        options_.transport == Transport::kGrpc
                            ? "RegisterPlugin error -- no handler registered for plugin type: " + info->type +
                                  " at socket " + path
                            : "no handler registered for plugin type " + info->type);
  }
  auto version = handler->Validate(*info);
  if (!version.ok()) return NotifyAndEnd(path, appearance, false, version.error().message());
  std::weak_ptr<bool> alive = alive_;
  registry_->Register(path, *info, *version, [this, alive, path, appearance](Result<uint64_t> id) {
    if (!alive.expired()) OnRegistered(path, appearance, std::move(id));
  });
}

void Watcher::OnRegistered(const std::string& path, uint64_t appearance, Result<uint64_t> id) {
  Socket* s = Current(path, appearance);
  if (!s) {
    // Overtaken while the handler ran: the instance it made is already gone.
    if (id.ok()) registry_->Deregister(*id);
    return End(path, appearance, "");
  }
  if (!id.ok()) return NotifyAndEnd(path, appearance, false, id.error().message());
  s->instance_id = *id;
  NotifyAndEnd(path, appearance, true, "");
}

void Watcher::NotifyAndEnd(const std::string& path, uint64_t appearance, bool registered, const std::string& error) {
  Socket* s = Current(path, appearance);
  if (!s || !s->client) return End(path, appearance, error);
  pluginregistration_RegistrationStatus m = pluginregistration_RegistrationStatus_init_zero;
  m.plugin_registered = registered;
  m.error = PbStr(error);
  auto payload = PbEncode(pluginregistration_RegistrationStatus_fields, &m, "RegistrationStatus");
  if (!payload.ok()) return End(path, appearance, error.empty() ? payload.error().message() : error);
  std::weak_ptr<bool> alive = alive_;
  s->client->Call(kRegistrationService, "NotifyRegistrationStatus", *payload, options_.notify_timeout_nanos,
                  [this, alive, path, appearance, registered, error](Result<std::string> reply) {
                    if (alive.expired()) return;
                    if (!reply.ok() && registered) {
                      // Registered all the same: the instance is connected
                      // and in use; the plugin only missed the news.
                      log::Warn("plugin registered, but telling it failed",
                                {{"socket", path}, {"error", reply.error().message()}});
                    }
                    End(path, appearance, error);
                  });
}

void Watcher::End(const std::string& path, uint64_t appearance, const std::string& error, bool refused) {
  auto it = sockets_.find(path);
  if (it == sockets_.end()) return;
  Socket* s = it->second.get();
  if (s->busy && s->client) {
    // Ended from inside one of its callbacks: destroyed afterwards.
    std::shared_ptr<PluginConn> done(std::move(s->client));
    done->Close();
    loop_->Defer([done] {});
  }
  s->busy = false;
  if (!s->present) {
    sockets_.erase(it);
    return;
  }
  if (s->appearance != appearance) return Attempt(path);  // a new appearance waits for none
  if (error.empty()) {
    s->failures = 0;
    s->backoff_nanos = 0;
    s->last_error.clear();
    return;
  }
  ++s->failures;
  s->last_error = error;
  s->backoff_nanos = s->backoff_nanos == 0 ? options_.backoff_initial_nanos
                                           : std::min(s->backoff_nanos * 2, options_.backoff_max_nanos);
  s->next_attempt_unix_nanos = WallNanos() + s->backoff_nanos;
  std::weak_ptr<bool> alive = alive_;
  s->retry_timer = loop_->AddTimer(s->backoff_nanos, [this, alive, path, appearance] {
    if (alive.expired()) return;
    auto found = sockets_.find(path);
    if (found != sockets_.end() && found->second->appearance == appearance && !found->second->busy) Attempt(path);
  });
  std::string message = Format("plugin socket %s: %s; trying again in %s", path.c_str(), error.c_str(),
                               FormatDuration(s->backoff_nanos).c_str());
  log::Warn(message);
  if (options_.on_event) {
    options_.on_event(Event{refused ? "refused" : "failed", s->info.type, s->info.name, path, message});
  }
}

std::vector<Watcher::SocketView> Watcher::Sockets() const {
  std::vector<SocketView> out;
  for (const auto& [path, s] : sockets_) {
    if (!s->present) continue;
    SocketView v;
    v.path = path;
    v.appearance = s->appearance;
    v.state = s->busy ? "registering" : s->instance_id ? "registered" : "waiting";
    v.type = s->info.type;
    v.name = s->info.name;
    v.instance_id = s->instance_id;
    v.failures = s->failures;
    v.last_error = s->last_error;
    v.next_attempt_unix_nanos = s->next_attempt_unix_nanos;
    if (v.state == "waiting") v.retry_in_nanos = s->backoff_nanos;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace outpost::plugin
