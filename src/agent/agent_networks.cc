// The agent's job networks (docs/networking.md): net::Networks set up from
// the config (root only), and its recovery once the jobs' is done.
#include <unistd.h>

#include "agent/agent.h"
#include "base/clock.h"
#include "job/manager.h"
#include "net/networks.h"
#include "task/events.h"

namespace outpost::agent {

Status Agent::StartNetworks() {
  const Config::Network& c = config_.network;
  net::Networks::Options no;
  no.netns_dir = c.netns_dir;
  no.config_dir = c.cni_config_dir;
  no.cache_dir = config_.CniCacheDir();
  no.plugins.path = c.cni_path;
  no.plugins.timeout_nanos = c.cni_timeout_nanos;
  no.bridge.network = c.bridge_name;
  no.bridge.bridge = c.bridge_interface;
  no.bridge.subnet = c.bridge_subnet;
  no.bridge.admin_chain = c.bridge_admin_chain;
  // host-local's reservations on tmpfs, like the namespaces they belong
  // to: a reboot frees both (Nomad PR #24650).
  no.bridge.ipam_data_dir = config_.runtime_dir + "/cni/networks";
  task::EventLog* events = &events_;
  no.event = [events](const std::string& job, const std::string& type, const std::string& message) {
    driver::TaskEvent ev;
    ev.job = job;
    ev.timestamp_unix_nanos = WallNanos();
    ev.type = type;
    ev.message = message;
    events->Publish(ev);
  };
  if (::geteuid() != 0) {
    // Pinning namespaces and the plugins' work need root.
    networks_problem_ = "the agent does not run as root";
    log::Warn("job networks unavailable", {{"reason", networks_problem_}});
    return OkStatus();
  }
  auto n = net::Networks::Create(loop_.get(), no);
  if (!n.ok()) return n.error().Wrap("networks");
  networks_ = std::move(*n);
  return OkStatus();
}

void Agent::RecoverJobs() {
  if (!jobs_ || jobs_->recovered()) return;
  jobs_->Recover();
  if (!networks_ || networks_->recovered()) return;
  std::map<std::string, std::shared_ptr<const net::NetworkSpec>> wanted;
  for (const job::JobView& j : jobs_->List()) {
    if (j.running && j.spec.network.Isolated()) {
      wanted[j.id] = std::make_shared<const net::NetworkSpec>(j.spec.network);
    }
  }
  networks_->Recover(wanted);
}

}  // namespace outpost::agent
