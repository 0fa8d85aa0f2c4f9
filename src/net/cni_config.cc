// CNI network configs: parsing and the watched config directory. The rules
// follow libcni (ConfListFromBytes, ConfFromBytes, LoadConfList) so that a
// directory that works with cnitool works here, and one that does not fails
// before any plugin runs, with the file and the field named.
#include "net/cni_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "net/cni_result.h"

namespace outpost::net {

namespace {

// A config file is read whole; a real one is a few hundred bytes.
constexpr size_t kMaxConfigBytes = 1 << 20;

// "1", "0.4", "0.4.0": what a cniVersion may look like (libcni parses it as
// semver; anything else fails there too, only later).
bool IsVersion(const std::string& v) {
  if (v.empty() || v.size() > 32) return false;
  int parts = 0;
  size_t digits = 0;
  for (char c : v) {
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c == '.') {
      if (digits == 0) return false;
      digits = 0;
      ++parts;
    } else {
      return false;
    }
  }
  return digits > 0 && parts <= 2;
}

// ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$, libcni's network name rule.
bool IsNetworkName(const std::string& n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum) continue;
    if (i > 0 && (c == '_' || c == '.' || c == '-')) continue;
    return false;
  }
  return true;
}

std::string Quote(const std::string& s) { return QuoteForMessage(s); }

// A required string field; records "<path>: missing" or a type error.
bool RequiredString(json::ObjectReader* r, const std::string& key, std::string* out, json::Errors* errors) {
  if (!r->Has(key)) {
    errors->push_back(r->PathOf(key) + ": missing");
    return false;
  }
  size_t before = errors->size();
  r->String(key, out);
  return errors->size() == before;
}

void ReadPlugin(const picojson::value& v, const std::string& path, PluginConf* p, json::Errors* errors) {
  json::ObjectReader r(v, path, errors);
  if (!r.ok()) return;
  p->raw = v.get<picojson::object>();
  if (RequiredString(&r, "type", &p->type, errors)) {
    // The type is a file name looked up in cni_path; a path would run any
    // binary on the host.
    if (p->type.empty()) {
      r.Fail("type", "must not be empty");
    } else if (p->type.find('/') != std::string::npos || p->type == "." || p->type == "..") {
      r.Fail("type", Quote(p->type) + " must be a plain file name (no '/')");
    }
  }
  const picojson::value* caps = r.Get("capabilities");
  if (caps == nullptr) return;
  if (!caps->is<picojson::object>()) {
    r.Fail("capabilities", std::string("expected an object, got ") + json::TypeName(*caps));
    return;
  }
  for (const auto& [name, on] : caps->get<picojson::object>()) {
    if (!on.is<bool>()) {
      errors->push_back(r.PathOf("capabilities") + "." + name + ": expected true or false, got " +
                        json::TypeName(on));
      continue;
    }
    p->capabilities[name] = on.get<bool>();
  }
}

// cniVersion and cniVersions: the highest listed version this agent speaks
// wins over cniVersion (libcni 1.1); cniVersion is the fallback.
void ReadVersion(json::ObjectReader* r, NetworkList* list, json::Errors* errors) {
  std::string version;
  bool has_version = r->Has("cniVersion");
  if (has_version) {
    size_t before = errors->size();
    r->String("cniVersion", &version);
    if (errors->size() != before) return;
  }
  const picojson::value* versions = r->Get("cniVersions");
  std::string best;
  if (versions != nullptr) {
    if (!versions->is<picojson::array>()) {
      r->Fail("cniVersions", std::string("expected an array of strings, got ") + json::TypeName(*versions));
      return;
    }
    const auto& arr = versions->get<picojson::array>();
    for (size_t i = 0; i < arr.size(); ++i) {
      std::string path = Format("cniVersions[%zu]", i);
      if (!arr[i].is<std::string>()) {
        errors->push_back(path + ": expected a string, got " + json::TypeName(arr[i]));
        return;
      }
      const std::string& v = arr[i].get<std::string>();
      if (!IsVersion(v)) {
        errors->push_back(path + ": " + Quote(v) + " is not a version");
        return;
      }
      if (CompareVersions(v, kMaxCniVersion) > 0) continue;
      if (best.empty() || CompareVersions(v, best) > 0) best = v;
    }
  }
  if (!best.empty()) {
    list->cni_version = best;
    return;
  }
  if (!has_version) {
    if (versions != nullptr) {
      errors->push_back(Format("cniVersions: none of the versions is %s or older, and cniVersion is missing",
                               kMaxCniVersion));
    } else {
      errors->push_back("cniVersion: missing");
    }
    return;
  }
  if (!IsVersion(version)) {
    errors->push_back("cniVersion: " + Quote(version) + " is not a version");
    return;
  }
  if (CompareVersions(version, kMaxCniVersion) > 0) {
    // Said once, in full: this is the error a user with a new config meets.
    errors->push_back(Format("cniVersion %s is newer than %s, the newest this agent and the Debian CNI plugins speak",
                             Quote(version).c_str(), kMaxCniVersion));
    return;
  }
  list->cni_version = version;
}

}  // namespace

