// The NRI API's wire codec (proto/nri.proto, package nri.pkg.api.v1alpha1,
// compiled with nanopb) for both sides: the agent's NRI runtime (nri/) and
// the C++ NRI plugin library (sdk/, include/outpost/nri.h). Owns: turning
// the values of include/outpost/nri_api.h into the bytes a Go peer (the
// upstream stub, containerd) reads, and back. Below sdk
// (tools/check-layers.sh), so the plugin library links it.
//
// Encoding follows what Go's protobuf runtime does: proto3 defaults are not
// sent, repeated scalars are packed, maps are entry messages {key=1,
// value=2} (sorted by key), an Optional* wrapper is sent exactly when the
// std::optional is set (even holding 0). LinuxPodSandbox, LinuxContainer and
// LinuxContainerAdjustment are sent only when one of their fields is set (an
// adjustment's `linux` that is set but empty is not sent). Strings are made
// valid UTF-8 first (each invalid byte becomes U+FFFD): a Go peer rejects a
// message with invalid UTF-8 in a string field; map keys that become equal
// that way are sent once (the last wins). The *_raw fields are bytes and go
// out untouched. Encoding cannot fail.
//
// Decoding treats the bytes as untrusted: unknown fields (newer peers) are
// skipped, packed and unpacked repeated scalars both accepted, a repeated
// map key keeps its last value, and a malformed message is an
// InvalidArgument naming the message type ("decode nri
// CreateContainerResponse: ..."); *out is overwritten only on success and
// nothing leaks on failure. Input over 4 MiB (a ttRPC message's limit) is
// refused before decoding; every non-scalar field is a pointer, so what a
// decode allocates stays proportional to the input.
//
// Limits of the nanopb runtime (16-bit pb_size_t): a repeated field holds at
// most 65,535 elements (Encode keeps the first 65,535) and a bytes field
// (the *_raw fields) at most 65,535 bytes (decoding refuses more). Strings
// are NUL-terminated C strings inside nanopb: a string stops at its first
// NUL byte.
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"
#include "outpost/nri_api.h"

namespace outpost::nriproto {

#define OUTPOST_NRI_CODEC(T)              \
  std::string Encode(const nri::T& msg);  \
  Status Decode(std::string_view bytes, nri::T* out);

OUTPOST_NRI_CODEC(RegisterPluginRequest)
OUTPOST_NRI_CODEC(ConfigureRequest)
OUTPOST_NRI_CODEC(ConfigureResponse)
OUTPOST_NRI_CODEC(SynchronizeRequest)
OUTPOST_NRI_CODEC(SynchronizeResponse)
OUTPOST_NRI_CODEC(PodContainerRequest)
OUTPOST_NRI_CODEC(UpdatePodSandboxRequest)
OUTPOST_NRI_CODEC(CreateContainerResponse)
OUTPOST_NRI_CODEC(UpdateContainerRequest)
OUTPOST_NRI_CODEC(UpdateContainerResponse)
OUTPOST_NRI_CODEC(StopContainerResponse)
OUTPOST_NRI_CODEC(StateChangeEvent)
OUTPOST_NRI_CODEC(ValidateContainerAdjustmentRequest)
OUTPOST_NRI_CODEC(ValidateContainerAdjustmentResponse)
OUTPOST_NRI_CODEC(UpdateContainersRequest)
OUTPOST_NRI_CODEC(UpdateContainersResponse)
// Single values, for tests and for the plugin library's helpers.
OUTPOST_NRI_CODEC(PodSandbox)
OUTPOST_NRI_CODEC(Container)
OUTPOST_NRI_CODEC(ContainerAdjustment)
OUTPOST_NRI_CODEC(ContainerUpdate)

#undef OUTPOST_NRI_CODEC

// s with every byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string ValidUtf8(std::string_view s);

}  // namespace outpost::nriproto
