#include "cdi.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "spec.h"

namespace oci_driver::cdi {

namespace {

using picojson::array;
using picojson::object;
using picojson::value;

const char kAnnotationPrefix[] = "cdi.k8s.io/";
const size_t kMaxSpecBytes = 1 << 20;
const char* const kHookNames[] = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart",
                                  "poststop"};

bool Letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool Alnum(char c) { return Letter(c) || (c >= '0' && c <= '9'); }

// CDI's vendor, class and device name rules (pkg/parser).
bool ValidPart(const std::string& s, bool letter_first, const char* extra) {
  if (s.empty() || !(letter_first ? Letter(s[0]) : Alnum(s[0])) || !Alnum(s.back())) return false;
  for (char c : s) {
    if (!Alnum(c) && c != '_' && c != '-' && c != '.' && !std::strchr(extra, c)) return false;
  }
  return true;
}

bool ValidKind(const std::string& kind) {
  size_t slash = kind.find('/');
  return slash != std::string::npos && ValidPart(kind.substr(0, slash), true, "") &&
         ValidPart(kind.substr(slash + 1), true, "");
}

bool Absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

// v[key], or null when v is no object (picojson's get throws then: the
// config.json outpost sends is untrusted input too).
const value& Member(const value& v, const char* key) {
  static const value null;
  return v.is<object>() && v.contains(key) ? v.get(key) : null;
}

// A string member, "" when absent or not a string.
std::string StringOf(const value& v, const char* key) {
  const value& m = Member(v, key);
  return m.is<std::string>() ? m.get<std::string>() : "";
}

std::string Quote(const std::string& s) { return value(s).serialize(); }

// Reads the fields of one JSON object, each problem naming where.
class Reader {
 public:
  // where: "<file>" for a spec's top level (fields follow ": "), else
  // "<file>: devices[0]..." (fields follow ".").
  Reader(const value& v, std::string where, std::vector<std::string>* problems, bool top = false)
      : v_(v), where_(std::move(where)), sep_(top ? ": " : "."), problems_(problems) {
    if (!v.is<object>()) Fail("", "expected an object");
  }
  bool ok() const { return v_.is<object>(); }
  const value* Get(const std::string& key) {
    if (!ok()) return nullptr;
    seen_.push_back(key);
    const object& o = v_.get<object>();
    auto it = o.find(key);
    return it == o.end() || it->second.is<picojson::null>() ? nullptr : &it->second;
  }
  bool String(const std::string& key, std::string* out, bool required = false) {
    const value* v = Get(key);
    if (!v) {
      if (required) Fail(key, "required");
      return false;
    }
    if (!v->is<std::string>()) return Fail(key, "expected a string");
    *out = v->get<std::string>();
    return true;
  }
  void Int(const std::string& key, int64_t min, int64_t max, int64_t* out) {
    const value* v = Get(key);
    if (!v) return;
    if (!v->is<int64_t>() || v->get<int64_t>() < min || v->get<int64_t>() > max) {
      Fail(key, "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max));
      return;
    }
    *out = v->get<int64_t>();
  }
  void Strings(const std::string& key, std::vector<std::string>* out) {
    const value* v = Get(key);
    if (!v) return;
    if (v->is<array>()) {
      for (const value& s : v->get<array>()) {
        if (s.is<std::string>()) out->push_back(s.get<std::string>());
      }
      if (out->size() == v->get<array>().size()) return;
    }
    Fail(key, "expected a list of strings");
  }
  const array* Array(const std::string& key) {
    const value* v = Get(key);
    if (v && !v->is<array>()) Fail(key, "expected a list");
    return v && v->is<array>() ? &v->get<array>() : nullptr;
  }
  // Keys nobody asked for.
  std::vector<std::string> Unread() const {
    std::vector<std::string> out;
    if (!ok()) return out;
    for (const auto& [k, v] : v_.get<object>()) {
      if (std::find(seen_.begin(), seen_.end(), k) == seen_.end()) out.push_back(k);
    }
    return out;
  }
  bool Fail(const std::string& key, const std::string& what) {
    problems_->push_back(where_ + (key.empty() ? "" : sep_ + key) + ": " + what);
    return false;
  }
  std::string At(const std::string& key, size_t i) const {
    return where_ + "." + key + "[" + std::to_string(i) + "]";
  }

 private:
  const value& v_;
  std::string where_;
  const char* sep_;
  std::vector<std::string>* problems_;
  std::vector<std::string> seen_;
};

void ParseEdits(const value& v, const std::string& where, Edits* e, std::vector<std::string>* problems) {
  Reader r(v, where, problems);
  if (!r.ok()) return;
  r.Strings("env", &e->env);
  for (const std::string& kv : e->env) {
    if (kv.find('=') == std::string::npos || kv[0] == '=') r.Fail("env", Quote(kv) + " is not NAME=value");
  }
  if (const array* nodes = r.Array("deviceNodes")) {
    for (size_t i = 0; i < nodes->size(); ++i) {
      Reader n((*nodes)[i], r.At("deviceNodes", i), problems);
      DeviceNode d;
      if (n.String("path", &d.path, true) && !Absolute(d.path)) n.Fail("path", "must be an absolute path");
      if (n.String("hostPath", &d.host_path) && !Absolute(d.host_path)) n.Fail("hostPath", "must be an absolute path");
      if (n.String("type", &d.type) && d.type != "b" && d.type != "c" && d.type != "u" && d.type != "p") {
        n.Fail("type", "expected b, c, u or p, got " + Quote(d.type));
      }
      n.Int("major", 0, 0xfffff, &d.major);
      n.Int("minor", 0, 0xfffff, &d.minor);
      n.Int("fileMode", 0, 0xffffffffLL, &d.file_mode);
      n.Int("uid", 0, 0xffffffffLL, &d.uid);
      n.Int("gid", 0, 0xffffffffLL, &d.gid);
      if (n.String("permissions", &d.permissions) && d.permissions.find_first_not_of("rwm") != std::string::npos) {
        n.Fail("permissions", "expected r, w and m, got " + Quote(d.permissions));
      }
      for (const std::string& k : n.Unread()) e->unsupported.push_back("deviceNodes[]." + k);
      e->device_nodes.push_back(d);
    }
  }
  if (const array* mounts = r.Array("mounts")) {
    for (size_t i = 0; i < mounts->size(); ++i) {
      Reader m((*mounts)[i], r.At("mounts", i), problems);
      Mount x;
      if (m.String("hostPath", &x.host_path, true) && !Absolute(x.host_path)) m.Fail("hostPath", "must be an absolute path");
      if (m.String("containerPath", &x.container_path, true) && !Absolute(x.container_path)) {
        m.Fail("containerPath", "must be an absolute path");
      }
      m.String("type", &x.type);
      m.Strings("options", &x.options);
      for (const std::string& k : m.Unread()) e->unsupported.push_back("mounts[]." + k);
      e->mounts.push_back(x);
    }
  }
  if (const array* hooks = r.Array("hooks")) {
    for (size_t i = 0; i < hooks->size(); ++i) {
      Reader h((*hooks)[i], r.At("hooks", i), problems);
      Hook x;
      if (h.String("hookName", &x.hook_name, true) &&
          std::find(std::begin(kHookNames), std::end(kHookNames), x.hook_name) == std::end(kHookNames)) {
        h.Fail("hookName", "unknown hook " + Quote(x.hook_name));
      }
      if (h.String("path", &x.path, true) && !Absolute(x.path)) h.Fail("path", "must be an absolute path");
      h.Strings("args", &x.args);
      h.Strings("env", &x.env);
      h.Int("timeout", 1, INT32_MAX, &x.timeout);
      for (const std::string& k : h.Unread()) e->unsupported.push_back("hooks[]." + k);
      e->hooks.push_back(x);
    }
  }
  if (const array* gids = r.Array("additionalGids")) {
    for (const value& g : *gids) {
      if (!g.is<int64_t>() || g.get<int64_t>() < 0 || g.get<int64_t>() > 0xffffffffLL) {
        r.Fail("additionalGids", "expected gids");
        break;
      }
      e->additional_gids.push_back(g.get<int64_t>());
    }
  }
  if (const value* rdt = r.Get("intelRdt")) {
    if (rdt->is<object>()) e->intel_rdt = *rdt;
    else r.Fail("intelRdt", "expected an object");
  }
  for (const std::string& k : r.Unread()) e->unsupported.push_back(k);
}

std::string ReadFile(const std::string& path, std::string* text) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return std::strerror(errno);
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text->size() <= kMaxSpecBytes) text->append(buf, n);
  std::fclose(f);
  return text->size() > kMaxSpecBytes ? "larger than 1 MiB" : "";
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

object& ObjectAt(object& parent, const char* key) {
  value& v = parent[key];
  if (!v.is<object>()) v = value(object());
  return v.get<object>();
}

array& ArrayAt(object& parent, const char* key) {
  value& v = parent[key];
  if (!v.is<array>()) v = value(array());
  return v.get<array>();
}

value Strings(const std::vector<std::string>& v) {
  array a;
  for (const std::string& s : v) a.emplace_back(s);
  return value(std::move(a));
}

size_t Depth(const value& mount) {
  std::string p = StringOf(mount, "destination");
  size_t n = 0;
  for (size_t i = 0; i < p.size(); ++i) n += p[i] == '/' && i + 1 < p.size() && p[i + 1] != '/';
  return n;
}


// A device node with what CDI fills in from the node (fillMissingInfo).
std::string Complete(DeviceNode* d) {
  if (d->host_path.empty()) d->host_path = d->path;
  if (!d->type.empty() && (d->major > 0 || d->type == "p")) return "";
  struct stat st;
  if (::stat(d->host_path.c_str(), &st) != 0) {
    return "deviceNodes: " + d->host_path + ": " + std::strerror(errno);
  }
  std::string type = S_ISBLK(st.st_mode) ? "b" : S_ISCHR(st.st_mode) ? "c" : S_ISFIFO(st.st_mode) ? "p" : "";
  if (type.empty()) return "deviceNodes: " + d->host_path + " is not a device";
  if (d->type.empty()) d->type = type;
  else if (d->type != type && !(d->type == "u" && type == "c")) {
    return "deviceNodes: " + d->host_path + " is of type " + type + ", not " + d->type;
  }
  if (d->file_mode < 0) d->file_mode = st.st_mode;
  if (d->type == "p") return "";
  if (d->major <= 0) {
    d->major = major(st.st_rdev);
    d->minor = minor(st.st_rdev);
  }
  return "";
}

// CDI's ContainerEdits.Apply on a config.json; problems when a device node
// is not there.
void Apply(const Edits& e, object* doc, std::vector<std::string>* problems) {
  object& proc = ObjectAt(*doc, "process");
  array& env = ArrayAt(proc, "env");
  for (const std::string& kv : e.env) {
    std::string key = kv.substr(0, kv.find('=') + 1);
    auto it = std::find_if(env.begin(), env.end(), [&](const value& x) {
      return x.is<std::string>() && x.get<std::string>().compare(0, key.size(), key) == 0;
    });
    if (it != env.end()) *it = value(kv);
    else env.emplace_back(kv);
  }
  object& user = ObjectAt(proc, "user");
  object& lx = ObjectAt(*doc, "linux");
  for (DeviceNode d : e.device_nodes) {
    std::string err = Complete(&d);
    if (!err.empty()) {
      problems->push_back(err);
      continue;
    }
    object o;
    o["path"] = value(d.path);
    o["type"] = value(d.type);
    if (d.type != "p") {
      o["major"] = value(d.major);
      o["minor"] = value(d.minor < 0 ? 0 : d.minor);
    }
    if (d.file_mode >= 0) o["fileMode"] = value(d.file_mode & 07777);
    int64_t uid = d.uid >= 0 ? d.uid : user["uid"].is<int64_t>() ? user["uid"].get<int64_t>() : 0;
    int64_t gid = d.gid >= 0 ? d.gid : user["gid"].is<int64_t>() ? user["gid"].get<int64_t>() : 0;
    if (d.uid >= 0 || uid > 0) o["uid"] = value(uid);
    if (d.gid >= 0 || gid > 0) o["gid"] = value(gid);
    array& devices = ArrayAt(lx, "devices");
    devices.erase(std::remove_if(devices.begin(), devices.end(),
                                 [&](const value& x) { return StringOf(x, "path") == d.path; }),
                  devices.end());
    devices.emplace_back(std::move(o));
    if (d.type == "b" || d.type == "c") {
      object rule;
      rule["allow"] = value(true);
      rule["type"] = value(d.type);
      rule["major"] = value(d.major);
      rule["minor"] = value(d.minor < 0 ? 0 : d.minor);
      rule["access"] = value(d.permissions.empty() ? "rwm" : d.permissions);
      ArrayAt(ObjectAt(lx, "resources"), "devices").emplace_back(std::move(rule));
    }
  }
  if (!e.mounts.empty()) {
    array& mounts = ArrayAt(*doc, "mounts");
    for (const Mount& m : e.mounts) {
      mounts.erase(std::remove_if(mounts.begin(), mounts.end(),
                                  [&](const value& x) { return StringOf(x, "destination") == m.container_path; }),
                   mounts.end());
      object o;
      o["source"] = value(m.host_path);
      o["destination"] = value(m.container_path);
      if (!m.type.empty()) o["type"] = value(m.type);
      if (!m.options.empty()) o["options"] = Strings(m.options);
      mounts.emplace_back(std::move(o));
    }
    // CDI's (and Docker's) order: parents before children.
    std::stable_sort(mounts.begin(), mounts.end(), [](const value& a, const value& b) {
      size_t da = Depth(a), db = Depth(b);
      return da != db ? da < db : StringOf(a, "destination") < StringOf(b, "destination");
    });
  }
  for (const Hook& h : e.hooks) {
    object o;
    o["path"] = value(h.path);
    if (!h.args.empty()) o["args"] = Strings(h.args);
    if (!h.env.empty()) o["env"] = Strings(h.env);
    if (h.timeout > 0) o["timeout"] = value(h.timeout);
    ArrayAt(ObjectAt(*doc, "hooks"), h.hook_name.c_str()).emplace_back(std::move(o));
  }
  for (int64_t gid : e.additional_gids) {
    if (gid == 0) continue;  // CDI ignores 0
    array& gids = ArrayAt(user, "additionalGids");
    if (std::none_of(gids.begin(), gids.end(), [&](const value& x) { return x.is<int64_t>() && x.get<int64_t>() == gid; })) {
      gids.emplace_back(gid);
    }
  }
  if (e.intel_rdt.is<object>()) lx["intelRdt"] = e.intel_rdt;
}

}  // namespace

