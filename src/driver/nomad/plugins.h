// The Nomad driver plugins of a node (docs/nomad-drivers.md). Owns: finding
// them as Nomad's loader does (every executable file of the plugin dir;
// sub-directories and files without an exec bit are skipped with a
// warning; a missing dir loads nothing), their stanzas (`nomad_plugins`
// in the config: args and config, by the binary's file name as Nomad's
// loader looks them up, or by the name the plugin reports), one
// NomadPlugin each, killing what an earlier worker left running (a pid
// file per binary), and the summary `outpost status` shows. Does not own:
// a plugin's life and calls (driver/nomad/nomad_driver).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "driver/nomad/nomad_driver.h"
#include "driver/registry.h"
#include "loop/loop.h"

namespace outpost::driver::nomad {

// The config's `nomad_plugins` object, checked: every error with its path
// (nomad_plugins.<name>.args[0]: ...).
Result<std::map<std::string, PluginStanza>> ParseStanzas(const picojson::value& v);

class Plugins {
 public:
  // options.stanza is filled in here; runtime_dir holds the plugins'
  // sockets and pid files.
  Plugins(Loop* loop, Registry* registry, std::string dir, std::map<std::string, PluginStanza> stanzas,
          std::string runtime_dir, NomadOptions options);
  ~Plugins();

  // Scans the dir and launches every plugin found.
  void Start();
  // Agent stop: each plugin is asked to shut down and stopped.
  void Shutdown();
  // Whether a plugin process still runs (after Shutdown: not yet exited).
  bool AnyRunning() const;

  // One line for `outpost status`; *ok is false when a plugin is failed or
  // restarting.
  std::string Summary(bool* ok) const;
  const std::vector<std::unique_ptr<NomadPlugin>>& plugins() const { return plugins_; }

 private:
  void KillLeftover(const std::string& path, const std::string& pid_file);

  Loop* loop_;
  Registry* registry_;
  std::string dir_;
  std::map<std::string, PluginStanza> stanzas_;
  std::string runtime_dir_;
  NomadOptions options_;
  std::vector<std::string> skipped_;
  std::vector<std::unique_ptr<NomadPlugin>> plugins_;
};

}  // namespace outpost::driver::nomad
