// The CNI result cache in libcni's format. Entries are read back after a
// crash or by other tools' writers, so decoding treats them as untrusted.
#include "net/cni_cache.h"

#include <cerrno>

#include "base/json.h"
#include "base/strings.h"
#include "base/sys.h"
#include "net/cni_result.h"

namespace outpost::net {

namespace {

constexpr const char* kKind = "cniCacheV1";
// The config is up to 1 MiB (4/3 of that in base64) plus the result.
constexpr size_t kMaxEntryBytes = 4 << 20;

// A path component we build a file name from: nothing that leaves
// <dir>/results.
Status CheckPart(const char* what, const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos || s.find('\0') != std::string::npos) {
    return Error(Code::kInvalidArgument, Format("cni cache: %s %s cannot be part of a file name", what,
                                                QuoteForMessage(s).c_str()));
  }
  return OkStatus();
}

std::string ResultsDir(const std::string& dir) { return dir + "/results"; }

}  // namespace

std::string CacheEntryPath(const std::string& dir, const std::string& network, const std::string& container_id,
                           const std::string& ifname) {
  return ResultsDir(dir) + "/" + network + "-" + container_id + "-" + ifname;
}

std::string EncodeCacheEntry(const CacheEntry& e) {
  picojson::object o;
  o["kind"] = picojson::value(kKind);
  o["containerId"] = picojson::value(e.container_id);
  o["config"] = picojson::value(Base64Encode(e.config));
  o["ifName"] = picojson::value(e.ifname);
  o["networkName"] = picojson::value(e.network);
  o["netns"] = picojson::value(e.netns);
  picojson::array args;
  for (const auto& [k, v] : e.cni_args) {
    args.push_back(picojson::value(picojson::array{picojson::value(k), picojson::value(v)}));
  }
  o["cniArgs"] = picojson::value(std::move(args));
  o["capabilityArgs"] = picojson::value(e.capability_args);
  if (e.HasResult()) o["result"] = e.result;
  return picojson::value(std::move(o)).serialize();
}

Result<CacheEntry> DecodeCacheEntry(const std::string& text) {
  // WriteFileAtomic never leaves an empty file; one is from another writer
  // or a file system that lost the data of a renamed file.
  if (text.empty()) return Error(Code::kInvalidArgument, "empty (written by an interrupted agent?)");
  json::ParseLimits limits;
  limits.max_bytes = kMaxEntryBytes;
  auto doc = json::Parse(text, limits);
  if (!doc.ok()) return doc.error();
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  CacheEntry e;
  if (r.ok()) {
    std::string kind;
    r.String("kind", &kind);
    if (errors.empty() && kind != kKind) {
      r.Fail("kind", std::string("expected \"") + kKind + "\", got " + QuoteForMessage(kind));
    }
    for (const char* k : {"containerId", "ifName", "networkName"}) {
      if (!r.Has(k)) r.Fail(k, "missing");
    }
    r.String("containerId", &e.container_id);
    r.String("ifName", &e.ifname);
    r.String("networkName", &e.network);
    r.String("netns", &e.netns);
    std::string config;
    size_t before = errors.size();
    r.String("config", &config);
    if (errors.size() == before) {
      auto bytes = Base64Decode(config);
      if (bytes.ok()) {
        e.config = std::move(bytes.value());
      } else {
        r.Fail("config", bytes.error().message());
      }
    }
    if (const picojson::value* args = r.Get("cniArgs"); args != nullptr && !args->is<picojson::null>()) {
      if (!args->is<picojson::array>()) {
        r.Fail("cniArgs", std::string("expected an array, got ") + json::TypeName(*args));
      } else {
        const auto& arr = args->get<picojson::array>();
        for (size_t i = 0; i < arr.size(); ++i) {
          const picojson::value& kv = arr[i];
          if (!kv.is<picojson::array>() || kv.get<picojson::array>().size() != 2 ||
              !kv.get<picojson::array>()[0].is<std::string>() || !kv.get<picojson::array>()[1].is<std::string>()) {
            errors.push_back(Format("cniArgs[%zu]: expected a [key, value] pair of strings, got %s", i,
                                    json::Preview(kv).c_str()));
            continue;
          }
          e.cni_args.emplace_back(kv.get<picojson::array>()[0].get<std::string>(),
                                  kv.get<picojson::array>()[1].get<std::string>());
        }
      }
    }
    if (const picojson::value* caps = r.Get("capabilityArgs"); caps != nullptr && !caps->is<picojson::null>()) {
      if (!caps->is<picojson::object>()) {
        r.Fail("capabilityArgs", std::string("expected an object, got ") + json::TypeName(*caps));
      } else {
        e.capability_args = caps->get<picojson::object>();
      }
    }
    if (const picojson::value* res = r.Get("result"); res != nullptr && !res->is<picojson::null>()) {
      if (!res->is<picojson::object>()) {
        r.Fail("result", std::string("expected an object, got ") + json::TypeName(*res));
      } else {
        e.result = *res;
      }
    }
  }
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  return e;
}

Status WriteCacheEntry(const std::string& dir, const CacheEntry& e) {
  OUTPOST_RETURN_IF_ERROR(CheckPart("network", e.network));
  OUTPOST_RETURN_IF_ERROR(CheckPart("container id", e.container_id));
  OUTPOST_RETURN_IF_ERROR(CheckPart("interface", e.ifname));
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(ResultsDir(dir), 0700));
  return sys::WriteFileAtomic(CacheEntryPath(dir, e.network, e.container_id, e.ifname), EncodeCacheEntry(e), 0600,
                              sys::Durability::kPowerCut);
}

Result<CacheEntry> ReadCacheFile(const std::string& path) {
  auto text = sys::ReadFile(path, kMaxEntryBytes);
  if (!text.ok()) return text.error();
  auto e = DecodeCacheEntry(*text);
  if (!e.ok()) return e.error().Wrap(path);
  return e;
}

Result<CacheEntry> ReadCacheEntry(const std::string& dir, const std::string& network,
                                  const std::string& container_id, const std::string& ifname) {
  OUTPOST_RETURN_IF_ERROR(CheckPart("network", network));
  OUTPOST_RETURN_IF_ERROR(CheckPart("container id", container_id));
  OUTPOST_RETURN_IF_ERROR(CheckPart("interface", ifname));
  return ReadCacheFile(CacheEntryPath(dir, network, container_id, ifname));
}

std::vector<std::string> ListCacheFiles(const std::string& dir) {
  std::vector<std::string> out;
  auto names = sys::ListDir(ResultsDir(dir));
  if (!names.ok()) return out;
  for (const std::string& n : *names) {
    // WriteFileAtomic's temp files (<path>.tmp) and other dot files are
    // not entries.
    if (n[0] == '.' || EndsWith(n, ".tmp")) continue;
    out.push_back(ResultsDir(dir) + "/" + n);
  }
  return out;
}

Status RemoveCacheEntry(const std::string& dir, const std::string& network, const std::string& container_id,
                        const std::string& ifname) {
  OUTPOST_RETURN_IF_ERROR(CheckPart("network", network));
  OUTPOST_RETURN_IF_ERROR(CheckPart("container id", container_id));
  OUTPOST_RETURN_IF_ERROR(CheckPart("interface", ifname));
  return sys::RemoveFileDurable(CacheEntryPath(dir, network, container_id, ifname));
}

}  // namespace outpost::net
