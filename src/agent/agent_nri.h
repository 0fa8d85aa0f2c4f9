// The agent's side of NRI (agent/agent_nri.cc): what nri::Adaptation
// needs from the rest of the agent. Internal to agent/.
#pragma once

#include "agent/agent.h"
#include "nri/adaptation.h"

namespace outpost::agent {

class Agent::NriHost : public nri::Host {
 public:
  explicit NriHost(Agent* agent) : agent_(agent) {}
  void ListState(std::vector<nri::PodSandbox>* pods, std::vector<nri::Container>* containers) override;
  Status ApplyUpdate(const std::string& plugin, const nri::ContainerUpdate& u) override;
  void Evict(const std::string& plugin, const nri::ContainerEviction& e) override;
  void PluginsChanged() override {}

 private:
  void Publish(const std::string& id, const std::string& type, const std::string& message);
  Agent* agent_;
};

}  // namespace outpost::agent
