#include "driver/nomad/plugins.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::driver::nomad {

Result<std::map<std::string, PluginStanza>> ParseStanzas(const picojson::value& v) {
  std::map<std::string, PluginStanza> out;
  json::Errors errors;
  if (!v.is<picojson::object>()) {
    return Error(Code::kInvalidArgument,
                 std::string("nomad_plugins: expected an object of plugin names, got ") + json::TypeName(v));
  }
  for (const auto& [name, body] : v.get<picojson::object>()) {
    const std::string path = "nomad_plugins." + name;
    if (name.empty() || name.find('/') != std::string::npos) {
      errors.push_back(path + ": a plugin's name is a file name (no '/')");
      continue;
    }
    json::ObjectReader r(body, path, &errors);
    PluginStanza s;
    r.StringList("args", &s.args);
    if (const picojson::value* c = r.Get("config")) {
      if (!c->is<picojson::object>()) {
        errors.push_back(path + ".config: expected an object, got " + std::string(json::TypeName(*c)));
      } else {
        s.has_config = true;
        s.config = *c;
      }
    }
    r.RejectUnknown();
    out[name] = std::move(s);
  }
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  return out;
}

Plugins::Plugins(Loop* loop, Registry* registry, std::string dir, std::map<std::string, PluginStanza> stanzas,
                 std::string runtime_dir, NomadOptions options)
    : loop_(loop),
      registry_(registry),
      dir_(std::move(dir)),
      stanzas_(std::move(stanzas)),
      runtime_dir_(std::move(runtime_dir)),
      options_(std::move(options)) {
  options_.stanza = [this](const std::string& file, const std::string& name) -> const PluginStanza* {
    // Nomad's loader: by the executable's name; the plugin's own name too.
    auto it = stanzas_.find(file);
    if (it == stanzas_.end() && !name.empty()) it = stanzas_.find(name);
    return it == stanzas_.end() ? nullptr : &it->second;
  };
}

Plugins::~Plugins() = default;

void Plugins::Start() {
  if (dir_.empty()) return;
  auto names = sys::ListDir(dir_);
  if (!names.ok()) {
    if (names.error().sys_errno() == ENOENT) {
      log::Info("no Nomad plugins: the plugin dir does not exist", {{"dir", dir_}});
    } else {
      skipped_.push_back(dir_ + ": " + names.error().message());
      log::Warn("cannot read the Nomad plugin dir", {{"dir", dir_}, {"error", names.error().message()}});
    }
    return;
  }
  std::sort(names->begin(), names->end());
  (void)sys::MkdirAll(runtime_dir_, 0700);
  for (const std::string& name : *names) {
    std::string path = dir_ + "/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      log::Warn("skipping subdir in the Nomad plugin dir", {{"subdir", path}});
      continue;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) {
      log::Warn("skipping un-executable file in the Nomad plugin dir", {{"file", path}});
      continue;
    }
    KillLeftover(path, runtime_dir_ + "/" + name + ".pid");
    auto p = std::make_unique<NomadPlugin>(loop_, registry_, path, options_);
    p->Start();
    if (p->pid() > 0) (void)sys::WriteFileAtomic(runtime_dir_ + "/" + name + ".pid", std::to_string(p->pid()), 0600,
                                                 sys::Durability::kProcessCrash);
    plugins_.push_back(std::move(p));
  }
}

// A plugin a worker started outlives it (the keeper reaps it then): the
// next worker kills it before starting its own, so there is never two.
void Plugins::KillLeftover(const std::string& path, const std::string& pid_file) {
  auto text = sys::ReadFile(pid_file, 64);
  if (!text.ok()) return;
  std::string digits = *text;
  while (!digits.empty() && (digits.back() == '\n' || digits.back() == ' ')) digits.pop_back();
  auto pid = ParseInt(digits, 2, 4194304);
  (void)::unlink(pid_file.c_str());
  if (!pid.ok()) return;
  char exe[4096];
  std::string link = "/proc/" + std::to_string(*pid) + "/exe";
  ssize_t n = ::readlink(link.c_str(), exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  if (std::string(exe) != path) return;
  log::Info("killing the Nomad plugin an earlier worker left", {{"path", path}, {"pid", std::to_string(*pid)}});
  ::kill(static_cast<pid_t>(*pid), SIGKILL);
}

void Plugins::Shutdown() {
  for (auto& p : plugins_) p->Shutdown();
}

bool Plugins::AnyRunning() const {
  for (const auto& p : plugins_) {
    if (p->pid() > 0) return true;
  }
  return false;
}

std::string Plugins::Summary(bool* ok) const {
  *ok = true;
  std::string out = Format("%zu plugin%s in %s", plugins_.size(), plugins_.size() == 1 ? "" : "s", dir_.c_str());
  for (const auto& p : plugins_) {
    std::string state;
    switch (p->state()) {
      case NomadPlugin::State::kReady: state = "ready, version " + p->version(); break;
      case NomadPlugin::State::kStarting: state = "starting"; break;
      case NomadPlugin::State::kRestarting:
        state = p->problem();
        *ok = false;
        break;
      case NomadPlugin::State::kFailed:
        state = "failed: " + p->problem();
        *ok = false;
        break;
    }
    out += "; " + p->Name() + " (" + sys::Basename(p->path()) + "): " + state;
  }
  for (const std::string& s : skipped_) out += "; skipped " + s;
  return out;
}

}  // namespace outpost::driver::nomad
