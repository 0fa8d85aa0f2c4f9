#include "driver/remote.h"

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/json.h"
#include "driver/remote_codec.h"

namespace outpost::driver {

using remote::kPluginType;
using remote::kService;

RemoteDriver::RemoteDriver(Loop* loop, plugin::Registry* plugins, std::string name, RemoteOptions options)
    : loop_(loop), plugins_(plugins), name_(std::move(name)), options_(options) {
  PollFingerprint();
}

RemoteDriver::~RemoteDriver() {
  *alive_ = false;
  if (fingerprint_timer_) loop_->CancelTimer(fingerprint_timer_);
  if (events_timer_) loop_->CancelTimer(events_timer_);
}

const plugin::Instance* RemoteDriver::InstanceFor(const std::string& task) const {
  auto owner = task.empty() ? owners_.end() : owners_.find(task);
  if (owner != owners_.end()) {
    if (const plugin::Instance* inst = plugins_->Connected(kPluginType, name_, owner->second)) return inst;
  }
  return plugins_->Active(kPluginType, name_);
}

void RemoteDriver::Call(const char* method, Result<std::string> payload, int64_t timeout_nanos,
                        std::function<void(Result<std::string>)> done, const std::string& task) {
  const plugin::Instance* inst = InstanceFor(task);
  if (!payload.ok() || !inst || !inst->client) {
    Error e = !payload.ok() ? payload.error()
                            : Error(Code::kUnavailable, Format("driver %s is disconnected", name_.c_str()));
    loop_->Defer([done = std::move(done), e] { done(e); });
    return;
  }
  std::string name = name_, m = method;  // by value: the driver may be gone when the answer comes
  // The instance that answers a start or a recovery has the task now.
  bool takes = !task.empty() && (m == "StartTask" || m == "RecoverTask");
  uint64_t inst_id = inst->id;
  std::weak_ptr<bool> alive = alive_;
  inst->client->Call(kService, method, *payload, timeout_nanos,
                     [this, alive, done = std::move(done), name, m, task, takes, inst_id](Result<std::string> reply) {
                       if (takes && reply.ok() && !alive.expired()) owners_[task] = inst_id;
                       if (!reply.ok() && reply.error().code() == Code::kUnimplemented) {
                         return done(Error(Code::kUnimplemented,
                                           Format("driver %s does not implement %s", name.c_str(), m.c_str())));
                       }
                       if (!reply.ok()) return done(reply.error().Wrap("driver " + name + ": " + m));
                       done(std::move(reply));
                     });
}

void RemoteDriver::Done(const char* method, const std::string& task, Result<std::string> payload,
                        DoneCallback done) {
  Call(
      method, std::move(payload), options_.call_timeout_nanos,
      [done = std::move(done)](Result<std::string> r) { done(r.ok() ? OkStatus() : Status(r.error())); }, task);
}

namespace {

bool AbsolutePath(const picojson::value& v) {
  return v.is<std::string>() && !v.get<std::string>().empty() && v.get<std::string>()[0] == '/';
}

// Checks o against schema; problems named "<path>.<field>: ...". The top
// level (path "config") says which driver and lists what it takes.
void CheckObject(const picojson::object& o, const std::vector<remote::SchemaField>& schema, const std::string& path,
                 const std::string& driver, bool top, std::vector<std::string>* problems) {
  std::string takes;
  for (const auto& f : schema) takes += (takes.empty() ? "" : ", ") + f.name;
  for (const auto& entry : o) {
    const std::string& key = entry.first;
    const picojson::value& value = entry.second;
    std::string at = path + "." + key;
    auto f = std::find_if(schema.begin(), schema.end(), [&key](const auto& s) { return s.name == key; });
    if (f == schema.end()) {
      problems->push_back(top ? Format("%s: unknown field for driver %s (it takes: %s)", at.c_str(), driver.c_str(),
                                       takes.empty() ? "none" : takes.c_str())
                              : Format("%s: unknown field (it takes: %s)", at.c_str(), takes.c_str()));
      continue;
    }
    bool ok = (f->type == "string" && value.is<std::string>()) || (f->type == "number" && value.is<double>()) ||
              (f->type == "bool" && value.is<bool>()) || (f->type == "object" && value.is<picojson::object>()) ||
              (f->type == "list" && value.is<picojson::array>());
    if (!ok) {
      problems->push_back(Format("%s: expected %s for driver %s", at.c_str(), f->type.c_str(), driver.c_str()));
      continue;
    }
    if (f->format == "absolute_path" && f->type == "string" && !AbsolutePath(value)) {
      problems->push_back(Format("%s: must be an absolute path, got \"%s\"", at.c_str(), value.get<std::string>().c_str()));
    }
    if (f->type == "object" && !f->fields.empty()) {
      CheckObject(value.get<picojson::object>(), f->fields, at, driver, false, problems);
    }
    if (f->type != "list") continue;
    const picojson::array& items = value.get<picojson::array>();
    for (size_t i = 0; i < items.size(); ++i) {
      std::string item = Format("%s[%zu]", at.c_str(), i);
      if (!f->fields.empty()) {
        if (!items[i].is<picojson::object>()) {
          problems->push_back(item + ": expected an object");
        } else {
          CheckObject(items[i].get<picojson::object>(), f->fields, item, driver, false, problems);
        }
      } else if (f->format == "absolute_path" && !AbsolutePath(items[i])) {
        problems->push_back(item + ": must be an absolute path (a string starting with /)");
      }
    }
  }
  for (const auto& f : schema) {
    if (f.required && !o.count(f.name)) {
      problems->push_back(top ? Format("%s.%s: required by driver %s", path.c_str(), f.name.c_str(), driver.c_str())
                              : Format("%s.%s: required", path.c_str(), f.name.c_str()));
    }
  }
}

}  // namespace

Status RemoteDriver::CheckConfig(const std::string& config_json) const {
  if (!has_schema_) return OkStatus();
  picojson::value v;
  if (!config_json.empty()) {
    auto parsed = json::Parse(config_json);
    if (!parsed.ok()) return Error(Code::kInvalidArgument, "config: " + parsed.error().message());
    v = std::move(*parsed);
  }
  const picojson::object empty;
  const picojson::object& o = v.is<picojson::object>() ? v.get<picojson::object>() : empty;
  std::vector<std::string> problems;
  CheckObject(o, schema_, "config", name_, true, &problems);
  if (problems.empty()) return OkStatus();
  return Error(Code::kInvalidArgument, JoinStrings(problems, "\n"));
}

std::string RemoteDriver::Unreachable() const {
  return plugins_->Active(kPluginType, name_) ? "" : "driver " + name_ + " is disconnected";
}

Fingerprint RemoteDriver::GetFingerprint() {
  if (plugins_->Active(kPluginType, name_)) return fingerprint_;
  Fingerprint f = fingerprint_;
  f.health = Health::kUnhealthy;
  f.description = "driver " + name_ + " is disconnected";
  return f;
}

void RemoteDriver::PollFingerprint() {
  std::weak_ptr<bool> alive = alive_;
  fingerprint_timer_ = loop_->AddTimer(options_.fingerprint_every_nanos, [this, alive] {
    if (alive.expired()) return;
    fingerprint_timer_ = 0;
    if (!plugins_->Active(kPluginType, name_)) return PollFingerprint();
    Call("Fingerprint", std::string(), options_.call_timeout_nanos, [this, alive](Result<std::string> r) {
      if (alive.expired()) return;
      auto fp = r.ok() ? remote::DecodeFingerprint(*r) : Result<Fingerprint>(r.error());
      if (fp.ok()) {
        fp->updated_unix_nanos = WallNanos();
        fingerprint_ = *fp;
      } else {
        fingerprint_.health = Health::kUnhealthy;
        fingerprint_.description = fp.error().message();
      }
      PollFingerprint();
    });
  });
}

void RemoteDriver::StartTask(const TaskConfig& config, StartCallback done) {
  TaskConfig c = config;
  Call(
      "StartTask", remote::EncodeStartTask(config), options_.start_timeout_nanos,
      [c, done = std::move(done)](Result<std::string> r) {
        if (!r.ok()) return done(r.error());
        done(remote::DecodeStartTaskResponse(*r, c));
      },
      config.id);
}

void RemoteDriver::RecoverTask(const TaskHandle& handle, DoneCallback done) {
  std::string id = handle.config.id;
  std::weak_ptr<bool> alive = alive_;
  Done("RecoverTask", id, remote::EncodeRecoverTask(handle), [this, alive, id, done = std::move(done)](Status st) {
    auto w = alive.expired() ? waits_.end() : waits_.find(id);
    // A wait cut off with the instance that had the task is asked again of
    // the one that has it now; after a failed recovery the caller ends
    // the task itself (a wait asked before recovery would be answered
    // "not found" by a new instance: taken for the task's exit).
    if (w != waits_.end() && !w->second.asking) {
      if (st.ok()) {
        AskWait(id);
      } else if (st.error().code() != Code::kUnavailable) {
        waits_.erase(w);
      }
    }
    done(st);
  });
}

void RemoteDriver::WaitTask(const std::string& id, WaitCallback done) {
  Wait& w = waits_[id];
  w.id = id;
  w.callbacks.push_back(std::move(done));
  if (!w.asking) AskWait(id);
}

void RemoteDriver::AskWait(const std::string& id) {
  auto it = waits_.find(id);
  if (it == waits_.end()) return;
  it->second.asking = true;
  std::weak_ptr<bool> alive = alive_;
  Call("WaitTask", remote::EncodeTaskId(id), options_.wait_poll_nanos, [this, alive, id](Result<std::string> r) {
    if (alive.expired()) return;
    auto w = waits_.find(id);
    if (w == waits_.end()) return;
    w->second.asking = false;
    ExitResult exit;
    if (r.ok()) {
      auto exited = remote::DecodeWaitTask(*r, &exit);
      if (exited.ok() && !*exited) return AskWait(id);  // the long poll ran out
      if (!exited.ok()) {
        exit.exit_code = -1;
        exit.error = "driver " + name_ + ": " + exited.error().message();
      }
    } else if (r.error().code() == Code::kDeadlineExceeded) {
      return AskWait(id);
    } else if (r.error().code() == Code::kUnavailable) {
      return;  // asked again once the task is recovered on a connected instance (RecoverTask)
    } else {
      exit.exit_code = -1;
      exit.error = r.error().message();
    }
    std::vector<WaitCallback> callbacks = std::move(w->second.callbacks);
    waits_.erase(w);
    for (auto& cb : callbacks) cb(exit);
  }, id);
}

void RemoteDriver::OnInstanceChanged() {
  if (!plugins_->Active(kPluginType, name_)) return;
  events_unimplemented_ = false;  // the new instance may be a newer driver
  AskEvents();
}

void RemoteDriver::StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                            DoneCallback done) {
  Call("StopTask", remote::EncodeStopTask(id, timeout_nanos, signal), timeout_nanos + options_.call_timeout_nanos,
       [done = std::move(done)](Result<std::string> r) { done(r.ok() ? OkStatus() : Status(r.error())); }, id);
}