std::vector<std::string> DefaultSpecDirs() { return {"/etc/cdi", "/var/run/cdi"}; }

bool IsQualifiedName(const std::string& name) {
  size_t eq = name.find('=');
  return !name.empty() && name[0] != '/' && eq != std::string::npos && ValidKind(name.substr(0, eq)) &&
         ValidPart(name.substr(eq + 1), false, ":");
}

bool ParseSpec(const std::string& text, const std::string& path, int priority, Spec* out,
               std::vector<std::string>* problems) {
  size_t before = problems->size();
  value doc;
  std::string err = ParseJson(&doc, text);
  if (!err.empty()) {
    problems->push_back(path + ": " + err);
    return false;
  }
  out->path = path;
  out->priority = priority;
  Reader r(doc, path, problems, true);
  if (!r.ok()) return false;
  std::string version;
  r.String("cdiVersion", &version, true);
  if (r.String("kind", &out->kind, true) && !ValidKind(out->kind)) {
    r.Fail("kind", "expected vendor/class like \"vendor.com/device\", got " + Quote(out->kind));
  }
  r.Get("annotations");  // information for people: nothing to apply
  if (const value* edits = r.Get("containerEdits")) ParseEdits(*edits, path + ": containerEdits", &out->edits, problems);
  const array* devices = r.Array("devices");
  if (!devices || devices->empty()) r.Fail("devices", "must list at least one device");
  for (size_t i = 0; devices && i < devices->size(); ++i) {
    Reader d((*devices)[i], path + ": devices[" + std::to_string(i) + "]", problems);
    Device dev;
    if (d.String("name", &dev.name, true) && !ValidPart(dev.name, false, ":")) {
      d.Fail("name", "expected letters, digits, '_', '-', '.', ':' (a letter or digit at both ends), got " +
                         Quote(dev.name));
    }
    for (const Device& other : out->devices) {
      if (!dev.name.empty() && other.name == dev.name) d.Fail("name", "device " + Quote(dev.name) + " is listed twice");
    }
    d.Get("annotations");
    if (const value* edits = d.Get("containerEdits")) {
      ParseEdits(*edits, path + ": devices[" + std::to_string(i) + "].containerEdits", &dev.edits, problems);
    }
    out->devices.push_back(std::move(dev));
  }
  return problems->size() == before;
}

