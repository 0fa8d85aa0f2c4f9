#include "devices/validate.h"

#include "base/strings.h"

namespace outpost::devices {

namespace {

bool Lower(char c) { return c >= 'a' && c <= 'z'; }
bool Digit(char c) { return c >= '0' && c <= '9'; }
bool Letter(char c) { return Lower(c) || (c >= 'A' && c <= 'Z'); }
bool Alnum(char c) { return Letter(c) || Digit(c); }

// k8s.io/apimachinery's IsDNS1123Subdomain: at most 253 bytes of
// dot-separated labels of [a-z0-9-], each starting and ending with [a-z0-9]
// (no per-label length limit there).
bool IsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t end = s.find('.', start);
    std::string_view label = s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (label.empty() || !(Lower(label.front()) || Digit(label.front())) ||
        !(Lower(label.back()) || Digit(label.back()))) {
      return false;
    }
    for (char c : label) {
      if (!Lower(c) && !Digit(c) && c != '-') return false;
    }
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

// The name part of a qualified name: 1-63 of [A-Za-z0-9_.-], alphanumeric
// at both ends.
bool IsNamePart(std::string_view s) {
  if (s.empty() || s.size() > 63 || !Alnum(s.front()) || !Alnum(s.back())) return false;
  for (char c : s) {
    if (!Alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

constexpr std::string_view kRequests = "requests.";
constexpr std::string_view kNativeDomain = "kubernetes.io/";

// A CDI vendor or class name (inner: alnum, '_', '-', '.', plus extra).
bool IsCdiPart(std::string_view s, bool letter_first, std::string_view extra) {
  if (s.empty() || !(letter_first ? Letter(s.front()) : Alnum(s.front())) || !Alnum(s.back())) return false;
  for (char c : s) {
    if (!Alnum(c) && c != '_' && c != '-' && c != '.' && extra.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// Go's path.Clean of an absolute path: no empty, "." or ".." components.
std::string CleanAbsolute(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view p = path.substr(start, end - start);
    if (p == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!p.empty() && p != ".") {
      parts.push_back(p);
    }
    start = end + 1;
  }
  std::string out;
  for (std::string_view p : parts) {
    out += '/';
    out += p;
  }
  return out.empty() ? "/" : out;
}

Error Unknown(std::string msg) { return Error(Code::kUnknown, std::move(msg)); }

}  // namespace

std::string GoQuote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c >= 0x80 ? Utf8RuneAt(s, i) : 1;
    if (c >= 0x80 && n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    const char* named = nullptr;
    switch (c) {
      case '"': named = "\\\""; break;
      case '\\': named = "\\\\"; break;
      case '\a': named = "\\a"; break;
      case '\b': named = "\\b"; break;
      case '\f': named = "\\f"; break;
      case '\n': named = "\\n"; break;
      case '\r': named = "\\r"; break;
      case '\t': named = "\\t"; break;
      case '\v': named = "\\v"; break;
      default: break;
    }
    if (named) out += named;
    else if (c < 0x20 || c >= 0x7f) out += Format("\\x%02x", c);
    else out += static_cast<char>(c);
    ++i;
  }
  return out + "\"";
}

bool IsExtendedResourceName(std::string_view name) { return ResourceNameProblem(name).empty(); }

std::string ResourceNameProblem(std::string_view name) {
  size_t slash = name.find('/');
  if (slash == std::string_view::npos) return "expected DOMAIN/NAME like \"vendor.example/camera\"";
  if (name.find(kNativeDomain) != std::string_view::npos) {
    return "names in kubernetes.io/ are the kubelet's own resources, not a device plugin's";
  }
  if (name.substr(0, kRequests.size()) == kRequests) return "must not start with \"requests.\"";
  if (name.find('/', slash + 1) != std::string_view::npos) return "must have exactly one '/' (DOMAIN/NAME)";
  // The kubelet checks "requests." + name (its quota form), so the domain
  // has 9 bytes fewer than a subdomain's 253.
  std::string domain = std::string(kRequests) + std::string(name.substr(0, slash));
  if (!IsSubdomain(domain)) {
    return "the domain " + GoQuote(name.substr(0, slash)) +
           " must be lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a "
           "letter or digit, at most 244 bytes";
  }
  if (!IsNamePart(name.substr(slash + 1))) {
    return "the name " + GoQuote(name.substr(slash + 1)) +
           " must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";
  }
  return "";
}

std::string InvalidResourceNameText(std::string_view name) { return "the ResourceName " + GoQuote(name) + " is invalid"; }

Result<std::string> ValidateRegister(const std::string& dir, const std::string& version,
                                     const std::string& resource_name, const std::string& endpoint) {
  if (version != kApiVersion) {
    return Unknown("requested API version " + GoQuote(version) + " is not supported by kubelet. Supported version is [" +
                   GoQuote(kApiVersion) + "]");
  }
  if (!IsExtendedResourceName(resource_name)) return Unknown(InvalidResourceNameText(resource_name));
  std::string root = CleanAbsolute(dir);
  std::string path = CleanAbsolute(root + "/" + endpoint);
  if (endpoint.empty() || path.size() <= root.size() + 1 || path.compare(0, root.size(), root) != 0 ||
      (root != "/" && path[root.size()] != '/') || endpoint.find('\0') != std::string::npos) {
    return Unknown("endpoint " + GoQuote(endpoint) + " is not a socket name in " + root);
  }
  if (path.size() > kMaxSocketPath) {
    return Unknown(Format("endpoint %s: socket path %s is %zu bytes, more than the %zu a unix socket takes",
                          GoQuote(endpoint).c_str(), path.c_str(), path.size(), kMaxSocketPath));
  }
  return path;
}

Status ValidatePlugin(const std::string& name, const std::vector<std::string>& versions) {
  bool supported = false;
  for (const std::string& v : versions) supported |= v == kApiVersion;
  if (!supported) {
    return Error(Code::kInvalidArgument, "manager version, " + std::string(kApiVersion) +
                                             ", is not among plugin supported versions [" +
                                             JoinStrings(versions, " ") + "]");
  }
  if (!IsExtendedResourceName(name)) {
    return Error(Code::kInvalidArgument, "invalid name of device plugin socket: " + InvalidResourceNameText(name));
  }
  return OkStatus();
}

bool IsQualifiedCdiName(std::string_view name) {
  if (name.empty() || name[0] == '/') return false;
  size_t eq = name.find('=');
  if (eq == std::string_view::npos) return false;
  std::string_view kind = name.substr(0, eq);
  size_t slash = kind.find('/');
  if (slash == std::string_view::npos) return false;
  return IsCdiPart(kind.substr(0, slash), true, "") && IsCdiPart(kind.substr(slash + 1), true, "") &&
         IsCdiPart(name.substr(eq + 1), false, ":");
}

}  // namespace outpost::devices