int CompareVersions(const std::string& a, const std::string& b) {
  std::vector<std::string> pa = Split(a, '.');
  std::vector<std::string> pb = Split(b, '.');
  size_t n = std::max(pa.size(), pb.size());
  for (size_t i = 0; i < n; ++i) {
    auto num = [](const std::vector<std::string>& parts, size_t k) -> int64_t {
      if (k >= parts.size()) return 0;
      auto v = ParseInt(parts[k], 0, INT64_MAX);
      return v.ok() ? *v : 0;
    };
    int64_t x = num(pa, i);
    int64_t y = num(pb, i);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

Result<NetworkList> ParseNetworkList(const std::string& text, bool conflist, const std::string& file) {
  json::ParseLimits limits;
  limits.max_bytes = kMaxConfigBytes;
  auto doc = json::Parse(text, limits);
  if (!doc.ok()) return doc.error().Wrap(file);
  NetworkList list;
  list.file = file;
  list.bytes = text;
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  if (r.ok()) {
    if (RequiredString(&r, "name", &list.name, &errors) && !IsNetworkName(list.name)) {
      r.Fail("name", Quote(list.name) + " is not a valid network name (letters, digits, '_', '.', '-', " +
                         "starting with a letter or digit)");
    }
    ReadVersion(&r, &list, &errors);
    const picojson::value* dc = r.Get("disableCheck");
    if (dc != nullptr) {
      // libcni takes the strings too (configs written by tools that quote
      // every value).
      if (dc->is<bool>()) {
        list.disable_check = dc->get<bool>();
      } else if (dc->is<std::string>() && (dc->get<std::string>() == "true" || dc->get<std::string>() == "false")) {
        list.disable_check = dc->get<std::string>() == "true";
      } else {
        r.Fail("disableCheck", "expected true or false, got " + json::Preview(*dc));
      }
    }
    if (conflist) {
      const picojson::value* plugins = r.Get("plugins");
      if (plugins == nullptr) {
        errors.push_back("plugins: missing");
      } else if (!plugins->is<picojson::array>()) {
        r.Fail("plugins", std::string("expected an array, got ") + json::TypeName(*plugins));
      } else if (plugins->get<picojson::array>().empty()) {
        r.Fail("plugins", "must not be empty");
      } else {
        const auto& arr = plugins->get<picojson::array>();
        for (size_t i = 0; i < arr.size(); ++i) {
          PluginConf p;
          ReadPlugin(arr[i], Format("plugins[%zu]", i), &p, &errors);
          list.plugins.push_back(std::move(p));
        }
      }
    } else {
      PluginConf p;
      ReadPlugin(*doc, "", &p, &errors);
      list.plugins.push_back(std::move(p));
    }
  }
  if (!errors.empty()) {
    std::string msg;
    for (const std::string& e : errors) {
      if (!msg.empty()) msg += '\n';
      msg += file + ": " + e;
    }
    return Error(Code::kInvalidArgument, msg);
  }
  return list;
}

bool IsConfigFileName(const std::string& name) {
  for (const char* ext : {".conflist", ".conf", ".json"}) {
    size_t n = std::strlen(ext);
    if (name.size() > n && EndsWith(name, ext)) return true;
  }
  return false;
}

Result<std::unique_ptr<ConfigDir>> ConfigDir::Start(Loop* loop, const std::string& dir,
                                                    std::function<void()> changed) {
  if (loop == nullptr) return Error(Code::kInvalidArgument, "cni config dir: watching needs a loop");
  std::unique_ptr<ConfigDir> d(new ConfigDir(dir, nullptr));
  loop::DirWatch::Options o;
  o.dir = dir;
  o.types = loop::DirWatch::kRegular;
  o.filter = IsConfigFileName;
  o.recursive = false;
  o.create = false;
  // An editor's save (x renamed away, x written anew) is one change, so a
  // job starting meanwhile does not find its network gone; a file renamed
  // in (the atomic way to install one) applies at once.
  o.settle_all_events = true;
  o.moved_in_at_once = true;
  o.log_name = "cni config dir";
  ConfigDir* self = d.get();
  auto w = loop::DirWatch::Start(loop, o, [self](const std::vector<loop::DirWatch::Change>&) { self->Reload(); });
  if (!w.ok()) return w.error().Wrap("watch cni config dir " + dir);
  d->watch_ = std::move(w.value());
  // Watch first, then read: a change made in between is seen by both. The
  // first read calls no `changed`: the owner reads networks() after Start.
  d->Rescan();
  d->changed_ = std::move(changed);
  return d;
}

ConfigDir::~ConfigDir() = default;

Result<const NetworkList*> ConfigDir::Find(const std::string& name) const {
  auto it = networks_.find(name);
  if (it != networks_.end()) return &it->second;
  std::vector<std::string> names;
  for (const auto& [n, l] : networks_) names.push_back(n);
  std::string have = names.empty() ? "no networks" : "networks: " + JoinStrings(names, ", ");
  std::string why = DirProblem();
  if (!why.empty()) have += "; " + why;
  // The file meant may be one that is not used (a cniVersion too new, a
  // typo): say so rather than only "not there".
  for (const auto& [file, problem] : problems_) {
    if (StartsWith(problem, "duplicate network name")) continue;
    have += "; not used: " + (StartsWith(problem, file) ? problem : file + ": " + problem);
  }
  return Error(Code::kNotFound, "network '" + name + "' is not in " + dir_ + " (" + have + ")");
}

std::string ConfigDir::DirProblem() const { return watch_ ? watch_->problem() : std::string(); }

void ConfigDir::Rescan() {
  // The watch's own list is brought up to date (its report reloads too);
  // reading again afterwards covers a watch that saw no difference.
  if (watch_) watch_->Rescan();
  Reload();
}

void ConfigDir::Reload() {
  std::map<std::string, NetworkList> networks;
  std::map<std::string, std::string> problems;
  auto names = sys::ListDir(dir_);
  if (!names.ok()) {
    // A missing directory is DirProblem()'s to tell.
    if (names.error().sys_errno() != ENOENT) problems[dir_] = names.error().message();
  } else {
    // libcni's lookup order: every .conflist, then .conf and .json, each
    // sorted by name; the first file of a name wins.
    std::vector<std::string> order;
    for (const std::string& n : *names) {
      if (n[0] != '.' && IsConfigFileName(n) && EndsWith(n, ".conflist")) order.push_back(n);
    }
    for (const std::string& n : *names) {
      if (n[0] != '.' && IsConfigFileName(n) && !EndsWith(n, ".conflist")) order.push_back(n);
    }
    for (const std::string& n : order) {
      std::string path = dir_ + "/" + n;
      struct stat st;
      // Only regular files, as the watch reports them; a directory named
      // x.conf is not a config.
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      auto text = sys::ReadFile(path, kMaxConfigBytes);
      if (!text.ok()) {
        problems[path] = text.error().message();
        continue;
      }
      auto list = ParseNetworkList(*text, EndsWith(n, ".conflist"), path);
      if (!list.ok()) {
        problems[path] = list.error().message();
        continue;
      }
      auto it = networks.find(list->name);
      if (it != networks.end()) {
        problems[path] = "duplicate network name '" + list->name + "' (already in " + sys::Basename(it->second.file) +
                         "); ignored";
        continue;
      }
      std::string name = list->name;
      networks.emplace(name, std::move(list.value()));
    }
  }
  for (const auto& [path, why] : problems) {
    auto old = problems_.find(path);
    if (old == problems_.end() || old->second != why) {
      log::Warn("cni config dir: skipping a file", {{"file", path}, {"problem", why}});
    }
  }
  bool differ = networks.size() != networks_.size();
  for (auto a = networks.begin(), b = networks_.begin(); !differ && a != networks.end(); ++a, ++b) {
    differ = a->first != b->first || a->second.file != b->second.file || a->second.bytes != b->second.bytes;
  }
  networks_ = std::move(networks);
  problems_ = std::move(problems);
  if (differ && changed_) changed_();
}

}  // namespace outpost::net
