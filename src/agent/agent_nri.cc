// The agent's NRI runtime (docs/nri.md): nri::Adaptation set up from the
// config's "nri" object, and the Host it needs: the node's state for a
// plugin's Synchronize, live updates and evictions of tasks, and the job's
// part of a pod sandbox.
#include <unistd.h>

#include "agent/agent_nri.h"
#include "base/clock.h"
#include "base/log.h"
#include "job/manager.h"
#include "net/networks.h"
#include "nri/adaptation.h"
#include "task/events.h"
#include "task/manager.h"

namespace outpost::agent {

void Agent::NriHost::ListState(std::vector<nri::PodSandbox>* pods, std::vector<nri::Container>* containers) {
  if (agent_->tasks_) agent_->tasks_->NriState(pods, containers);
}

Status Agent::NriHost::ApplyUpdate(const std::string& plugin, const nri::ContainerUpdate& u) {
  if (!agent_->tasks_) return Error(Code::kUnavailable, "tasks are not available");
  Status st = agent_->tasks_->ApplyNriUpdate(u.container_id, u.resources.value_or(nri::Resources()));
  if (st.ok()) Publish(u.container_id, "nri", "limits updated by NRI plugin " + plugin);
  return st;
}

void Agent::NriHost::Evict(const std::string& plugin, const nri::ContainerEviction& e) {
  if (!agent_->tasks_) return;
  Publish(e.container_id, "evicted", "evicted by NRI plugin " + plugin + (e.reason.empty() ? "" : ": " + e.reason));
  agent_->tasks_->Stop(e.container_id, -1, "", [id = e.container_id](Status st) {
    log::WarnIfError(st, "cannot stop an evicted task", {{"task", id}});
  });
}

void Agent::NriHost::Publish(const std::string& id, const std::string& type, const std::string& message) {
  auto v = agent_->tasks_->Inspect(id);
  driver::TaskEvent ev;
  ev.task_id = id;
  if (v.ok()) {
    ev.task_name = v->config.name;
    ev.job = v->config.job;
  }
  ev.timestamp_unix_nanos = WallNanos();
  ev.type = type;
  ev.message = message;
  agent_->events_.Publish(ev);
}

Status Agent::CreateNri() {
  const Config::Nri& c = config_.nri;
  if (!c.enable) return OkStatus();
  nri::Config nc;
  nc.enabled = true;
  nc.socket_path = c.socket;
  nc.plugin_dir = c.plugin_dir;
  nc.plugin_config_dir = c.plugin_config_dir;
  nc.registration_timeout_ms = c.registration_timeout_nanos / 1000000;
  nc.request_timeout_ms = c.request_timeout_nanos / 1000000;
  nc.required_plugins = c.required_plugins;
  for (const auto& [name, p] : c.plugins) {
    nri::PluginPolicy pp;
    pp.request_timeout_ms = p.request_timeout_nanos / 1000000;
    pp.fail_policy = p.fail ? nri::FailPolicy::kFail : nri::FailPolicy::kIgnore;
    nc.plugins[name] = pp;
  }
  nc.runtime_version = OUTPOST_VERSION;
  nri_host_ = std::make_unique<NriHost>(this);
  auto a = nri::Adaptation::Create(loop_.get(), nc, nri_host_.get());
  if (!a.ok()) return a.error().Wrap("nri");
  nri_ = std::move(*a);
  return OkStatus();
}

// A job's part of its pod: labels, annotations, the address on its network.
void Agent::FillNriPod(const std::string& job, nri::PodSandbox* pod) const {
  if (jobs_) {
    auto j = jobs_->Inspect(job);
    if (j.ok()) {
      pod->labels = j->spec.labels;
      pod->annotations = j->spec.annotations;
    }
  }
  if (networks_) {
    for (const net::JobNetwork* n : networks_->Attached()) {
      if (n->job == job && !n->ip.empty()) pod->ips.push_back(n->ip);
    }
  }
}

Status Agent::StartNri() {
  if (!nri_) return OkStatus();
  Status st = nri_->Start();
  if (!st.ok()) return st.error().Wrap("nri");
  return OkStatus();
}

}  // namespace outpost::agent
