#include "hooks/hook.h"

#include "base/json.h"
#include "base/strings.h"

namespace outpost::hooks {

namespace {

constexpr const char* kStageNames[kStageCount] = {"prestart",       "createRuntime", "createContainer",
                                                  "startContainer", "poststart",     "poststop"};

// A hook's timeout may not be absurd: a day.
constexpr int64_t kMaxTimeoutSeconds = 86400;

}  // namespace

const char* StageName(Stage s) {
  int i = static_cast<int>(s);
  return i >= 0 && i < kStageCount ? kStageNames[i] : "unknown";
}

bool ParseStage(const std::string& name, Stage* out) {
  for (int i = 0; i < kStageCount; ++i) {
    if (name == kStageNames[i]) {
      *out = static_cast<Stage>(i);
      return true;
    }
  }
  return false;
}

const char* StageStatus(Stage s) {
  switch (s) {
    case Stage::kPrestart:
    case Stage::kCreateRuntime:
    case Stage::kCreateContainer: return "creating";
    case Stage::kStartContainer: return "created";
    case Stage::kPoststart: return "running";
    case Stage::kPoststop: return "stopped";
  }
  return "unknown";
}

std::vector<std::string> Hook::Argv() const {
  if (!args.empty()) return args;
  return {path};
}

HookSet::HookSet(const HookSet& o) : stages_(o.stages_ ? std::make_unique<Stages>(*o.stages_) : nullptr) {}

HookSet& HookSet::operator=(const HookSet& o) {
  if (this != &o) stages_ = o.stages_ ? std::make_unique<Stages>(*o.stages_) : nullptr;
  return *this;
}

HookSet::~HookSet() = default;

std::vector<Hook>& HookSet::at(Stage s) {
  if (!stages_) stages_ = std::make_unique<Stages>();
  return (*stages_)[static_cast<int>(s)];
}

const std::vector<Hook>& HookSet::at(Stage s) const {
  static const std::vector<Hook> kNone;
  return stages_ ? (*stages_)[static_cast<int>(s)] : kNone;
}

bool HookSet::empty() const { return size() == 0; }

size_t HookSet::size() const {
  size_t n = 0;
  if (stages_) {
    for (const auto& v : *stages_) n += v.size();
  }
  return n;
}

void HookSet::Append(const HookSet& o) {
  if (o.empty()) return;
  for (Stage s : kAllStages) {
    const std::vector<Hook>& more = o.at(s);
    if (!more.empty()) at(s).insert(at(s).end(), more.begin(), more.end());
  }
}

bool HookSet::operator==(const HookSet& o) const {
  for (Stage s : kAllStages) {
    if (!(at(s) == o.at(s))) return false;
  }
  return true;
}

Hook HookFromJson(const picojson::value& v, const std::string& path, const std::string& source,
                  std::vector<std::string>* errors) {
  Hook h;
  h.source = source;
  json::ObjectReader r(v, path, errors);
  if (!r.ok()) return h;
  if (!r.Has("path")) {
    r.Fail("path", "required (the hook program's absolute path)");
  } else {
    r.String("path", &h.path, false);
    if (!h.path.empty() && h.path[0] != '/') r.Fail("path", "must be an absolute path, got \"" + h.path + "\"");
  }
  r.StringList("args", &h.args);
  r.StringList("env", &h.env);
  for (size_t i = 0; i < h.env.size(); ++i) {
    size_t eq = h.env[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      errors->push_back(Format("%s[%zu]: expected \"NAME=VALUE\", got \"%s\"", r.PathOf("env").c_str(), i,
                               h.env[i].c_str()));
    }
  }
  r.Int("timeout", 1, kMaxTimeoutSeconds, &h.timeout_seconds);
  r.RejectUnknown();
  return h;
}

HookSet HooksFromJson(const picojson::value& v, const std::string& path, const std::string& source,
                      std::vector<std::string>* errors) {
  HookSet set;
  if (!v.is<picojson::object>()) {
    errors->push_back(path + ": expected an object of stage -> list of hooks, got " + json::TypeName(v));
    return set;
  }
  for (const auto& [key, list] : v.get<picojson::object>()) {
    const std::string kpath = path.empty() ? key : path + "." + key;
    Stage stage;
    if (!ParseStage(key, &stage)) {
      errors->push_back(kpath + ": unknown hook stage; the stages are prestart, createRuntime, createContainer, "
                                "startContainer, poststart, poststop");
      continue;
    }
    if (!list.is<picojson::array>()) {
      errors->push_back(kpath + ": expected an array of hooks, got " + json::TypeName(list));
      continue;
    }
    const auto& arr = list.get<picojson::array>();
    for (size_t i = 0; i < arr.size(); ++i) {
      set.at(stage).push_back(HookFromJson(arr[i], Format("%s[%zu]", kpath.c_str(), i), source, errors));
    }
  }
  return set;
}

namespace {

picojson::value Strings(const std::vector<std::string>& v) {
  picojson::array a;
  for (const auto& s : v) a.emplace_back(s);
  return picojson::value(std::move(a));
}

}  // namespace

picojson::value HookToJson(const Hook& h) {
  picojson::object o;
  o["path"] = picojson::value(h.path);
  if (!h.args.empty()) o["args"] = Strings(h.args);
  if (!h.env.empty()) o["env"] = Strings(h.env);
  if (h.timeout_seconds > 0) o["timeout"] = picojson::value(static_cast<int64_t>(h.timeout_seconds));
  return picojson::value(std::move(o));
}

picojson::value HooksToJson(const HookSet& set) {
  picojson::object o;
  for (Stage s : kAllStages) {
    if (set.at(s).empty()) continue;
    picojson::array a;
    for (const Hook& h : set.at(s)) a.push_back(HookToJson(h));
    o[StageName(s)] = picojson::value(std::move(a));
  }
  return picojson::value(std::move(o));
}

std::string StateJson(const State& s) {
  // Keys in the runtime-spec's order (picojson's object is a sorted map).
  std::string out = "{\"ociVersion\":" + picojson::value(kOciVersion).serialize();
  out += ",\"id\":" + picojson::value(s.id).serialize();
  out += ",\"status\":" + picojson::value(StageStatus(s.stage)).serialize();
  if (s.pid > 0) out += Format(",\"pid\":%d", static_cast<int>(s.pid));
  out += ",\"bundle\":" + picojson::value(s.bundle).serialize();
  if (!s.annotations.empty()) {
    picojson::object a;
    for (const auto& [k, v] : s.annotations) a[k] = picojson::value(v);
    out += ",\"annotations\":" + picojson::value(std::move(a)).serialize();
  }
  out += "}";
  return out;
}

}  // namespace outpost::hooks