void Registry::Add(Spec spec) {
  size_t index = specs_.size();
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    std::string name = spec.kind + "=" + spec.devices[i].name;
    auto it = std::lower_bound(devices_.begin(), devices_.end(), name,
                               [](const Entry& e, const std::string& n) { return e.name < n; });
    Entry entry{name, index, i, spec.priority, false};
    if (it == devices_.end() || it->name != name) {
      devices_.insert(it, entry);
    } else if (spec.priority > it->priority) {
      *it = entry;
    } else if (spec.priority == it->priority) {
      // CDI's rule: a name two specs of one dir define is nobody's.
      problems_.push_back("conflicting device " + name + " (specs " + specs_[it->spec].path + ", " + spec.path + ")");
      it->conflict = true;
    }
  }
  specs_.push_back(std::move(spec));
}

void Registry::Load(const std::vector<std::string>& dirs) {
  dirs_ = dirs;
  for (size_t prio = 0; prio < dirs.size(); ++prio) {
    DIR* d = ::opendir(dirs[prio].c_str());
    if (!d) continue;
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n[0] == '.') continue;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) names.push_back(n);
      else if (n.size() > 5 && n.compare(n.size() - 5, 5, ".yaml") == 0) {
        problems_.push_back(dirs[prio] + "/" + n + ": YAML specs are not read (write the spec as JSON)");
      }
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      std::string path = dirs[prio] + "/" + n;
      std::string text;
      std::string err = ReadFile(path, &text);
      Spec spec;
      if (!err.empty()) problems_.push_back(path + ": " + err);
      else if (ParseSpec(text, path, static_cast<int>(prio), &spec, &problems_)) Add(std::move(spec));
    }
  }
}

