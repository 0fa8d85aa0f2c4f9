// nri-annotations: an example NRI plugin on outpost's NRI plugin library
// (include/outpost/nri.h). On CreateContainer it turns the container's
// annotations into adjustments:
//
//   memory.outpost.dev/limit: "64M"        resources.memory.limit (bytes;
//                                          K, M, G, T suffixes: powers of 1024)
//   cpu.outpost.dev/shares: "512"          resources.cpu.shares
//   cpu.outpost.dev/quota: "50000"         resources.cpu.quota (microseconds
//                                          per period; -1 = none)
//   env.outpost.dev/NAME: "value"          environment variable NAME=value
//   rlimits.outpost.dev/nofile: "1024:2048"  RLIMIT_NOFILE soft 1024, hard 2048
//                                          (any rlimit: nproc, core, ...;
//                                          "unlimited" allowed)
//
// A value that does not parse fails the container's creation with an error
// naming the annotation and the value.
//
//   nri-annotations [-idx NN] [-name NAME] [-socket-path PATH]
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "outpost/nri.h"

using namespace outpost::nri;

namespace {

constexpr const char kMemoryLimit[] = "memory.outpost.dev/limit";
constexpr const char kCpuShares[] = "cpu.outpost.dev/shares";
constexpr const char kCpuQuota[] = "cpu.outpost.dev/quota";
constexpr const char kEnvPrefix[] = "env.outpost.dev/";
constexpr const char kRlimitPrefix[] = "rlimits.outpost.dev/";

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno != 0) return false;
  *out = v;
  return true;
}

// "64M", "1G", "1048576", "512Ki".
bool ParseBytes(std::string s, int64_t* out) {
  int64_t mult = 1;
  if (s.size() > 2 && (s.compare(s.size() - 2, 2, "Ki") == 0 || s.compare(s.size() - 2, 2, "Mi") == 0 ||
                       s.compare(s.size() - 2, 2, "Gi") == 0 || s.compare(s.size() - 2, 2, "Ti") == 0)) {
    s.pop_back();
  }
  if (!s.empty()) {
    switch (s.back()) {
      case 'k': case 'K': mult = 1LL << 10; break;
      case 'm': case 'M': mult = 1LL << 20; break;
      case 'g': case 'G': mult = 1LL << 30; break;
      case 't': case 'T': mult = 1LL << 40; break;
      default: break;
    }
    if (mult != 1) s.pop_back();
  }
  int64_t n = 0;
  if (!ParseInt(s, &n) || n <= 0 || n > INT64_MAX / mult) return false;
  *out = n * mult;
  return true;
}

bool ParseLimit(const std::string& s, uint64_t* out) {
  if (s == "unlimited" || s == "infinity") {
    *out = UINT64_MAX;
    return true;
  }
  int64_t n = 0;
  if (!ParseInt(s, &n) || n < 0) return false;
  *out = static_cast<uint64_t>(n);
  return true;
}

std::string Upper(std::string s) {
  for (char& c : s) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return s;
}

bool ValidRlimitName(const std::string& n) {
  static const char* const kKnown[] = {"AS",     "CORE",    "CPU",   "DATA",   "FSIZE",      "LOCKS",
                                       "MEMLOCK", "MSGQUEUE", "NICE", "NOFILE", "NPROC",      "RSS",
                                       "RTPRIO", "RTTIME",  "SIGPENDING", "STACK"};
  for (const char* k : kKnown)
    if (n == k) return true;
  return false;
}

std::string Bad(const std::string& key, const std::string& value, const char* want) {
  return "annotation " + key + ": invalid value \"" + value + "\" (" + want + ")";
}

class Annotations : public Stub {
 public:
  using Stub::Stub;

  std::string CreateContainer(const PodSandbox&, const Container& ctr, CreateContainerResponse* out) override {
    ContainerAdjustment adj;
    bool any = false;
    auto resources = [&]() -> Resources& {
      LinuxAdjustment& l = adj.linux ? *adj.linux : adj.linux.emplace();
      return l.resources ? *l.resources : l.resources.emplace();
    };
    for (const auto& [key, value] : ctr.annotations) {
      if (key == kMemoryLimit) {
        int64_t bytes = 0;
        if (!ParseBytes(value, &bytes)) return Bad(key, value, "a size such as 64M");
        resources().memory.emplace().limit = bytes;
        any = true;
      } else if (key == kCpuShares) {
        int64_t n = 0;
        if (!ParseInt(value, &n) || n < 2 || n > 262144) return Bad(key, value, "shares 2..262144");
        Resources& r = resources();
        (r.cpu ? *r.cpu : r.cpu.emplace()).shares = static_cast<uint64_t>(n);
        any = true;
      } else if (key == kCpuQuota) {
        int64_t n = 0;
        if (!ParseInt(value, &n) || (n < 1000 && n != -1)) return Bad(key, value, "microseconds >= 1000, or -1");
        Resources& r = resources();
        (r.cpu ? *r.cpu : r.cpu.emplace()).quota = n;
        any = true;
      } else if (key.compare(0, sizeof(kEnvPrefix) - 1, kEnvPrefix) == 0) {
        std::string name = key.substr(sizeof(kEnvPrefix) - 1);
        if (name.empty() || name.find('=') != std::string::npos) return Bad(key, value, "env.outpost.dev/NAME");
        adj.env.push_back({name, value});
        any = true;
      } else if (key.compare(0, sizeof(kRlimitPrefix) - 1, kRlimitPrefix) == 0) {
        std::string type = Upper(key.substr(sizeof(kRlimitPrefix) - 1));
        if (type.compare(0, 7, "RLIMIT_") == 0) type = type.substr(7);
        if (!ValidRlimitName(type)) return "annotation " + key + ": unknown rlimit \"" + type + "\"";
        size_t colon = value.find(':');
        Rlimit rl;
        rl.type = "RLIMIT_" + type;
        bool ok = colon == std::string::npos
                      ? ParseLimit(value, &rl.soft) && ParseLimit(value, &rl.hard)
                      : ParseLimit(value.substr(0, colon), &rl.soft) && ParseLimit(value.substr(colon + 1), &rl.hard);
        if (!ok || rl.soft > rl.hard) return Bad(key, value, "SOFT:HARD with SOFT <= HARD");
        adj.rlimits.push_back(rl);
        any = true;
      }
    }
    if (any) out->adjust = std::move(adj);
    return "";
  }
};

}  // namespace

int main(int argc, char** argv) {
  StubOptions o;
  o.argv0 = argv[0];
  o.events = EventMask(Event::kCreateContainer);
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    while (!a.empty() && a[0] == '-') a.erase(0, 1);
    std::string v;
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (i + 1 < argc) {
      v = argv[++i];
    } else {
      a = "?";
    }
    if (a == "idx") o.index = v;
    else if (a == "name") o.name = v;
    else if (a == "socket-path") o.socket_path = v;
    else {
      std::fprintf(stderr, "usage: nri-annotations [-idx NN] [-name NAME] [-socket-path PATH]\n");
      return 2;
    }
  }
  Annotations p(o);
  return p.Run();
}
