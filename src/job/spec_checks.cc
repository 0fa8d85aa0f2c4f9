// A task's `checks` (docs/job-spec.md "checks"): reading and validating the
// array; the canonical form is in spec_json.cc.
#include <arpa/inet.h>

#include "base/json.h"
#include "base/strings.h"
#include "job/spec.h"

namespace outpost::job {

const char* CheckTypeName(CheckType t) {
  switch (t) {
    case CheckType::kExec: return "exec";
    case CheckType::kHttp: return "http";
    case CheckType::kTcp: return "tcp";
  }
  return "?";
}

const char* OnUnhealthyName(OnUnhealthy o) { return o == OnUnhealthy::kRestart ? "restart" : "none"; }

std::string CheckSpec::Label() const {
  if (!name.empty()) return name;
  switch (type) {
    case CheckType::kExec: return "exec " + (command.empty() ? std::string() : command[0]);
    case CheckType::kHttp: return "http " + path;
    case CheckType::kTcp: return "tcp " + std::to_string(port);
  }
  return "?";
}

namespace {

constexpr int64_t kMilli = 1000000LL;
constexpr int64_t kSecond = 1000 * kMilli;
constexpr int64_t kMinInterval = 100 * kMilli;
constexpr int64_t kMaxInterval = 24 * 3600 * kSecond;
constexpr int64_t kMinTimeout = 10 * kMilli;
constexpr int64_t kMaxTimeout = 3600 * kSecond;
constexpr int64_t kMaxGrace = 3600 * kSecond;
constexpr int64_t kMaxThreshold = 100;
constexpr size_t kMaxCheckString = 1024;  // name, path, each command word
constexpr size_t kMaxCheckArgs = 64;

void Duration(json::ObjectReader& r, const char* key, int64_t min, int64_t max, int64_t* out) {
  if (!r.Has(key)) return;
  int64_t v = -1;
  r.Duration(key, &v);
  if (v == -1) return;  // the reader recorded what is wrong
  if (v < min || v > max) {
    r.Fail(key, "must be between " + FormatDuration(min) + " and " + FormatDuration(max) + ", got " + FormatDuration(v));
    return;
  }
  *out = v;
}

// Printable ASCII without spaces: a path goes into the request line as is.
bool ValidRequestTarget(const std::string& s) {
  if (s.empty() || s[0] != '/') return false;
  for (unsigned char c : s) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

bool CheckText(json::ObjectReader& r, const std::string& key, const std::string& s) {
  if (s.size() > kMaxCheckString) {
    r.Fail(key, Format("is %zu bytes, more than the limit of %zu bytes", s.size(), kMaxCheckString));
    return false;
  }
  if (s.find('\0') != std::string::npos) {
    r.Fail(key, "must not contain NUL bytes");
    return false;
  }
  return true;
}

CheckSpec ReadCheck(const picojson::value& v, const std::string& path, std::vector<std::string>* errors) {
  CheckSpec c;
  json::ObjectReader r(v, path, errors);
  if (!r.ok()) return c;
  std::string type;
  if (!r.Has("type")) {
    r.Known("type");
    r.Fail("type", "required: \"exec\", \"http\" or \"tcp\"");
  } else {
    r.String("type", &type, false);
    if (type == "exec") c.type = CheckType::kExec;
    else if (type == "http") c.type = CheckType::kHttp;
    else if (type == "tcp") c.type = CheckType::kTcp;
    else if (!type.empty()) r.Fail("type", "must be \"exec\", \"http\" or \"tcp\", got " + json::Preview(picojson::value(type)));
  }
  if (r.Has("name")) {
    r.String("name", &c.name, false);
    CheckText(r, "name", c.name);
  }
  const bool net = c.type == CheckType::kHttp || c.type == CheckType::kTcp;
  if (c.type == CheckType::kExec && !type.empty()) {
    if (!r.Has("command")) {
      r.Known("command");
      r.Fail("command", "required for an exec check: the program and its arguments, e.g. [\"pg_isready\"]");
    } else {
      r.StringList("command", &c.command);
      if (r.Has("command") && c.command.empty()) r.Fail("command", "must name a program");
      if (c.command.size() > kMaxCheckArgs) {
        r.Fail("command", Format("%zu words, more than the limit of %zu", c.command.size(), kMaxCheckArgs));
      }
      for (const std::string& w : c.command) {
        if (!CheckText(r, "command", w)) break;
      }
      if (!c.command.empty() && c.command[0].empty()) r.Fail("command", "the program name must not be empty");
    }
  } else if (r.Has("command")) {
    r.Fail("command", "only an exec check runs a command");
  }
  if (net) {
    if (!r.Has("port")) {
      r.Known("port");
      r.Fail("port", std::string("required for a ") + CheckTypeName(c.type) + " check: the task's port, 1-65535");
    } else {
      int64_t port = 0;
      r.Int("port", 1, 65535, &port);
      c.port = static_cast<int>(port);
    }
    if (r.Has("address")) {
      std::string a;
      r.String("address", &a, false);
      in_addr ia;
      if (!a.empty() && inet_pton(AF_INET, a.c_str(), &ia) != 1) {
        r.Fail("address", "must be an IPv4 address like 127.0.0.1, got " + json::Preview(picojson::value(a)));
      } else if (!a.empty()) {
        c.address = a;
      }
    }
  } else {
    if (r.Has("port") && !type.empty()) r.Fail("port", "only http and tcp checks connect to a port");
    if (r.Has("address") && !type.empty()) r.Fail("address", "only http and tcp checks connect to an address");
  }
  if (c.type == CheckType::kHttp) {
    if (r.Has("path")) {
      std::string p;
      r.String("path", &p, false);
      if (!p.empty() && CheckText(r, "path", p)) {
        if (!ValidRequestTarget(p)) {
          r.Fail("path", "must start with '/' and hold printable ASCII without spaces, got " +
                             json::Preview(picojson::value(p)));
        } else {
          c.path = p;
        }
      }
    }
  } else if (r.Has("path") && !type.empty()) {
    r.Fail("path", "only an http check has a path");
  }
  Duration(r, "interval", kMinInterval, kMaxInterval, &c.interval_nanos);
  Duration(r, "timeout", kMinTimeout, kMaxTimeout, &c.timeout_nanos);
  Duration(r, "grace", 0, kMaxGrace, &c.grace_nanos);
  int64_t n = c.failure_threshold;
  r.Int("failure_threshold", 1, kMaxThreshold, &n);
  c.failure_threshold = static_cast<int>(n);
  n = c.success_threshold;
  r.Int("success_threshold", 1, kMaxThreshold, &n);
  c.success_threshold = static_cast<int>(n);
  if (r.Has("on_unhealthy")) {
    std::string o;
    r.String("on_unhealthy", &o, false);
    if (o == "restart") c.on_unhealthy = OnUnhealthy::kRestart;
    else if (o == "none") c.on_unhealthy = OnUnhealthy::kNone;
    else if (!o.empty()) r.Fail("on_unhealthy", "must be \"restart\" or \"none\", got " + json::Preview(picojson::value(o)));
  }
  r.RejectUnknown();
  return c;
}

}  // namespace

std::vector<CheckSpec> ChecksFromJson(const picojson::value& v, const std::string& path,
                                      std::vector<std::string>* errors) {
  std::vector<CheckSpec> out;
  if (!v.is<picojson::array>()) {
    errors->push_back(path + ": expected an array of checks, got " + json::TypeName(v));
    return out;
  }
  const auto& a = v.get<picojson::array>();
  if (a.size() > kMaxChecks) {
    errors->push_back(Format("%s: %zu checks, more than the limit of %zu", path.c_str(), a.size(), kMaxChecks));
    return out;
  }
  for (size_t i = 0; i < a.size(); i++) out.push_back(ReadCheck(a[i], Format("%s[%zu]", path.c_str(), i), errors));
  for (size_t i = 0; i < out.size(); i++) {
    for (size_t j = 0; j < i; j++) {
      if (out[i].Label() == out[j].Label()) {
        errors->push_back(Format("%s[%zu]: same name as checks[%zu] (%s): give one a \"name\"", path.c_str(), i, j,
                                 json::Preview(picojson::value(out[i].Label())).c_str()));
      }
    }
  }
  return out;
}

}  // namespace outpost::job