const Registry::Entry* Registry::Find(const std::string& name) const {
  auto it = std::lower_bound(devices_.begin(), devices_.end(), name,
                             [](const Entry& e, const std::string& n) { return e.name < n; });
  return it != devices_.end() && it->name == name && !it->conflict ? &*it : nullptr;
}

std::string Registry::Inject(const std::vector<std::string>& names, picojson::value* spec) const {
  std::vector<std::string> problems;
  std::vector<const Edits*> edits;
  std::vector<size_t> specs_seen;
  for (const std::string& name : names) {
    const Entry* e = Find(name);
    if (!e) {
      std::string where;
      for (const std::string& d : dirs_) where += (where.empty() ? "" : ", ") + d;
      problems.push_back("CDI device " + name + ": unknown" + (where.empty() ? "" : " (no spec in " + where + " defines it)") +
                         (problems_.empty() ? "" : "; problems with the specs: " + Join(problems_, "; ")));
      continue;
    }
    const Spec& s = specs_[e->spec];
    const Device& d = s.devices[e->device];
    for (const Edits* x : {&s.edits, &d.edits}) {
      for (const std::string& f : x->unsupported) {
        problems.push_back("CDI device " + name + ": " + (x == &s.edits ? "" : "device ") + "containerEdits." + f +
                           " is not supported by this driver (" + s.path + ")");
      }
    }
    if (std::find(specs_seen.begin(), specs_seen.end(), e->spec) == specs_seen.end()) {
      specs_seen.push_back(e->spec);
      edits.push_back(&s.edits);
    }
    edits.push_back(&d.edits);
  }
  if (!problems.empty()) return JoinLines(problems);
  value out = spec->is<object>() ? *spec : value(object());
  for (const Edits* x : edits) Apply(*x, &out.get<object>(), &problems);
  if (!problems.empty()) return JoinLines(problems);
  *spec = std::move(out);
  return "";
}

std::string AnnotatedDevices(const picojson::value& spec, std::vector<std::string>* names) {
  const value& a = Member(spec, "annotations");
  if (!a.is<object>()) return "";
  for (const auto& [key, v] : a.get<object>()) {
    if (key.compare(0, sizeof kAnnotationPrefix - 1, kAnnotationPrefix) != 0 || !v.is<std::string>()) continue;
    std::string list = v.get<std::string>();
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      std::string name = list.substr(start, comma - start);
      if (!IsQualifiedName(name)) return "annotation " + key + ": invalid CDI device name " + Quote(name);
      if (std::find(names->begin(), names->end(), name) == names->end()) names->push_back(name);
      start = comma + 1;
    }
  }
  return "";
}

}  // namespace oci_driver::cdi