void RemoteDriver::DestroyTask(const std::string& id, bool force, DoneCallback done) {
  std::weak_ptr<bool> alive = alive_;
  Done("DestroyTask", id, remote::EncodeDestroyTask(id, force), [this, alive, id, done = std::move(done)](Status st) {
    if (st.ok() && !alive.expired()) owners_.erase(id);
    done(st);
  });
}

void RemoteDriver::InspectTask(const std::string& id, InspectCallback done) {
  Call("InspectTask", remote::EncodeTaskId(id), options_.call_timeout_nanos,
       [done = std::move(done)](Result<std::string> r) {
         if (!r.ok()) return done(r.error());
         done(remote::DecodeTaskStatus(*r));
       }, id);
}

void RemoteDriver::SignalTask(const std::string& id, const std::string& signal, DoneCallback done) {
  if (!caps_.send_signals) {
    loop_->Defer([done = std::move(done), name = name_] {
      done(Error(Code::kUnimplemented, "driver " + name + " cannot signal tasks"));
    });
    return;
  }
  Done("SignalTask", id, remote::EncodeSignalTask(id, signal), std::move(done));
}

void RemoteDriver::ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                            ExecCallback done) {
  if (!caps_.exec) {
    loop_->Defer([done = std::move(done), name = name_] {
      done(Error(Code::kUnimplemented, "driver " + name + " cannot run commands in tasks"));
    });
    return;
  }
  Call("ExecTask", remote::EncodeExecTask(id, cmd, timeout_nanos), timeout_nanos + options_.call_timeout_nanos,
       [done = std::move(done)](Result<std::string> r) {
         if (!r.ok()) return done(r.error());
         done(remote::DecodeExecTask(*r));
       }, id);
}

