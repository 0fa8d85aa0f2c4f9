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

const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

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

std::string Base64Encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) |
                 static_cast<uint8_t>(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    if (rest == 2) n |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Strict: whole quads, padding only at the end, and the unused bits of the
// last character zero, so that every input has one decoding and one
// encoding (Go writes it so).
Result<std::string> Base64Decode(const std::string& in) {
  if (in.size() % 4 != 0) {
    return Error(Code::kInvalidArgument, Format("not valid base64: length %zu is not a multiple of 4", in.size()));
  }
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    bool last = i + 4 == in.size();
    int pad = 0;
    if (last && in[i + 3] == '=') pad = in[i + 2] == '=' ? 2 : 1;
    uint32_t n = 0;
    for (int j = 0; j < 4; ++j) {
      int v = j >= 4 - pad ? 0 : Base64Value(in[i + j]);
      if (v < 0) return Error(Code::kInvalidArgument, Format("not valid base64: bad character at offset %zu", i + j));
      n = (n << 6) | static_cast<uint32_t>(v);
    }
    if ((pad == 1 && (n & 0xff) != 0) || (pad == 2 && (n & 0xffff) != 0)) {
      return Error(Code::kInvalidArgument, Format("not valid base64: stray bits before the padding at offset %zu", i));
    }
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

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
