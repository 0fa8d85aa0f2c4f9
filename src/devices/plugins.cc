#include "devices/plugins.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "devices/validate.h"

namespace outpost::devices {

namespace {

constexpr const char kService[] = "v1beta1.DevicePlugin";
constexpr int64_t kPreStartTimeoutNanos = 30LL * 1000000000;  // the kubelet's

}  // namespace

struct DevicePlugins::Stream {
  uint64_t instance = 0;
  std::string endpoint;
  std::shared_ptr<wire::GrpcCall> call;
};

struct AllocateOp {
  std::string task;
  std::vector<Request> requests;
  std::vector<int64_t> numa;
  size_t index = 0;
  std::function<void(Result<Grant>)> done;
};

DevicePlugins::DevicePlugins(Loop* loop, plugin::Registry* registry, DevicePluginsOptions options)
    : loop_(loop),
      registry_(registry),
      opts_(std::move(options)),
      checkpoint_(loop, opts_.state_dir + "/" + kCheckpointFile),
      manager_(loop, &checkpoint_, opts_.grace_nanos) {}

DevicePlugins::~DevicePlugins() {
  *alive_ = false;
  for (auto& [r, s] : streams_) {
    if (s->call) s->call->Cancel();
  }
}

Status DevicePlugins::Start() {
  manager_.SetEventFn([this](const DeviceEvent& e) {
    switch (e.kind) {
      case DeviceEvent::kAdded:
        Event("device_health", Format("resource %s: device %s added, %s", e.resource.c_str(), e.device.c_str(),
                                      e.healthy ? "healthy" : "unhealthy"),
              e.resource);
        break;
      case DeviceEvent::kRemoved:
        Event("device_health", Format("resource %s: device %s removed", e.resource.c_str(), e.device.c_str()),
              e.resource);
        break;
      case DeviceEvent::kHealthChanged:
        Event("device_health", Format("resource %s: device %s %s", e.resource.c_str(), e.device.c_str(),
                                      e.healthy ? "healthy" : "unhealthy"),
              e.resource);
        break;
      case DeviceEvent::kDisconnected:
        Event("device_plugin_disconnected",
              "resource " + e.resource + ": its device plugin is gone; its devices are unhealthy until it is back",
              e.resource);
        break;
      case DeviceEvent::kExpired:
        Event("device_plugin_expired",
              "resource " + e.resource + ": no device plugin came back within " + FormatDuration(opts_.grace_nanos) +
                  "; the resource is dropped",
              e.resource);
        break;
    }
    if ((e.kind == DeviceEvent::kAdded || e.kind == DeviceEvent::kHealthChanged) && e.healthy &&
        opts_.on_devices_changed) {
      opts_.on_devices_changed();
    }
  });
  std::string problem;
  CheckpointData data = checkpoint_.Load(&problem);
  if (!problem.empty()) log::Error("device checkpoint", {{"problem", problem}});
  manager_.Restore(data, opts_.boot_id);
  if (opts_.dir.empty()) return OkStatus();
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(opts_.dir, 0750));
  // As the kubelet at its start: every socket in the dir goes (plugins
  // watching it register again when kubelet.sock appears).
  auto names = sys::ListDir(opts_.dir);
  if (names.ok()) {
    for (const std::string& n : *names) {
      std::string p = opts_.dir + "/" + n;
      struct stat st;
      if (::lstat(p.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(p.c_str());
    }
  }
  auto fd = sys::UnixListen(opts_.dir + "/kubelet.sock", 64);
  if (!fd.ok()) {
    problem_ = "cannot serve " + opts_.dir + "/kubelet.sock: " + fd.error().message();
    return fd.error().Wrap("device_plugins_dir");
  }
  wire::GrpcServerOptions so;
  so.name = "kubelet.sock";
  // A device plugin keeps no connection to kubelet.sock open: idle ones go.
  auto server = wire::GrpcServer::Create(loop_, std::move(*fd), so);
  if (!server.ok()) return server.error();
  server_ = std::move(*server);
  server_->Register("v1beta1.Registration", "Register",
                    [this](const wire::GrpcCallContext&, std::string_view request, wire::GrpcResponder r) {
                      OnRegisterCall(request, std::move(r));
                    });
  return OkStatus();
}

void DevicePlugins::Event(const std::string& type, const std::string& message, const std::string& resource) {
  if (opts_.on_event) opts_.on_event(type, message, {{"resource", resource}});
}

// ---- registration ---------------------------------------------------------

// A plugin calling Register on kubelet.sock: checked as the kubelet checks
// it, then registered through the engine (which dials the plugin back and
// runs Register below) before the call is answered, as the kubelet does.
void DevicePlugins::OnRegisterCall(std::string_view request, wire::GrpcResponder responder) {
  auto req = DecodeRegisterRequest(request);
  if (!req.ok()) return responder.Fail(Error(Code::kUnknown, req.error().message()));
  auto socket = ValidateRegister(opts_.dir, req->version, req->resource_name, req->endpoint);
  if (!socket.ok()) return responder.Fail(Error(Code::kUnknown, socket.error().message()));
  // A new endpoint of a resource replaces the old one (a plugin that
  // restarted registers again at the same socket path).
  for (const auto& p : registry_->List()) {
    if (p.type != kPluginType || p.name != req->resource_name) continue;
    for (const auto& in : p.instances) {
      if (in.endpoint == *socket) registry_->Deregister(in.id);
    }
  }
  plugin::Info info;
  info.transport = plugin::Transport::kGrpc;
  info.type = kPluginType;
  info.name = req->resource_name;
  info.endpoint = *socket;
  info.supported_versions = {kApiVersion};
  registry_->Register(*socket, info, kApiVersion, [responder](Result<uint64_t> id) {
    if (!id.ok()) return responder.Fail(Error(Code::kUnknown, id.error().message()));
    responder.Reply("");
  });
}

Result<std::string> DevicePlugins::Validate(const plugin::Info& info) {
  if (info.transport != plugin::Transport::kGrpc) {
    return Error(Code::kInvalidArgument,
                 "a DevicePlugin registers in kubelet's plugins dir over gRPC, not in outpost's plugins dir");
  }
  Status st = ValidatePlugin(info.name, info.supported_versions);
  if (!st.ok()) {
    return Error(Code::kInvalidArgument, "RegisterPlugin error -- plugin validation failed with err: " +
                                             st.error().message());
  }
  return std::string(kApiVersion);
}

void DevicePlugins::Register(const plugin::Instance& instance, std::function<void(Status)> done) {
  if (instance.grpc == nullptr) return done(Error(Code::kInvalidArgument, "a device plugin speaks gRPC"));
  std::weak_ptr<bool> alive = alive_;
  plugin::Instance in = instance;
  in.grpc->Call(kService, "GetDevicePluginOptions", "", opts_.call_timeout_nanos,
                [this, alive, in, done = std::move(done)](Result<std::string> r) {
                  if (!alive.lock()) return;
                  if (!r.ok()) {
                    return done(Error(Code::kUnavailable, "failed to get device plugin options: " + r.error().message()));
                  }
                  auto options = DecodePluginOptions(*r);
                  if (!options.ok()) return done(options.error().Wrap("failed to get device plugin options"));
                  manager_.Connect(in.name, in.endpoint, *options);
                  Watch(in);
                  Event("device_plugin_registered",
                        "resource " + in.name + ": device plugin registered at " + in.endpoint, in.name);
                  done(OkStatus());
                });
}

// ListAndWatch, kept open for the instance's life: every message is the
// resource's whole list; its end makes the devices unhealthy.
void DevicePlugins::Watch(const plugin::Instance& in) {
  StopWatching(in.name);
  auto s = std::make_unique<Stream>();
  s->instance = in.id;
  s->endpoint = in.endpoint;
  s->call = in.grpc->StartCall(kService, "ListAndWatch", 0);
  std::weak_ptr<bool> alive = alive_;
  const std::string resource = in.name, endpoint = in.endpoint;
  s->call->OnMessage([this, alive, resource, endpoint](std::string_view m) {
    if (!alive.lock()) return;
    auto devices = DecodeListAndWatchResponse(m);
    if (!devices.ok()) {
      log::Warn("device plugin: bad ListAndWatch message", {{"resource", resource}, {"error", devices.error().message()}});
      return;
    }
    manager_.Update(resource, endpoint, std::move(*devices));
  });
  wire::GrpcCall* raw = s->call.get();
  s->call->OnDone([this, alive, resource, endpoint, raw](const Status& st) {
    if (!alive.lock()) return;
    auto it = streams_.find(resource);
    if (it != streams_.end() && it->second->call.get() == raw) streams_.erase(it);
    log::Info("ListAndWatch ended for device plugin", {{"resource", resource},
                                                        {"why", st.ok() ? "ended by the plugin" : st.error().message()}});
    manager_.Disconnect(resource, endpoint);
  });
  (void)s->call->Write("");
  s->call->CloseSend();
  streams_[in.name] = std::move(s);
}

void DevicePlugins::StopWatching(const std::string& resource) {
  auto it = streams_.find(resource);
  if (it == streams_.end()) return;
  std::shared_ptr<wire::GrpcCall> call = std::move(it->second->call);
  streams_.erase(it);
  if (call) call->Cancel();
}

void DevicePlugins::Deregister(const plugin::Instance& instance) {
  auto it = streams_.find(instance.name);
  if (it != streams_.end() && it->second->instance == instance.id) StopWatching(instance.name);
  manager_.Disconnect(instance.name, instance.endpoint);
}

// The instance calls go to changed (a reconnection, a newer instance): its
// options are asked again and its stream opened on it.
void DevicePlugins::Changed(const std::string& name) {
  const plugin::Instance* active = registry_->Active(kPluginType, name);
  if (active == nullptr || active->grpc == nullptr) return;
  auto it = streams_.find(name);
  if (it != streams_.end() && it->second->instance == active->id && it->second->call && !it->second->call->done()) {
    return;
  }
  plugin::Instance in = *active;
  Register(in, [name](Status st) {
    if (!st.ok()) log::Warn("device plugin reconnected but not usable", {{"resource", name}, {"error", st.error().message()}});
  });
}

// No instance connected for the grace period: the manager drops the
// resource by itself; instances registered through kubelet.sock (no socket
// in a watched dir ends them) go from the registry.
void DevicePlugins::Expired(const std::string& name) {
  for (const auto& p : registry_->List()) {
    if (p.type != kPluginType || p.name != name) continue;
    for (const auto& in : p.instances) {
      if (!opts_.dir.empty() && StartsWith(in.socket, opts_.dir + "/")) registry_->Deregister(in.id);
    }
  }
}

std::string DevicePlugins::EndpointOf(const std::string& resource) const {
  const ResourceState* r = manager_.Find(resource);
  return r == nullptr ? std::string() : r->endpoint;
}

wire::GrpcClient* DevicePlugins::ClientFor(const std::string& resource) const {
  const plugin::Instance* in = registry_->Active(kPluginType, resource);
  return in == nullptr ? nullptr : in->grpc;
}

std::vector<std::pair<std::string, std::vector<std::string>>> DevicePlugins::HeldBy(const std::string& task) const {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const Allocation& a : manager_.allocations()) {
    if (a.task == task) out.emplace_back(a.resource, a.devices);
  }
  return out;
}

// ---- a task's start ---------------------------------------------------------

void DevicePlugins::Allocate(const std::string& task, const std::vector<Request>& requests,
                             const std::string& cpuset_mems, std::function<void(Result<Grant>)> done) {
  manager_.Trim(task, requests);
  std::string reason = manager_.WaitReason(task, requests);
  if (!reason.empty()) return done(Error(Code::kUnavailable, reason));
  auto op = std::make_shared<AllocateOp>();
  op->task = task;
  op->requests = requests;
  op->numa = NumaNodes(cpuset_mems);
  op->done = std::move(done);
  AllocateNext(std::move(op));
}

// One resource at a time: Begin, [GetPreferredAllocation], Reserve,
// Allocate, Commit (the kubelet's order).
void DevicePlugins::AllocateNext(std::shared_ptr<AllocateOp> op) {
  if (op->index == op->requests.size()) return PreStart(std::move(op), 0);
  const Request& r = op->requests[op->index];
  auto plan = manager_.Begin(op->task, r.resource, r.count, op->numa);
  if (!plan.ok()) return op->done(plan.error());
  if (plan->reuse) {
    ++op->index;
    return AllocateNext(std::move(op));
  }
  wire::GrpcClient* client = ClientFor(r.resource);
  if (client == nullptr) {
    return op->done(Error(Code::kUnavailable, "resource " + r.resource + ": its device plugin is not connected"));
  }
  if (!plan->ask) return ReserveAndAllocate(std::move(op), client, {});
  std::weak_ptr<bool> alive = alive_;
  client->Call(kService, "GetPreferredAllocation", EncodePreferredAllocationRequest(plan->preferred), 0,
               [this, alive, op, client](Result<std::string> p) {
                 if (!alive.lock()) return;
                 auto ids = p.ok() ? DecodePreferredAllocationResponse(*p) : Result<std::vector<std::string>>(p.error());
                 if (!ids.ok()) {
                   return Failed(*op, "GetPreferredAllocation", ids.error());
                 }
                 ReserveAndAllocate(op, client, std::move(*ids));
               });
}

// The devices chosen (the plugin's preference first), then Allocate and
// Commit.
void DevicePlugins::ReserveAndAllocate(std::shared_ptr<AllocateOp> op, wire::GrpcClient* client,
                                       std::vector<std::string> preferred) {
  const Request& req = op->requests[op->index];
  auto ids = manager_.Reserve(op->task, req.resource, req.count, preferred, op->numa);
  if (!ids.ok()) return op->done(ids.error());
  std::weak_ptr<bool> alive = alive_;
  client->Call(kService, "Allocate", EncodeAllocateRequest(*ids), 0, [this, alive, op](Result<std::string> a) {
    if (!alive.lock()) return;
    const Request& q = op->requests[op->index];
    auto resp = a.ok() ? DecodeAllocateResponse(*a) : Result<ContainerAllocateResponse>(a.error());
    if (!resp.ok()) {
      manager_.Unreserve(op->task, q.resource);
      return Failed(*op, "Allocate", resp.error());
    }
    Status st = manager_.Commit(op->task, q.resource, std::move(*resp));
    if (!st.ok()) return op->done(st.error());
    ++op->index;
    AllocateNext(op);
  });
}

// A plugin's call failed: the start fails with the kubelet's text, and an
// event says so.
void DevicePlugins::Failed(const AllocateOp& op, const char* rpc, const Error& e) {
  const std::string& resource = op.requests[op.index].resource;
  std::string why = "resource " + resource + ": device plugin " + rpc + " rpc failed with err: " + e.message();
  Event("device_allocation_failed", "task " + op.task + ": " + why, resource);
  op.done(Error(Code::kUnknown, why));
}

// PreStartContainer before every start, for the plugins that ask for it,
// with all the devices the task holds of theirs.
void DevicePlugins::PreStart(std::shared_ptr<AllocateOp> op, size_t i) {
  for (; i < op->requests.size(); ++i) {
    const Request& r = op->requests[i];
    const ResourceState* rs = manager_.Find(r.resource);
    const Allocation* held = manager_.Held(op->task, r.resource);
    if (rs == nullptr || !rs->options.pre_start_required || held == nullptr) continue;
    wire::GrpcClient* client = ClientFor(r.resource);
    if (client == nullptr) {
      return op->done(Error(Code::kUnavailable, "resource " + r.resource + ": its device plugin is not connected"));
    }
    std::weak_ptr<bool> alive = alive_;
    client->Call(kService, "PreStartContainer", EncodePreStartContainerRequest(held->devices), kPreStartTimeoutNanos,
                 [this, alive, op, i](Result<std::string> p) {
                   if (!alive.lock()) return;
                   if (!p.ok()) {
                     const std::string& res = op->requests[i].resource;
                     return op->done(Error(Code::kUnknown, "resource " + res +
                                                               ": device plugin PreStartContainer rpc failed with err: " +
                                                               p.error().message()));
                   }
                   PreStart(op, i + 1);
                 });
    return;
  }
  auto grant = MergeResponses(manager_.ResponsesOf(op->task));
  for (const std::string& w : grant.ok() ? grant->warnings : std::vector<std::string>()) {
    log::Warn("device grant", {{"task", op->task}, {"warning", w}});
  }
  op->done(std::move(grant));
}

}  // namespace outpost::devices
