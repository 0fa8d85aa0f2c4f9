// Decoding what CNI plugins print. Everything here reads untrusted bytes: a
// plugin is any binary in cni_path, and its output must not crash the agent
// or smuggle a bad address into a job's environment.
#include "net/cni_result.h"

#include <arpa/inet.h>

#include <algorithm>
#include <utility>

#include "base/json.h"
#include "base/strings.h"

namespace outpost::net {

namespace {

// Plugin output is small; a result for a few interfaces is under 2 KiB.
constexpr size_t kMaxOutputBytes = 1 << 20;
constexpr size_t kQuoteBytes = 200;
constexpr size_t kStderrTail = 1024;

enum class Family { kNone, kV4, kV6 };

// An IP address, with an optional "/prefix" in range for its family.
Family AddressFamily(const std::string& s) {
  // inet_pton would stop at a NUL ("\u0000" in JSON) and take the rest.
  if (s.find('\0') != std::string::npos) return Family::kNone;
  size_t slash = s.find('/');
  std::string ip = s.substr(0, slash);
  unsigned char buf[16];
  Family f = Family::kNone;
  if (::inet_pton(AF_INET, ip.c_str(), buf) == 1) {
    f = Family::kV4;
  } else if (::inet_pton(AF_INET6, ip.c_str(), buf) == 1) {
    f = Family::kV6;
  } else {
    return Family::kNone;
  }
  if (slash == std::string::npos) return f;
  auto prefix = ParseInt(std::string_view(s).substr(slash + 1), 0, f == Family::kV4 ? 32 : 128);
  // ParseInt takes a sign; a prefix is digits only.
  if (!prefix.ok() || s[slash + 1] < '0' || s[slash + 1] > '9') return Family::kNone;
  return f;
}

// A whole number that fits an int (picojson keeps "2" as int64, "2.0" as double).
bool ToInt(const picojson::value& v, int64_t* out) {
  if (v.is<int64_t>()) {
    *out = v.get<int64_t>();
    return true;
  }
  return false;
}

// An optional array of objects; records a type error and returns nullptr
// when it is not one.
const picojson::array* ObjectArray(json::ObjectReader* r, const std::string& key, json::Errors* errors) {
  const picojson::value* v = r->Get(key);
  if (v == nullptr || v->is<picojson::null>()) return nullptr;
  if (!v->is<picojson::array>()) {
    r->Fail(key, std::string("expected an array, got ") + json::TypeName(*v));
    return nullptr;
  }
  const auto& arr = v->get<picojson::array>();
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is<picojson::object>()) {
      errors->push_back(Format("%s[%zu]: expected an object, got %s", r->PathOf(key).c_str(), i,
                               json::TypeName(arr[i])));
      return nullptr;
    }
  }
  return &arr;
}

}  // namespace

