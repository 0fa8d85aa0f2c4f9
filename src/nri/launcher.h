// Pre-installed NRI plugins: the executables of the plugin dir, launched by
// the runtime as upstream does (docs/nri.md). Owns: discovery (every
// non-directory entry with an exec bit, named "NN-name"; a badly named one
// is reported and skipped, where upstream refuses to start), each plugin's
// config (<conf.d>/NN-name.conf, else name.conf), the launch (a socketpair
// end as fd 3, exactly NRI_PLUGIN_NAME, NRI_PLUGIN_IDX and
// NRI_PLUGIN_SOCKET=3 in the environment), its stderr into the agent log
// with its name, and its life: killed when its connection is closed (a
// timeout, a failed sync), restarted with backoff when it dies (upstream
// leaves it dead), killed at Stop.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "loop/loop.h"

namespace outpost::nri {

class Adaptation;

class Launcher {
 public:
  explicit Launcher(Adaptation* owner);
  ~Launcher();

  void Start();
  void Stop();
  // From the adaptation: the plugin "NN-name" is ready (its backoff
  // resets), or its connection closed (its process is killed; the exit
  // schedules the restart).
  void OnReady(const std::string& id);
  void OnClosed(const std::string& id, const std::string& why);
  // Files that are not launched, and plugins that keep failing.
  std::vector<std::string> Problems() const;

 private:
  struct Proc;
  void Launch(Proc* p);
  void OnExit(Proc* p, int wait_status);
  void OnStderr(Proc* p);

  Adaptation* owner_;
  std::map<std::string, std::unique_ptr<Proc>> procs_;  // by "NN-name"
  std::vector<std::string> problems_;
  bool stopping_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::nri
