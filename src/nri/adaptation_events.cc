// The adaptation's events: one queue, one event at a time; plugins called in
// index order; CreateContainer merged and validated; notifications with
// the StateChange fallback for old plugins.
#include <algorithm>

#include "base/log.h"
#include "base/strings.h"
#include "nri/adaptation.h"
#include "nri/plugin.h"
#include "nriproto/codec.h"

namespace outpost::nri {

namespace {

// The nine events an old plugin gets through StateChange.
bool HasStateChangeForm(Event e) {
  switch (e) {
    case Event::kRunPodSandbox:
    case Event::kPostUpdatePodSandbox:
    case Event::kStopPodSandbox:
    case Event::kRemovePodSandbox:
    case Event::kPostCreateContainer:
    case Event::kStartContainer:
    case Event::kPostStartContainer:
    case Event::kPostUpdateContainer:
    case Event::kRemoveContainer:
      return true;
    default:
      return false;
  }
}

std::string DescribeClaims(const std::vector<Claim>& claims, size_t from, const std::string& plugin) {
  std::string out;
  for (size_t i = from; i < claims.size(); ++i) {
    const Claim& c = claims[i];
    if (c.plugin != plugin) continue;
    if (!out.empty()) out += ", ";
    out += c.removed ? "removed " : "";
    out += FieldName(c.field);
    if (!c.key.empty()) out += " " + c.key;
  }
  return out.empty() ? "no change" : "adjusted " + out;
}

}  // namespace

struct CreateRun {
  CreateResult result;
  // RunPodSandbox, for the pod's first start: its subscribers (plugin
  // number, id), request and the first fail-policy failure among them.
  std::vector<std::pair<uint64_t, std::string>> pod_order;
  PodContainerRequest pod_req;
  std::string pod_payload;
  std::string pod_failure;
  std::vector<std::pair<uint64_t, std::string>> order;  // plugin number, id
  std::vector<PluginInstance> consulted;
  std::vector<std::pair<std::string, ContainerEviction>> evictions;  // plugin, eviction
  std::map<std::string, std::string> updated_by;                     // container id -> plugin
  CreateOutcome outcome;
  Adaptation::CreateDone done;
  std::function<void()> finished;
  CreateRun(const PodSandbox& pod, const Container& ctr) : result(pod, ctr) {}
};

struct NotifyRun {
  Event event = Event::kUnknown;
  PodContainerRequest req;
  std::string payload;  // the dedicated RPC's request
  std::vector<uint64_t> order;
  std::vector<ContainerUpdate> updates;  // StopContainer answers
  std::map<std::string, std::string> updated_by;
  std::function<void()> done;
  std::function<void()> finished;
};

void Adaptation::Enqueue(Job job) {
  queue_.push_back(std::move(job));
  if (!busy_) RunNext();
}

void Adaptation::RunNext() {
  if (queue_.empty()) {
    busy_ = false;
    return;
  }
  busy_ = true;
  Job job = std::move(queue_.front());
  queue_.pop_front();
  std::weak_ptr<bool> alive = alive_;
  auto called = std::make_shared<bool>(false);
  job([this, alive, called] {
    if (*called) return;
    *called = true;
    // The next event starts from the loop, never inside this one's stack.
    loop_->Defer([this, alive] {
      if (alive.lock()) RunNext();
    });
  });
}

namespace {

PluginConn* FindPlugin(const std::vector<std::unique_ptr<PluginConn>>& plugins, uint64_t id) {
  for (const auto& p : plugins) {
    if (p->id == id) return p.get();
  }
  return nullptr;
}

// "logger" of "10-logger".
std::string NameOf(const std::string& id) { return id.size() > 3 ? id.substr(3) : id; }

}  // namespace

void Adaptation::NotifyOne(PluginConn* p, Event event, const PodContainerRequest* req, const std::string* payload,
                           std::function<void(Result<std::string>)> done) {
  if (p->state_change && HasStateChangeForm(event)) {
    StateChangeEvent ev;
    ev.event = event;
    ev.pod = req->pod;
    ev.container = req->container;
    return p->Call("StateChange", nriproto::Encode(ev), std::move(done));
  }
  const bool probe = HasStateChangeForm(event);
  std::weak_ptr<bool> alive = alive_;
  p->Call(
      EventMethod(event), *payload,
      [this, alive, p, event, req, payload, probe, done = std::move(done)](Result<std::string> r) mutable {
        if (!alive.lock()) return;
        if (probe && !r.ok() && !p->closed() && r.error().code() == Code::kUnimplemented) {
          // An old plugin (before v0.12): it has only StateChange for this.
          log::Info("nri: plugin has no dedicated event RPCs; using StateChange",
                    {{"plugin", p->Id()}, {"event", EventMethod(event)}});
          p->state_change = true;
          return NotifyOne(p, event, req, payload, std::move(done));
        }
        done(std::move(r));
      },
      probe);
}

// ---- a start: RunPodSandbox, CreateContainer -------------------------------

void Adaptation::CreateContainer(const PodSandbox& pod, const Container& ctr, CreateDone done, bool run_pod) {
  auto run = std::make_shared<CreateRun>(pod, ctr);
  run->done = std::move(done);
  std::weak_ptr<bool> alive = alive_;
  Enqueue([this, alive, run, run_pod](std::function<void()> finished) {
    if (!alive.lock()) return;
    run->finished = std::move(finished);
    if (run_pod) {
      for (PluginConn* p : Ordered(Event::kRunPodSandbox)) run->pod_order.emplace_back(p->id, p->Id());
    }
    if (run->pod_order.empty()) return CreateStart(run);
    run->pod_req.pod = run->result.pod();
    run->pod_payload = nriproto::Encode(run->pod_req);
    PodNext(run, 0);
  });
}

// Every subscriber gets the pod's RunPodSandbox, whatever happens to the
// others: the pod exists for all of them once it was sent.
void Adaptation::PodNext(std::shared_ptr<CreateRun> run, size_t i) {
  auto closed = [this](CreateRun* r, const std::string& id, const std::string& why) {
    r->outcome.plugins.push_back({id, "skipped: " + why});
    if (PolicyOf(NameOf(id)) == FailPolicy::kFail && r->pod_failure.empty()) {
      r->pod_failure = Format("NRI plugin %s (fail_policy \"fail\"): %s", id.c_str(), why.c_str());
    }
  };
  PluginConn* p = nullptr;
  for (; i < run->pod_order.size(); ++i) {
    p = FindPlugin(plugins_, run->pod_order[i].first);
    if (p && !p->closed()) break;
    closed(run.get(), run->pod_order[i].second, "closed: " + (p ? p->close_reason : std::string("gone")));
  }
  if (i == run->pod_order.size()) {
    if (run->pod_failure.empty()) return CreateStart(run);
    run->done(Error(Code::kUnavailable, run->pod_failure));
    return run->finished();
  }
  std::weak_ptr<bool> alive = alive_;
  const std::string id = run->pod_order[i].second;
  NotifyOne(p, Event::kRunPodSandbox, &run->pod_req, &run->pod_payload,
            [this, alive, run, i, p, id, closed](Result<std::string> r) {
              if (!alive.lock()) return;
              if (p->closed()) {
                closed(run.get(), id, "closed: " + p->close_reason);
              } else if (!r.ok()) {
                log::Warn("nri: plugin failed an event",
                          {{"plugin", id}, {"event", "RunPodSandbox"}, {"error", r.error().message()}});
              }
              PodNext(run, i + 1);
            });
}

void Adaptation::CreateStart(std::shared_ptr<CreateRun> run) {
  std::string missing = MissingRequired();
  if (!missing.empty()) {
    run->outcome.wait_for = std::move(missing);
    run->done(std::move(run->outcome));
    return run->finished();
  }
  for (PluginConn* p : Ordered(Event::kCreateContainer)) run->order.emplace_back(p->id, p->Id());
  CreateNext(run, 0);
}

bool Adaptation::ClosedDuringStart(const std::shared_ptr<CreateRun>& run, const std::string& id,
                                   const std::string& name, const std::string& why) {
  run->outcome.plugins.push_back({id, "skipped: " + why});
  if (PolicyOf(name) == FailPolicy::kFail) {
    run->done(Error(Code::kUnavailable, Format("NRI plugin %s (fail_policy \"fail\"): %s", id.c_str(), why.c_str())));
    run->finished();
    return true;
  }
  if (!IsRequired(name)) return false;
  // Another connection of the same name may be ready: the start then asks
  // again at once.
  std::string missing = MissingRequired();
  run->outcome.wait_for = missing.empty() ? name : missing;
  run->outcome.undo = !run->consulted.empty();
  run->done(std::move(run->outcome));
  run->finished();
  return true;
}

void Adaptation::CreateNext(std::shared_ptr<CreateRun> run, size_t i) {
  auto fail = [run](Error e) {
    run->done(std::move(e));
    run->finished();
  };
  // A plugin closed since the order was taken (by another's event).
  for (; i < run->order.size(); ++i) {
    PluginConn* p = FindPlugin(plugins_, run->order[i].first);
    if (p && !p->closed()) break;
    const std::string& id = run->order[i].second;
    if (ClosedDuringStart(run, id, NameOf(id), "closed: " + (p ? p->close_reason : std::string("gone")))) return;
  }
  if (i == run->order.size()) return Validate(run);
  PluginConn* p = FindPlugin(plugins_, run->order[i].first);
  const std::string id = run->order[i].second;
  const std::string name = p->name;
  run->consulted.push_back({p->name, p->index});
  PodContainerRequest req;
  req.pod = run->result.pod();
  req.container = run->result.request();
  std::weak_ptr<bool> alive = alive_;
  const size_t claims_before = run->result.claims().size();
  p->Call("CreateContainer", nriproto::Encode(req),
          [this, alive, run, i, id, name, p, claims_before, fail](Result<std::string> r) {
            if (!alive.lock()) return;
            if (!r.ok()) {
              if (p->closed()) {
                if (!ClosedDuringStart(run, id, name, "closed: " + p->close_reason)) CreateNext(run, i + 1);
                return;
              }
              // An error the plugin returned: the creation fails (upstream).
              return fail(r.error().Wrap(Format("NRI plugin %s failed CreateContainer", id.c_str())));
            }
            CreateContainerResponse resp;
            Status st = nriproto::Decode(*r, &resp);
            if (!st.ok()) {
              p->Close("protocol error: " + st.error().message());
              if (!ClosedDuringStart(run, id, name, "closed: protocol error: " + st.error().message())) {
                CreateNext(run, i + 1);
              }
              return;
            }
            st = run->result.Apply(id, resp);
            if (!st.ok()) return fail(st.error());
            for (auto& e : resp.evict) run->evictions.emplace_back(id, e);
            for (const auto& u : resp.update) run->updated_by[u.container_id] = id;
            run->outcome.plugins.push_back({id, DescribeClaims(run->result.claims(), claims_before, id)});
            CreateNext(run, i + 1);
          });
}

void Adaptation::Validate(std::shared_ptr<CreateRun> run) {
  std::vector<PluginConn*> validators = Ordered(Event::kValidateContainerAdjustment);
  auto finish = [this, run] {
    const CreateResult& res = run->result;
    if (!res.claims().empty() || !res.adjustment().hooks.value_or(Hooks()).empty()) {
      run->outcome.adjust = res.adjustment();
    }
    run->outcome.claims = res.claims();
    ApplyMerged(res.updates(), run->updated_by);
    for (const auto& [plugin, e] : run->evictions) host_->Evict(plugin, e);
    run->done(std::move(run->outcome));
    run->finished();
  };
  if (validators.empty()) return finish();
  ValidateContainerAdjustmentRequest req;
  req.pod = run->result.pod();
  req.container = run->result.pristine();
  req.adjust = run->result.adjustment();
  req.update = run->result.updates();
  req.owners = run->result.owners();
  req.plugins = run->consulted;
  const std::string payload = nriproto::Encode(req);
  // Validators run in parallel; the first rejection or failure decides.
  struct Pending {
    size_t left;
    std::string error;
  };
  auto pending = std::make_shared<Pending>(Pending{validators.size(), ""});
  std::weak_ptr<bool> alive = alive_;
  for (PluginConn* p : validators) {
    std::string id = p->Id();
    p->Call("ValidateContainerAdjustment", payload, [alive, run, pending, id, finish](Result<std::string> r) {
      if (!alive.lock()) return;
      if (pending->error.empty()) {
        if (!r.ok()) {
          pending->error = Format("validator plugin %s failed: %s", id.c_str(), r.error().message().c_str());
        } else {
          ValidateContainerAdjustmentResponse resp;
          Status st = nriproto::Decode(*r, &resp);
          if (!st.ok()) {
            pending->error = Format("validator plugin %s failed: %s", id.c_str(), st.error().message().c_str());
          } else if (resp.reject) {
            pending->error = Format("validator \"%s\" rejected container adjustment, reason: %s", id.c_str(),
                                    resp.reason.c_str());
          } else {
            run->outcome.plugins.push_back({id, "validated"});
          }
        }
      }
      if (--pending->left > 0) return;
      if (!pending->error.empty()) {
        run->done(Error(Code::kPermissionDenied, pending->error));
        return run->finished();
      }
      finish();
    });
  }
}

// ---- notifications, StopContainer -------------------------------------------

void Adaptation::Notify(Event event, const PodSandbox& pod, const std::optional<Container>& ctr,
                        std::function<void()> done) {
  auto run = std::make_shared<NotifyRun>();
  run->event = event;
  run->req.pod = pod;
  run->req.container = ctr;
  run->done = std::move(done);
  std::weak_ptr<bool> alive = alive_;
  Enqueue([this, alive, run](std::function<void()> finished) {
    if (!alive.lock()) return;
    run->finished = std::move(finished);
    for (PluginConn* p : Ordered(run->event)) run->order.push_back(p->id);
    if (!run->order.empty()) run->payload = nriproto::Encode(run->req);
    NotifyNext(run, 0);
  });
}

void Adaptation::NotifyNext(std::shared_ptr<NotifyRun> run, size_t i) {
  PluginConn* p = nullptr;
  for (; i < run->order.size(); ++i) {
    p = FindPlugin(plugins_, run->order[i]);
    if (p && !p->closed()) break;
  }
  if (i >= run->order.size()) {
    if (!run->updates.empty()) ApplyMerged(run->updates, run->updated_by);
    if (run->done) run->done();
    return run->finished();
  }
  std::weak_ptr<bool> alive = alive_;
  std::string id = p->Id();
  NotifyOne(p, run->event, &run->req, &run->payload, [this, alive, run, i, p, id](Result<std::string> r) {
    if (!alive.lock()) return;
    if (!r.ok()) {
      log::Warn("nri: plugin failed an event",
                {{"plugin", id}, {"event", EventMethod(run->event)}, {"error", r.error().message()}});
    } else if (run->event == Event::kStopContainer) {
      StopContainerResponse resp;
      Status st = nriproto::Decode(*r, &resp);
      if (!st.ok()) {
        p->Close("protocol error: " + st.error().message());
      } else {
        for (auto& u : resp.update) {
          run->updated_by[u.container_id] = id;
          run->updates.push_back(std::move(u));
        }
      }
    }
    NotifyNext(run, i + 1);
  });
}

// ---- UpdateContainer, UpdatePodSandbox ---------------------------------------

void Adaptation::UpdateContainer(const PodSandbox& pod, const Container& ctr, const Resources& requested,
                                 std::function<void(Result<Resources>)> done) {
  std::weak_ptr<bool> alive = alive_;
  Enqueue([this, alive, pod, ctr, requested, done = std::move(done)](std::function<void()> finished) {
    if (!alive.lock()) return;
    struct Run {
      UpdateResult result;
      std::vector<uint64_t> order;
      std::vector<std::pair<std::string, ContainerEviction>> evict;
      std::map<std::string, std::string> updated_by;
      std::string payload;
      Run(const std::string& id, const Resources& r) : result(id, r) {}
    };
    auto run = std::make_shared<Run>(ctr.id, requested);
    for (PluginConn* p : Ordered(Event::kUpdateContainer)) run->order.push_back(p->id);
    UpdateContainerRequest req;
    req.pod = pod;
    req.container = ctr;
    req.linux_resources = requested;
    run->payload = nriproto::Encode(req);
    auto step = std::make_shared<std::function<void(size_t)>>();
    *step = [this, alive, run, step, done, finished](size_t i) {
      PluginConn* p = nullptr;
      for (; i < run->order.size(); ++i) {
        p = FindPlugin(plugins_, run->order[i]);
        if (p && !p->closed()) break;
      }
      if (i >= run->order.size()) {
        ApplyMerged(run->result.others(), run->updated_by);
        for (const auto& [plugin, e] : run->evict) host_->Evict(plugin, e);
        done(run->result.target_resources());
        auto fin = finished;
        *step = nullptr;  // breaks the cycle (this closure is gone after it: locals only)
        return fin();
      }
      std::string id = p->Id();
      p->Call("UpdateContainer", run->payload, [alive, run, step, i, id, p, done, finished](Result<std::string> r) {
        if (!alive.lock() || !*step) return;
        if (r.ok()) {
          UpdateContainerResponse resp;
          Status st = nriproto::Decode(*r, &resp);
          if (!st.ok()) {
            p->Close("protocol error: " + st.error().message());
          } else {
            st = run->result.Apply(id, resp.update);
            if (!st.ok()) {
              done(st.error());
              *step = nullptr;
              return finished();
            }
            for (auto& e : resp.evict) run->evict.emplace_back(id, std::move(e));
            for (const auto& u : resp.update) run->updated_by[u.container_id] = id;
          }
        } else if (!p->closed()) {
          done(r.error().Wrap(Format("NRI plugin %s failed UpdateContainer", id.c_str())));
          *step = nullptr;
          return finished();
        }
        (*step)(i + 1);
      });
    };
    (*step)(0);
  });
}

void Adaptation::UpdatePodSandbox(const PodSandbox& pod, const Resources& resources, std::function<void()> done) {
  std::weak_ptr<bool> alive = alive_;
  Enqueue([this, alive, pod, resources, done = std::move(done)](std::function<void()> finished) {
    if (!alive.lock()) return;
    UpdatePodSandboxRequest req;
    req.pod = pod;
    req.linux_resources = resources;
    auto order = std::make_shared<std::vector<uint64_t>>();
    for (PluginConn* p : Ordered(Event::kUpdatePodSandbox)) order->push_back(p->id);
    auto payload = std::make_shared<std::string>(nriproto::Encode(req));
    auto step = std::make_shared<std::function<void(size_t)>>();
    *step = [this, alive, order, payload, step, done, finished](size_t i) {
      PluginConn* p = nullptr;
      for (; i < order->size(); ++i) {
        p = FindPlugin(plugins_, (*order)[i]);
        if (p && !p->closed()) break;
      }
      if (i >= order->size()) {
        if (done) done();
        auto fin = finished;
        *step = nullptr;  // breaks the cycle (this closure is gone after it: locals only)
        return fin();
      }
      std::string id = p->Id();
      p->Call("UpdatePodSandbox", *payload, [alive, step, i, id](Result<std::string> r) {
        if (!alive.lock() || !*step) return;
        if (!r.ok()) log::Warn("nri: plugin failed UpdatePodSandbox", {{"plugin", id}, {"error", r.error().message()}});
        (*step)(i + 1);
      });
    };
    (*step)(0);
  });
}

}  // namespace outpost::nri