std::string QuoteForMessage(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      out += Format("\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<CniResult> CniResultFromJson(const picojson::value& v, const std::string& config_version) {
  json::Errors errors;
  json::ObjectReader r(v, "", &errors);
  CniResult res;
  if (r.ok()) {
    res.cni_version = config_version;
    r.String("cniVersion", &res.cni_version);
    if (const picojson::array* ifs = ObjectArray(&r, "interfaces", &errors)) {
      for (size_t i = 0; i < ifs->size(); ++i) {
        json::ObjectReader ir((*ifs)[i], Format("interfaces[%zu]", i), &errors);
        CniInterface iface;
        ir.String("name", &iface.name);
        ir.String("mac", &iface.mac);
        ir.String("sandbox", &iface.sandbox);
        int64_t mtu = 0;
        ir.Int("mtu", 0, INT32_MAX, &mtu);
        res.interfaces.push_back(std::move(iface));
      }
    }
    if (const picojson::array* ips = ObjectArray(&r, "ips", &errors)) {
      for (size_t i = 0; i < ips->size(); ++i) {
        json::ObjectReader ir((*ips)[i], Format("ips[%zu]", i), &errors);
        CniIp ip;
        size_t before = errors.size();
        ir.String("address", &ip.address);
        if (errors.size() == before && ir.Has("address") && AddressFamily(ip.address) == Family::kNone) {
          ir.Fail("address", QuoteForMessage(ip.address) + " is not an IP address in CIDR form");
        }
        before = errors.size();
        ir.String("gateway", &ip.gateway);
        if (errors.size() == before && !ip.gateway.empty() && AddressFamily(ip.gateway) == Family::kNone) {
          ir.Fail("gateway", QuoteForMessage(ip.gateway) + " is not an IP address");
        }
        std::string version;
        before = errors.size();
        ir.String("version", &version);
        if (errors.size() == before && ir.Has("version") && version != "4" && version != "6") {
          ir.Fail("version", "expected \"4\" or \"6\", got " + QuoteForMessage(version));
        }
        if (const picojson::value* idx = ir.Get("interface"); idx != nullptr && !idx->is<picojson::null>()) {
          int64_t n = 0;
          if (!ToInt(*idx, &n)) {
            ir.Fail("interface", std::string("expected an index into interfaces, got ") + json::TypeName(*idx) +
                                     " " + json::Preview(*idx));
          } else if (n < 0 || static_cast<uint64_t>(n) >= res.interfaces.size()) {
            ir.Fail("interface", Format("%lld is not an index into interfaces (%zu entries)",
                                        static_cast<long long>(n), res.interfaces.size()));
          } else {
            ip.interface = static_cast<int>(n);
          }
        }
        res.ips.push_back(std::move(ip));
      }
    }
    if (const picojson::array* routes = ObjectArray(&r, "routes", &errors)) {
      for (size_t i = 0; i < routes->size(); ++i) {
        json::ObjectReader rr((*routes)[i], Format("routes[%zu]", i), &errors);
        std::string s;
        rr.String("dst", &s);
        rr.String("gw", &s);
      }
    }
    if (const picojson::value* dns = r.Get("dns"); dns != nullptr && !dns->is<picojson::null>()) {
      json::ObjectReader dr(*dns, "dns", &errors);
      std::vector<std::string> list;
      std::string s;
      dr.StringList("nameservers", &list);
      dr.String("domain", &s);
      dr.StringList("search", &list);
      dr.StringList("options", &list);
    }
  }
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  res.raw = v;
  // libcni's fix-up (cni#895): a result without cniVersion is in the
  // config's version, and says so when chained as prevResult or cached.
  if (!r.Has("cniVersion") && !config_version.empty()) {
    res.raw.get<picojson::object>()["cniVersion"] = picojson::value(config_version);
  }
  return res;
}

Result<CniResult> ParseCniResult(const std::string& text, const std::string& config_version) {
  json::ParseLimits limits;
  limits.max_bytes = kMaxOutputBytes;
  auto doc = json::Parse(text, limits);
  if (!doc.ok()) return doc.error();
  return CniResultFromJson(*doc, config_version);
}

Status PickAddress(const CniResult& r, std::string* ip, std::string* cidr) {
  auto take = [&](const CniIp& c) {
    *cidr = c.address;
    *ip = c.address.substr(0, c.address.find('/'));
    return OkStatus();
  };
  // Nomad's rule: interfaces by name, the first inside the namespace with
  // an address of the family looked for.
  std::vector<size_t> order;
  for (size_t i = 0; i < r.interfaces.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return r.interfaces[a].name < r.interfaces[b].name; });
  for (Family want : {Family::kV4, Family::kV6}) {
    for (size_t i : order) {
      if (r.interfaces[i].sandbox.empty()) continue;
      for (const CniIp& c : r.ips) {
        if (c.interface == static_cast<int>(i) && AddressFamily(c.address) == want) return take(c);
      }
    }
  }
  // No interface in the namespace says it has one (plugins that print no
  // interfaces, e.g. host-local alone): any address, IPv4 first.
  for (Family want : {Family::kV4, Family::kV6}) {
    for (const CniIp& c : r.ips) {
      if (AddressFamily(c.address) == want) return take(c);
    }
  }
  return Error(Code::kFailedPrecondition, "the result has no IP address");
}

Result<std::vector<std::string>> ParseVersionAnswer(const std::string& text) {
  json::ParseLimits limits;
  limits.max_bytes = kMaxOutputBytes;
  auto doc = json::Parse(text, limits);
  if (!doc.ok()) return doc.error();
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  std::string version;
  std::vector<std::string> supported;
  r.String("cniVersion", &version);
  r.StringList("supportedVersions", &supported);
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  if (supported.empty()) {
    // Plugins from before spec 0.3.0 print neither field (libcni's rule).
    if (!r.Has("cniVersion") && !r.Has("supportedVersions")) return std::vector<std::string>{"0.1.0"};
    return Error(Code::kInvalidArgument, "supportedVersions: missing or empty");
  }
  return supported;
}

CniError ParseCniError(const std::string& out, const std::string& err) {
  CniError e;
  std::string stderr_text = Trim(err.size() > kStderrTail ? err.substr(err.size() - kStderrTail) : err);
  std::string text = Trim(out);
  if (!text.empty()) {
    json::ParseLimits limits;
    limits.max_bytes = kMaxOutputBytes;
    auto doc = json::Parse(text, limits);
    if (!doc.ok() || !doc->is<picojson::object>()) {
      e.msg = "the plugin's error output could not be parsed: " + QuoteForMessage(text.substr(0, kQuoteBytes));
      e.details = stderr_text;
      return e;
    }
    // Fields of the wrong type are left out rather than failing: this is
    // already the report of a failure, and what is readable helps.
    const auto& o = doc->get<picojson::object>();
    auto get = [&](const char* k) -> const picojson::value* {
      auto it = o.find(k);
      return it == o.end() ? nullptr : &it->second;
    };
    if (const picojson::value* c = get("code"); c != nullptr) ToInt(*c, &e.code);
    if (const picojson::value* m = get("msg"); m != nullptr && m->is<std::string>()) e.msg = m->get<std::string>();
    if (const picojson::value* d = get("details"); d != nullptr && d->is<std::string>()) {
      e.details = d->get<std::string>();
    }
    if (e.msg.empty()) e.msg = stderr_text;
  } else {
    e.msg = stderr_text;
  }
  if (e.msg.empty() && e.details.empty()) e.msg = "no error message";
  return e;
}

std::string DescribeCniError(const CniError& e) {
  std::string s;
  if (e.code != 0) s = Format("[code %lld] ", static_cast<long long>(e.code));
  s += e.msg;
  if (!e.details.empty()) s += (e.msg.empty() ? "" : ": ") + e.details;
  return s;
}

}  // namespace outpost::net
