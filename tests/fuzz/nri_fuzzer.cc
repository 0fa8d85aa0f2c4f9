// libFuzzer target for the NRI codec (nriproto/codec.h): the whole input is
// one protobuf payload, decoded as every message the agent decodes from a
// plugin (and the plugin library's RegisterPluginRequest peer). Decoding
// must never crash or leak; whatever decodes must re-encode to bytes that
// decode again and encode the same (the encoding is canonical: defaults
// dropped, maps sorted, strings valid UTF-8).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "nriproto/codec.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

template <typename T>
void Try(std::string_view in) {
  T v;
  if (!outpost::nriproto::Decode(in, &v).ok()) return;
  std::string enc = outpost::nriproto::Encode(v);
  T back;
  Check(outpost::nriproto::Decode(enc, &back).ok());
  Check(outpost::nriproto::Encode(back) == enc);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace outpost::nri;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  Try<RegisterPluginRequest>(in);
  Try<ConfigureResponse>(in);
  Try<SynchronizeResponse>(in);
  Try<CreateContainerResponse>(in);
  Try<UpdateContainerResponse>(in);
  Try<StopContainerResponse>(in);
  Try<ValidateContainerAdjustmentResponse>(in);
  Try<UpdateContainersRequest>(in);
  return 0;
}
