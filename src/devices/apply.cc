#include "devices/apply.h"

#include <algorithm>

#include "base/strings.h"
#include "devices/validate.h"

namespace outpost::devices {

namespace {

bool Absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

// "rwm" in any order, each at most once; "" is CDI's default, "rwm".
bool ValidPermissions(std::string* p) {
  if (p->empty()) *p = "rwm";
  std::string seen;
  for (char c : *p) {
    if ((c != 'r' && c != 'w' && c != 'm') || seen.find(c) != std::string::npos) return false;
    seen += c;
  }
  return true;
}

template <typename T, typename Key>
const T* FindBy(const std::vector<T>& v, const Key& key, std::string T::*field) {
  for (const T& x : v) {
    if (x.*field == key) return &x;
  }
  return nullptr;
}

const std::string* Value(const StringPairs& v, const std::string& key) {
  for (const auto& [k, val] : v) {
    if (k == key) return &val;
  }
  return nullptr;
}

class Merger {
 public:
  Merger(const std::string& resource, Grant* g) : where_("resource " + resource + ": "), g_(g) {}

  Status Pairs(const StringPairs& in, const char* field, StringPairs* out) {
    for (const auto& [k, v] : in) {
      if (k.empty() || (out == &g_->env && k.find('=') != std::string::npos)) {
        return Bad(Format("%s[%s]", field, GoQuote(k).c_str()), "not a valid name");
      }
      const std::string* had = Value(*out, k);
      if (!had) out->emplace_back(k, v);
      else if (*had != v) Drop(Format("%s %s=%s (keeps %s)", field, k.c_str(), GoQuote(v).c_str(), GoQuote(*had).c_str()));
    }
    return OkStatus();
  }

  Status Mounts(const std::vector<Mount>& in) {
    for (size_t i = 0; i < in.size(); ++i) {
      const Mount& m = in[i];
      if (!Absolute(m.container_path)) return NotAbsolute(Format("mounts[%zu].container_path", i), m.container_path);
      if (!Absolute(m.host_path)) return NotAbsolute(Format("mounts[%zu].host_path", i), m.host_path);
      const Mount* had = FindBy(g_->mounts, m.container_path, &Mount::container_path);
      if (!had) g_->mounts.push_back(m);
      else if (had->host_path != m.host_path) Drop("mount " + m.container_path + " of " + m.host_path + " (keeps " + had->host_path + ")");
    }
    return OkStatus();
  }

  Status Devices(const std::vector<DeviceSpec>& in) {
    for (size_t i = 0; i < in.size(); ++i) {
      DeviceSpec d = in[i];
      if (!Absolute(d.host_path)) return NotAbsolute(Format("devices[%zu].host_path", i), d.host_path);
      if (d.container_path.empty()) d.container_path = d.host_path;
      if (!Absolute(d.container_path)) return NotAbsolute(Format("devices[%zu].container_path", i), d.container_path);
      if (!ValidPermissions(&d.permissions)) {
        return Bad(Format("devices[%zu].permissions", i), "expected r, w and m, each at most once, got " + GoQuote(in[i].permissions));
      }
      const DeviceSpec* had = FindBy(g_->devices, d.container_path, &DeviceSpec::container_path);
      if (!had) g_->devices.push_back(std::move(d));
      else if (had->host_path != d.host_path) Drop("device " + d.container_path + " of " + d.host_path + " (keeps " + had->host_path + ")");
    }
    return OkStatus();
  }

  Status Cdi(const std::vector<std::string>& in) {
    for (size_t i = 0; i < in.size(); ++i) {
      if (!IsQualifiedCdiName(in[i])) {
        return Bad(Format("cdi_devices[%zu].name", i), "expected a CDI device name like \"vendor.com/class=name\", got " + GoQuote(in[i]));
      }
      if (std::find(g_->cdi_devices.begin(), g_->cdi_devices.end(), in[i]) == g_->cdi_devices.end()) {
        g_->cdi_devices.push_back(in[i]);
      }
    }
    return OkStatus();
  }

 private:
  Error Bad(const std::string& field, const std::string& what) {
    return Error(Code::kInvalidArgument, where_ + field + ": " + what);
  }
  Error NotAbsolute(const std::string& field, const std::string& path) {
    return Bad(field, "must be an absolute path, got " + GoQuote(path));
  }
  void Drop(const std::string& what) { g_->warnings.push_back(where_ + "conflicting " + what + " dropped"); }

  std::string where_;
  Grant* g_;
};

}  // namespace

Result<Grant> MergeResponses(const std::vector<std::pair<std::string, const ContainerAllocateResponse*>>& responses) {
  Grant g;
  for (const auto& [resource, r] : responses) {
    Merger m(resource, &g);
    OUTPOST_RETURN_IF_ERROR(m.Pairs(r->envs, "envs", &g.env));
    OUTPOST_RETURN_IF_ERROR(m.Devices(r->devices));
    OUTPOST_RETURN_IF_ERROR(m.Mounts(r->mounts));
    OUTPOST_RETURN_IF_ERROR(m.Pairs(r->annotations, "annotations", &g.annotations));
    OUTPOST_RETURN_IF_ERROR(m.Cdi(r->cdi_devices));
  }
  return g;
}

std::vector<std::string> MergeIntoTask(const Grant& grant, std::map<std::string, std::string>* env,
                                       std::map<std::string, std::string>* annotations) {
  std::vector<std::string> kept;
  auto merge = [&kept](const StringPairs& from, std::map<std::string, std::string>* into) {
    for (const auto& [k, v] : from) {
      auto [it, added] = into->emplace(k, v);
      if (!added && it->second != v) kept.push_back(k);
    }
  };
  merge(grant.env, env);
  StringPairs notes = grant.annotations;
  if (!grant.cdi_devices.empty()) notes.emplace_back(kCdiAnnotationKey, JoinStrings(grant.cdi_devices, ","));
  merge(notes, annotations);
  return kept;
}

}  // namespace outpost::devices
