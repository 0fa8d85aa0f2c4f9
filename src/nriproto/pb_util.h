// nriproto's internals: short names for the generated nanopb types of
// proto/nri.proto, the Arena an encoding points into, and the small
// converters the model codec (model.h) is built from. Owns no message
// layout; codec.h is the public face.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/pb.h"
#include "nri.pb.h"

namespace outpost::nriproto {

std::string ValidUtf8(std::string_view s);  // codec.h

namespace pb {
#define OUTPOST_NRI_PB(T) using T = nri_pkg_api_v1alpha1_##T;
OUTPOST_NRI_PB(RegisterPluginRequest)
OUTPOST_NRI_PB(ConfigureRequest)
OUTPOST_NRI_PB(ConfigureResponse)
OUTPOST_NRI_PB(SynchronizeRequest)
OUTPOST_NRI_PB(SynchronizeResponse)
OUTPOST_NRI_PB(UpdateContainersRequest)
OUTPOST_NRI_PB(UpdateContainersResponse)
OUTPOST_NRI_PB(PodContainerRequest)
OUTPOST_NRI_PB(UpdatePodSandboxRequest)
OUTPOST_NRI_PB(CreateContainerResponse)
OUTPOST_NRI_PB(UpdateContainerRequest)
OUTPOST_NRI_PB(UpdateContainerResponse)
OUTPOST_NRI_PB(StopContainerResponse)
OUTPOST_NRI_PB(StateChangeEvent)
OUTPOST_NRI_PB(ValidateContainerAdjustmentRequest)
OUTPOST_NRI_PB(ValidateContainerAdjustmentResponse)
OUTPOST_NRI_PB(PluginInstance)
OUTPOST_NRI_PB(PodSandbox)
OUTPOST_NRI_PB(LinuxPodSandbox)
OUTPOST_NRI_PB(Container)
OUTPOST_NRI_PB(LinuxContainer)
OUTPOST_NRI_PB(Mount)
OUTPOST_NRI_PB(Hooks)
OUTPOST_NRI_PB(Hook)
OUTPOST_NRI_PB(POSIXRlimit)
OUTPOST_NRI_PB(KeyValue)
OUTPOST_NRI_PB(LinuxNamespace)
OUTPOST_NRI_PB(LinuxDevice)
OUTPOST_NRI_PB(LinuxDeviceCgroup)
OUTPOST_NRI_PB(CDIDevice)
OUTPOST_NRI_PB(User)
OUTPOST_NRI_PB(LinuxResources)
OUTPOST_NRI_PB(LinuxMemory)
OUTPOST_NRI_PB(LinuxCPU)
OUTPOST_NRI_PB(HugepageLimit)
OUTPOST_NRI_PB(LinuxPids)
OUTPOST_NRI_PB(ContainerAdjustment)
OUTPOST_NRI_PB(NetDeviceEntry)
OUTPOST_NRI_PB(LinuxContainerAdjustment)
OUTPOST_NRI_PB(ContainerUpdate)
OUTPOST_NRI_PB(LinuxContainerUpdate)
OUTPOST_NRI_PB(ContainerEviction)
OUTPOST_NRI_PB(CompoundFieldOwners)
OUTPOST_NRI_PB(SimpleOwnerEntry)
OUTPOST_NRI_PB(CompoundOwnerEntry)
OUTPOST_NRI_PB(FieldOwners)
OUTPOST_NRI_PB(FieldOwnersEntry)
OUTPOST_NRI_PB(OwningPlugins)
OUTPOST_NRI_PB(OptionalString)
OUTPOST_NRI_PB(OptionalInt)
OUTPOST_NRI_PB(OptionalUInt32)
OUTPOST_NRI_PB(OptionalInt64)
OUTPOST_NRI_PB(OptionalUInt64)
OUTPOST_NRI_PB(OptionalBool)
OUTPOST_NRI_PB(OptionalFileMode)
#undef OUTPOST_NRI_PB
}  // namespace pb

// What one encoding points into: strings (made valid UTF-8), bytes,
// messages and arrays, all zero-initialised and freed together. nanopb
// structs are plain C data, so raw zeroed storage is a valid value of them.
class Arena {
 public:
  // s as valid UTF-8; nullptr when empty (proto3: an empty string is not
  // sent, and nanopb sends a non-NULL pointer even to "").
  char* S(const std::string& s);
  // A copy of data as a bytes field; never nullptr (present even if empty).
  // At most PB_SIZE_MAX bytes are kept.
  pb_bytes_array_t* Bytes(const std::string& data);
  template <typename T>
  T* New() {
    return new (Alloc(sizeof(T))) T{};
  }
  // n zeroed elements (at most PB_SIZE_MAX: nanopb's counts are 16-bit);
  // *count gets the number; nullptr when n is 0.
  template <typename T>
  T* Array(size_t n, pb_size_t* count) {
    if (n > PB_SIZE_MAX) n = PB_SIZE_MAX;
    *count = static_cast<pb_size_t>(n);
    if (n == 0) return nullptr;
    T* p = static_cast<T*>(Alloc(sizeof(T) * n));
    for (size_t i = 0; i < n; ++i) new (p + i) T{};
    return p;
  }

 private:
  void* Alloc(size_t n);
  std::vector<std::unique_ptr<unsigned char[]>> blocks_;
};

// ---- encoding helpers ------------------------------------------------------

bool IsValidUtf8(std::string_view s);

// m itself when every key is valid UTF-8; otherwise a copy in *tmp keyed by
// the keys as they are sent (ValidUtf8), so the entries stay sorted and
// unique on the wire. Keys that become equal: the last one wins, as in a
// decoder.
template <typename T>
const std::map<std::string, T>& SentKeys(const std::map<std::string, T>& m, std::map<std::string, T>* tmp) {
  bool valid = true;
  for (const auto& kv : m) valid = valid && IsValidUtf8(kv.first);
  if (valid) return m;
  for (const auto& kv : m) (*tmp)[ValidUtf8(kv.first)] = kv.second;
  return *tmp;
}

char** StringList(const std::vector<std::string>& v, Arena& a, pb_size_t* count);
pb::KeyValue* StringMap(const std::map<std::string, std::string>& m, Arena& a, pb_size_t* count);

// An Optional* wrapper holding *v, or nullptr when v is unset.
template <typename P, typename T>
P* Wrap(const std::optional<T>& v, Arena& a) {
  if (!v) return nullptr;
  P* m = a.New<P>();
  m->value = *v;
  return m;
}
pb::OptionalString* WrapString(const std::optional<std::string>& v, Arena& a);

// ---- decoding helpers ------------------------------------------------------

std::vector<std::string> ListOf(char* const* v, pb_size_t n);
std::map<std::string, std::string> MapOf(const pb::KeyValue* kv, pb_size_t n);
std::string BytesOf(const pb_bytes_array_t* b);

template <typename T, typename P>
std::optional<T> Unwrap(const P* m) {
  if (!m) return std::nullopt;
  return static_cast<T>(m->value);
}
std::optional<std::string> UnwrapString(const pb::OptionalString* m);

}  // namespace outpost::nriproto
