// A job's `network` object: reading, canonical form, task environment.
#include "net/spec.h"

#include <arpa/inet.h>

#include <set>
#include <tuple>

#include "base/strings.h"
#include "net/cni_result.h"

namespace outpost::net {

namespace {

constexpr size_t kMaxPorts = 64;
constexpr size_t kMaxCniArgs = 32;
constexpr size_t kMaxCniArgBytes = 1024;

bool IsLabelChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The CNI network name rules (libcni: ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$).
bool IsCniName(const std::string& s) {
  if (s.empty() || s.size() > 128 || s[0] == '.' || s[0] == '_' || s[0] == '-') return false;
  for (char c : s) {
    if (!IsLabelChar(c) && c != '.' && c != '-') return false;
  }
  return true;
}

// RFC 1123 host name label: letters, digits and '-', not at either end.
bool IsHostname(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

bool IsIp(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

PortMapping ReadPort(const picojson::value& v, const std::string& path, json::Errors* errors) {
  PortMapping p;
  json::ObjectReader r(v, path, errors);
  if (!r.ok()) return p;  // the reader said why
  size_t before = errors->size();
  if (!r.Has("label")) r.Fail("label", "required");
  r.String("label", &p.label, false);
  if (errors->size() == before && !p.label.empty()) {
    bool ok = p.label.size() <= 63;
    for (char c : p.label) ok = ok && IsLabelChar(c);
    if (!ok) r.Fail("label", "may only contain letters, digits and '_' (at most 63), got " + QuoteForMessage(p.label));
  }
  if (!r.Has("static")) {
    r.Fail("static", "required: the host port (ports are not allocated dynamically)");
  }
  r.Int("static", 1, 65535, &p.host_port);
  r.Int("to", 1, 65535, &p.to);
  if (p.to == 0) p.to = p.host_port;
  r.String("protocol", &p.protocol, false);
  if (p.protocol != "tcp" && p.protocol != "udp") {
    r.Fail("protocol", "must be \"tcp\" or \"udp\", got " + QuoteForMessage(p.protocol));
  }
  r.String("host_ip", &p.host_ip);
  if (!p.host_ip.empty() && !IsIp(p.host_ip)) {
    r.Fail("host_ip", "must be an IPv4 or IPv6 address, got " + QuoteForMessage(p.host_ip));
  }
  r.RejectUnknown();
  return p;
}

}  // namespace

NetworkSpec NetworkSpecFromJson(const picojson::value& v, const std::string& path, json::Errors* errors) {
  NetworkSpec spec;
  json::ObjectReader r(v, path, errors);
  if (!r.ok()) return spec;  // the reader said why
  r.String("mode", &spec.mode, false);
  bool cni = spec.mode.compare(0, 4, "cni/") == 0;
  if (cni && !IsCniName(spec.mode.substr(4))) {
    r.Fail("mode", "\"cni/<name>\" needs a CNI network name (letters, digits, '_', '.', '-'), got " +
                       QuoteForMessage(spec.mode));
  } else if (!cni && spec.mode != "host" && spec.mode != "none" && spec.mode != "bridge") {
    r.Fail("mode", "must be \"host\", \"none\", \"bridge\" or \"cni/<name>\", got " + QuoteForMessage(spec.mode));
  }
  if (const picojson::value* ports = r.Get("ports")) {
    std::string ppath = r.PathOf("ports");
    if (!ports->is<picojson::array>()) {
      errors->push_back(ppath + ": expected a list, got " + json::TypeName(*ports));
    } else if (ports->get<picojson::array>().size() > kMaxPorts) {
      errors->push_back(Format("%s: %zu ports, more than the limit of %zu", ppath.c_str(),
                               ports->get<picojson::array>().size(), kMaxPorts));
    } else {
      std::set<std::string> labels;
      std::set<std::tuple<std::string, int64_t, std::string>> host_ports;
      const auto& a = ports->get<picojson::array>();
      for (size_t i = 0; i < a.size(); i++) {
        std::string ip = Format("%s[%zu]", ppath.c_str(), i);
        size_t before = errors->size();
        PortMapping p = ReadPort(a[i], ip, errors);
        if (errors->size() != before) continue;
        std::string env_name;  // labels name environment variables, upper-cased
        for (char c : p.label) env_name += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
        if (!labels.insert(env_name).second) {
          errors->push_back(ip + ".label: duplicate port label " + QuoteForMessage(p.label));
          continue;
        }
        if (!host_ports.emplace(p.host_ip, p.host_port, p.protocol).second) {
          errors->push_back(Format("%s.static: host port %lld/%s is mapped twice", ip.c_str(),
                                   static_cast<long long>(p.host_port), p.protocol.c_str()));
          continue;
        }
        spec.ports.push_back(std::move(p));
      }
    }
    if (!spec.ports.empty() && (spec.mode == "host" || spec.mode == "none")) {
      errors->push_back(ppath + ": port mappings need network mode \"bridge\" or \"cni/<name>\" (mode is " +
                        QuoteForMessage(spec.mode) + ")");
    }
  }
  if (const picojson::value* args = r.Get("cni_args")) {
    std::string apath = r.PathOf("cni_args");
    if (!args->is<picojson::object>()) {
      errors->push_back(apath + ": expected an object of strings, got " + json::TypeName(*args));
    } else if (args->get<picojson::object>().size() > kMaxCniArgs) {
      errors->push_back(Format("%s: more than %zu args", apath.c_str(), kMaxCniArgs));
    } else {
      for (const auto& [k, val] : args->get<picojson::object>()) {
        std::string kpath = apath + "." + k;
        if (k.empty() || k.find_first_of(";= ") != std::string::npos || k.size() > kMaxCniArgBytes) {
          errors->push_back(kpath + ": a CNI_ARGS key may not be empty or contain ';', '=' or spaces");
        } else if (k == "IgnoreUnknown" || k == "OUTPOST_JOB_ID") {
          errors->push_back(kpath + ": set by the agent");
        } else if (!val.is<std::string>()) {
          errors->push_back(kpath + ": expected a string, got " + json::TypeName(val));
        } else if (val.get<std::string>().find(';') != std::string::npos ||
                   val.get<std::string>().size() > kMaxCniArgBytes) {
          errors->push_back(kpath + ": a CNI_ARGS value may not contain ';' (it separates the args)");
        } else {
          spec.cni_args[k] = val.get<std::string>();
        }
      }
    }
    if (!spec.cni_args.empty() && !spec.UsesCni()) {
      errors->push_back(apath + ": needs network mode \"bridge\" or \"cni/<name>\"");
    }
  }
  r.String("hostname", &spec.hostname);
  if (!spec.hostname.empty() && !IsHostname(spec.hostname)) {
    r.Fail("hostname", "must be 1-63 letters, digits and '-', not starting or ending with '-', got " +
                           QuoteForMessage(spec.hostname));
  } else if (!spec.hostname.empty() && spec.mode == "host") {
    r.Fail("hostname", "needs a network mode other than \"host\" (the job shares the node's host name there)");
  }
  r.RejectUnknown();
  return spec;
}

picojson::value NetworkSpecToJson(const NetworkSpec& spec) {
  picojson::object o;
  o["mode"] = picojson::value(spec.mode);
  if (!spec.ports.empty()) {
    picojson::array ports;
    for (const PortMapping& p : spec.ports) {
      picojson::object po;
      po["label"] = picojson::value(p.label);
      po["static"] = picojson::value(p.host_port);
      po["to"] = picojson::value(p.to);
      po["protocol"] = picojson::value(p.protocol);
      if (!p.host_ip.empty()) po["host_ip"] = picojson::value(p.host_ip);
      ports.emplace_back(std::move(po));
    }
    o["ports"] = picojson::value(std::move(ports));
  }
  if (!spec.cni_args.empty()) {
    picojson::object args;
    for (const auto& [k, v] : spec.cni_args) args[k] = picojson::value(v);
    o["cni_args"] = picojson::value(std::move(args));
  }
  if (!spec.hostname.empty()) o["hostname"] = picojson::value(spec.hostname);
  return picojson::value(std::move(o));
}

void AddNetworkEnv(const std::string& ip, const std::vector<PortMapping>& ports,
                   std::map<std::string, std::string>* env) {
  if (!ip.empty()) (*env)["OUTPOST_IP"] = ip;
  for (const PortMapping& p : ports) {
    std::string label;
    for (char c : p.label) label += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    (*env)["OUTPOST_PORT_" + label] = std::to_string(p.to);
    (*env)["OUTPOST_HOST_PORT_" + label] = std::to_string(p.host_port);
  }
}

}  // namespace outpost::net
