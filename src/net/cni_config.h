// CNI network configurations, as the runtime (libcni's role) reads them
// (docs/networking.md "Networks"). Owns: parsing one `.conflist` (a list of
// plugins) or `.conf`/`.json` (one plugin, taken as a one-element list)
// with errors that name the file and the field; the rules a network must
// meet before any plugin runs (name, cniVersion no newer than kMaxCniVersion,
// each plugin's `type` a plain file name, `disableCheck` as a boolean or the
// strings "true"/"false", `cniVersions` picking the highest supported); and
// ConfigDir, the config directory watched with loop/dir_watch: one network
// per unique name, the first file in lexical order winning (`.conflist`
// files before `.conf`/`.json`, as libcni looks them up), later duplicates
// listed as problems.
//
// Does not run plugins (net/cni_exec) and does not know about jobs.
#pragma once

#include <picojson.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "loop/dir_watch.h"
#include "loop/loop.h"

namespace outpost::net {

// The newest CNI spec version this runtime speaks: the Debian plugins
// (containernetworking-plugins 1.1.1) support up to 1.0.0, and we never send
// GC or STATUS.
constexpr const char* kMaxCniVersion = "1.0.0";

// Compares two dotted versions ("0.4.0" < "1.0.0"); malformed parts count
// as 0. <0, 0, >0.
int CompareVersions(const std::string& a, const std::string& b);

struct PluginConf {
  std::string type;                    // the binary's name, found in cni_path
  picojson::object raw;                // the plugin object as written (unknown fields kept)
  std::map<std::string, bool> capabilities;  // `capabilities` (true ones matter)
  bool HasCapability(const std::string& c) const {
    auto it = capabilities.find(c);
    return it != capabilities.end() && it->second;
  }
};

struct NetworkList {
  std::string name;
  std::string cni_version;  // what every plugin is sent
  bool disable_check = false;
  std::vector<PluginConf> plugins;
  std::string file;   // where it came from ("" for the built-in bridge)
  std::string bytes;  // the file's content as read (for the result cache)
};

// Parses a network config. conflist: a `.conflist` (needs `plugins`);
// otherwise a single plugin (`.conf`, `.json`). file names the source in
// errors: "<file>: plugins[1].type: missing".
Result<NetworkList> ParseNetworkList(const std::string& text, bool conflist, const std::string& file);
// Whether a name in the config dir is a config file (.conflist, .conf, .json).
bool IsConfigFileName(const std::string& name);

// The config directory, watched. Networks keep the first file per name.
class ConfigDir {
 public:
  // changed runs (from the loop) after the set of networks changed.
  static Result<std::unique_ptr<ConfigDir>> Start(Loop* loop, const std::string& dir,
                                                  std::function<void()> changed);
  ~ConfigDir();

  const std::string& dir() const { return dir_; }
  // NotFound "network 'x' is not in /etc/cni/net.d (networks: a, b)".
  Result<const NetworkList*> Find(const std::string& name) const;
  const std::map<std::string, NetworkList>& networks() const { return networks_; }
  // file -> why it is not used (unreadable, invalid, duplicate name).
  const std::map<std::string, std::string>& problems() const { return problems_; }
  // Why the directory itself is not watched ("" = it is).
  std::string DirProblem() const;
  void Rescan();

 private:
  ConfigDir(std::string dir, std::function<void()> changed) : dir_(std::move(dir)), changed_(std::move(changed)) {}
  void Reload();

  std::string dir_;
  std::function<void()> changed_;
  std::unique_ptr<loop::DirWatch> watch_;
  std::map<std::string, NetworkList> networks_;
  std::map<std::string, std::string> problems_;
};

}  // namespace outpost::net
