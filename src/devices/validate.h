// What the kubelet accepts from device plugins, as pure functions in the
// kubelet's own words (docs/devices.md): extended resource names
// ("vendor.example/camera"), a Register call on kubelet.sock, a
// DevicePlugin found in kubelet_plugins_dir (the kubelet's ValidatePlugin),
// and fully qualified CDI device names. Also a task's device request, the
// job spec's `resources.devices` entry.
// Owns no state. The registration handlers, the manager (manager.h), the
// job spec (job/spec_resources.cc) and the CDI code check with these; the
// wording of each refusal is part of the kubelet compatibility, so tests pin
// it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace outpost::devices {

constexpr char kApiVersion[] = "v1beta1";       // the only one, as for the kubelet
constexpr char kKubeletSocket[] = "kubelet.sock";
constexpr char kPluginType[] = "DevicePlugin";  // pluginregistration's PluginInfo.type
constexpr char kHealthy[] = "Healthy";          // Device.health; anything else is unhealthy
constexpr char kUnhealthy[] = "Unhealthy";
constexpr size_t kMaxSocketPath = 107;          // sun_path, less its NUL

// A task's request: count devices of resource.
struct Request {
  std::string resource;
  int64_t count = 0;
  bool operator==(const Request& o) const { return resource == o.resource && count == o.count; }
  bool operator!=(const Request& o) const { return !(*this == o); }
};

// The kubelet's IsExtendedResourceName (pkg/apis/core/v1/helper): a "/",
// nothing in kubernetes.io/, no "requests." prefix, and "requests." + name
// a qualified name: an optional DNS-1123 subdomain prefix (so at most 244
// bytes here), "/", a name of 1-63 letters, digits, '-', '_', '.' that
// starts and ends with a letter or digit.
bool IsExtendedResourceName(std::string_view name);
// Why name is not one, for people ("" when it is), e.g. `expected
// DOMAIN/NAME like "vendor.example/camera"`.
std::string ResourceNameProblem(std::string_view name);
// The kubelet's refusal: `the ResourceName "x" is invalid` (Go's %q).
std::string InvalidResourceNameText(std::string_view name);

// A Register call on kubelet.sock as the kubelet checks it, in its order
// and with its texts (returned as the call's error, Code kUnknown as from
// grpc-go's plain errors):
//   requested API version "v1" is not supported by kubelet. Supported version is ["v1beta1"]
//   the ResourceName "camera" is invalid
// On success, the plugin's socket: dir joined with endpoint as Go's
// filepath.Join does (cleaned; an absolute endpoint is appended to dir, not
// honoured, as by the kubelet). Beyond the kubelet, outpost refuses an
// endpoint that is empty or leads out of dir (`endpoint "../x" is not a
// socket name in <dir>`) and a path sun_path cannot hold.
Result<std::string> ValidateRegister(const std::string& dir, const std::string& version,
                                     const std::string& resource_name, const std::string& endpoint);

// A DevicePlugin found through kubelet_plugins_dir, as the kubelet's
// ValidatePlugin words it:
//   manager version, v1beta1, is not among plugin supported versions [v1 v2]
//   invalid name of device plugin socket: the ResourceName "x" is invalid
Status ValidatePlugin(const std::string& name, const std::vector<std::string>& versions);

// A fully qualified CDI device name, "vendor.com/class=name", by CDI's
// parser rules (vendor and class: a letter first, a letter or digit last,
// letters, digits, '_', '-', '.' between; name: letters or digits at both
// ends, '_', '-', '.', ':' between).
bool IsQualifiedCdiName(std::string_view name);

// Go's %q of s: quoted, with \" \\ \n \t ... and \xNN for bytes that are
// not printable UTF-8.
std::string GoQuote(std::string_view s);

}  // namespace outpost::devices