void RemoteDriver::TaskStats(const std::string& id, StatsCallback done) {
  Call("TaskStats", remote::EncodeTaskId(id), options_.call_timeout_nanos,
       [done = std::move(done)](Result<std::string> r) {
         if (!r.ok()) return done(r.error());
         done(remote::DecodeTaskStats(*r));
       }, id);
}

void RemoteDriver::ListTasks(ListCallback done) {
  Call("ListTasks", std::string(), options_.call_timeout_nanos, [done = std::move(done)](Result<std::string> r) {
    if (!r.ok()) return done(r.error());
    done(remote::DecodeTaskIds(*r));
  });
}

uint64_t RemoteDriver::SubscribeEvents(EventCallback cb) {
  uint64_t id = next_subscriber_++;
  subscribers_[id] = std::move(cb);
  return id;
}

void RemoteDriver::UnsubscribeEvents(uint64_t id) { subscribers_.erase(id); }

void RemoteDriver::AskEvents() {
  if (events_asking_ || events_timer_ || events_unimplemented_ || !plugins_->Active(kPluginType, name_)) return;
  events_asking_ = true;
  std::weak_ptr<bool> alive = alive_;
  int64_t asked = MonotonicNanos();
  Call("TaskEvents", remote::EncodeTaskEvents(events_cursor_), options_.events_poll_nanos,
       [this, alive, asked](Result<std::string> r) {
         if (alive.expired()) return;
         events_asking_ = false;
         if (!r.ok() && r.error().code() == Code::kUnimplemented) {
           events_unimplemented_ = true;  // optional: this driver has no events of its own
           return;
         }
         if (!r.ok() && r.error().code() == Code::kDeadlineExceeded) return AskEvents();
         if (!r.ok() && r.error().code() == Code::kUnavailable) return;  // OnInstanceChanged asks again
         auto batch = r.ok() ? remote::DecodeTaskEventsResponse(*r) : Result<remote::EventBatch>(r.error());
         bool quick_empty = batch.ok() && batch->events.empty() &&
                            MonotonicNanos() - asked < options_.events_poll_nanos / 2;
         if (!batch.ok() || quick_empty) {
           if (!batch.ok()) log::Warn("TaskEvents", {{"driver", name_}, {"error", batch.error().message()}});
           if (batch.ok()) events_cursor_ = batch->next;
           events_timer_ = loop_->AddTimer(options_.events_retry_nanos, [this, alive] {
             if (alive.expired()) return;
             events_timer_ = 0;
             AskEvents();
           });
           return;
         }
         events_cursor_ = batch->next;
         for (const remote::SequencedEvent& e : batch->events) {
           // A copy: a subscriber may subscribe or unsubscribe.
           std::vector<EventCallback> subs;
           for (const auto& entry : subscribers_) subs.push_back(entry.second);
           for (const EventCallback& cb : subs) {
             cb(e.event);
             if (alive.expired()) return;
           }
         }
         AskEvents();
       });
}

