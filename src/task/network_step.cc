// The network step of the start pipeline (task/lifecycle.cc has the order):
// a task of a job with its own network (mode none, bridge or cni/<name>)
// joins the job's namespace, which net/networks pins and wires once per job
// (the first task's start waits for the CNI ADD; the others find it ready).
// The task then sees the job's address and ports in its environment, and
// its driver joins the namespace before exec. Removing the network is the
// job layer's (when the job stops), not a step undone per task.
#include "base/strings.h"
#include "net/networks.h"
#include "task/entry.h"

namespace outpost::task {

void TaskManager::JoinNetwork(StartOp* op, DoneCallback done) {
  driver::TaskConfig& c = op->config;
  if (!c.net || !c.net->spec || !c.net->spec->Isolated()) return done(OkStatus());
  std::shared_ptr<const net::NetworkSpec> spec = c.net->spec;
  if (!options_.networks) {
    return done(Error(Code::kFailedPrecondition,
                      "network " + spec->mode + ": job networks are not available on this node: " +
                          options_.networks_problem));
  }
  if (c.job.empty()) return done(Error(Code::kInvalidArgument, "a network needs a job"));
  driver::Capabilities caps = op->driver->GetCapabilities();
  if (!caps.JoinsJobNetworks()) {
    return done(Error(Code::kFailedPrecondition,
                      "network " + spec->mode + ": driver " + c.driver + " cannot join a job's network (its network isolation: " +
                          JoinStrings(caps.network_isolation, ", ") + ")"));
  }
  std::weak_ptr<bool> alive = alive_;
  std::string id = c.id;
  options_.networks->Attach(c.job, spec, [this, alive, op, id, spec, done](Result<net::JobNetwork> n) {
    if (!alive.lock()) return;
    if (!n.ok()) return done(n.error());
    driver::TaskConfig& cfg = op->config;
    cfg.SetJoined(n->netns, spec->hostname);
    net::AddNetworkEnv(n->ip, n->ports, &cfg.env);
    if (Task* t = Find(id)) {
      t->record.handle.config.net = cfg.net;
      t->record.handle.config.env = cfg.env;
    }
    done(OkStatus());
  });
}

}  // namespace outpost::task