TaskDriverHandler::TaskDriverHandler(Loop* loop, plugin::Registry* plugins, Registry* drivers, RemoteOptions options,
                                     Hooks hooks)
    : loop_(loop), plugins_(plugins), drivers_(drivers), options_(options), hooks_(std::move(hooks)) {}

TaskDriverHandler::~TaskDriverHandler() {
  *alive_ = false;
  for (const auto& [name, r] : remotes_) drivers_->Remove(name);
}

const char* TaskDriverHandler::type() const { return kPluginType; }

RemoteDriver* TaskDriverHandler::Find(const std::string& name) const {
  auto it = remotes_.find(name);
  return it == remotes_.end() ? nullptr : it->second.get();
}

Result<std::string> TaskDriverHandler::Validate(const plugin::Info& info) {
  if (info.transport != plugin::Transport::kTtrpc) {
    return Error(Code::kInvalidArgument,
                 "a TaskDriver plugin registers in outpost's plugins dir over ttRPC, not in kubelet's plugins dir");
  }
  for (char c : info.name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
      return Error(Code::kInvalidArgument,
                   "driver name \"" + info.name + "\" must be lower-case letters, digits, '-' and '_'");
    }
  }
  if (drivers_->Find(info.name) && !Find(info.name)) {
    return Error(Code::kAlreadyExists, "driver name \"" + info.name + "\" is a built-in driver's");
  }
  const auto& v = info.supported_versions;
  if (std::find(v.begin(), v.end(), remote::kApiVersion) == v.end()) {
    return Error(Code::kInvalidArgument, "none of the supported versions [" + JoinStrings(v, ", ") +
                                             "] is one this agent speaks (" + remote::kApiVersion + ")");
  }
  return std::string(remote::kApiVersion);
}

void TaskDriverHandler::Register(const plugin::Instance& instance, std::function<void(Status)> done) {
  std::weak_ptr<bool> alive = alive_;
  std::string name = instance.name;
  wire::RpcClient* client = instance.client;
  client->Call(kService, "Capabilities", "", options_.call_timeout_nanos,
               [this, alive, name, client, done = std::move(done)](Result<std::string> r) mutable {
                 if (alive.expired()) return;
                 auto caps = r.ok() ? remote::DecodeCapabilities(*r) : Result<Capabilities>(r.error());
                 if (!caps.ok()) return done(caps.error().Wrap("Capabilities"));
                 if (!client->connected()) return done(Error(Code::kUnavailable, "disconnected"));
                 client->Call(kService, "Fingerprint", "", options_.call_timeout_nanos,
                              [this, alive, name, client, c = *caps, done = std::move(done)](Result<std::string> f) {
                                if (alive.expired()) return;
                                auto fp = f.ok() ? remote::DecodeFingerprint(*f) : Result<Fingerprint>(f.error());
                                if (!fp.ok()) return done(fp.error().Wrap("Fingerprint"));
                                fp->updated_unix_nanos = WallNanos();
                                AskSchema(name, client, c, *fp, std::move(done));
                              });
               });
}

void TaskDriverHandler::AskSchema(const std::string& name, wire::RpcClient* client, const Capabilities& c,
                                  const Fingerprint& fp, std::function<void(Status)> done) {
  if (!client->connected()) return done(Error(Code::kUnavailable, "disconnected"));
  std::weak_ptr<bool> alive = alive_;
  client->Call(kService, "ConfigSchema", "", options_.call_timeout_nanos,
               [this, alive, name, c, fp, done = std::move(done)](Result<std::string> r) {
                 if (alive.expired()) return;
                 // A driver without a schema takes any config.
                 bool has_schema = r.ok() || r.error().code() != Code::kUnimplemented;
                 auto schema = r.ok() ? remote::DecodeConfigSchema(*r)
                                      : Result<std::vector<remote::SchemaField>>(r.error());
                 if (has_schema && !schema.ok()) return done(schema.error().Wrap("ConfigSchema"));
                 auto& slot = remotes_[name];
                 bool added_now = !slot;
                 if (!slot) {
                   slot = std::make_unique<RemoteDriver>(loop_, plugins_, name, options_);
                   Status added = drivers_->Add(slot.get());
                   if (!added.ok()) {
                     remotes_.erase(name);
                     return done(added);
                   }
                 }
                 slot->SetCapabilities(c);
                 slot->SetFingerprint(fp);
                 slot->SetSchema(has_schema, has_schema ? *schema : std::vector<remote::SchemaField>{});
                 RemoteDriver* driver = slot.get();
                 done(OkStatus());
                 if (alive.expired()) return;
                 driver->OnInstanceChanged();  // the TaskEvents poll, now that the instance is active
                 if (added_now && hooks_.added) hooks_.added(name);
               });
}

void TaskDriverHandler::Changed(const std::string& name) {
  RemoteDriver* r = Find(name);
  // Only an instance to call makes a change worth acting on: losing the
  // last connected one is the grace period's business (Expired).
  if (!r || !plugins_->Active(kPluginType, name)) return;
  r->OnInstanceChanged();
  if (hooks_.changed) hooks_.changed(name);
}

void TaskDriverHandler::Expired(const std::string& name) {
  if (hooks_.expired) hooks_.expired(name);
}

}  // namespace outpost::driver
