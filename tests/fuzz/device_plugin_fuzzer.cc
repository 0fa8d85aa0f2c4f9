// libFuzzer target: the device plugin messages outpost decodes (kubelet's
// v1beta1: RegisterRequest, DevicePluginOptions, ListAndWatchResponse,
// PreferredAllocationResponse, AllocateResponse), and what it does with
// them: Register's validation, a grant merged from the response, the
// manager taking the device list. Byte 0 picks the message; the rest is its
// body. Nothing may crash; what decodes re-encodes to bytes that decode to
// the same value.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "devices/apply.h"
#include "devices/codec.h"
#include "devices/manager.h"
#include "devices/validate.h"

using namespace outpost;
using namespace outpost::devices;

namespace {

Loop* TheLoop() {
  static Loop* loop = Loop::Create()->release();
  return loop;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: {
      auto r = DecodeRegisterRequest(body);
      if (!r.ok()) return 0;
      auto again = DecodeRegisterRequest(EncodeRegisterRequest(*r));
      if (!again.ok() || again->resource_name != r->resource_name || again->endpoint != r->endpoint) __builtin_trap();
      (void)ValidateRegister("/var/lib/kubelet/device-plugins", r->version, r->resource_name, r->endpoint);
      (void)ValidatePlugin(r->resource_name, {r->version});
      (void)IsQualifiedCdiName(r->endpoint);
      break;
    }
    case 1: {
      auto o = DecodePluginOptions(body);
      if (o.ok() && !(*DecodePluginOptions(EncodePluginOptions(*o)) == *o)) __builtin_trap();
      break;
    }
    case 2: {
      auto list = DecodeListAndWatchResponse(body);
      if (!list.ok()) return 0;
      auto again = DecodeListAndWatchResponse(EncodeListAndWatchResponse(*list));
      if (!again.ok() || *again != *list) __builtin_trap();
      Manager m(TheLoop(), nullptr);
      m.Connect("vendor.example/x", "/p/x.sock", {false, true});
      m.Update("vendor.example/x", "/p/x.sock", *list);
      size_t n = 1 + list->size() / 2;
      std::string reason = m.WaitReason("j.t", {{"vendor.example/x", static_cast<int64_t>(n)}});
      auto plan = m.Begin("j.t", "vendor.example/x", static_cast<int64_t>(n), {0});
      if (plan.ok() != reason.empty()) __builtin_trap();
      if (!plan.ok()) return 0;
      auto ids = m.Reserve("j.t", "vendor.example/x", static_cast<int64_t>(n), plan->preferred.available, {0});
      if (!ids.ok() || ids->size() != n) __builtin_trap();
      break;
    }
    case 3: {
      auto pref = DecodePreferredAllocationResponse(body);
      if (pref.ok() && *DecodePreferredAllocationResponse(EncodePreferredAllocationResponse(*pref)) != *pref) {
        __builtin_trap();
      }
      break;
    }
    case 4: {
      auto r = DecodeAllocateResponse(body);
      if (!r.ok()) return 0;
      auto again = DecodeContainerAllocateResponse(EncodeContainerAllocateResponse(*r));
      if (!again.ok() || !(*again == *r)) __builtin_trap();
      auto g = MergeResponses({{"vendor.example/x", &*r}, {"vendor.example/y", &*r}});
      if (g.ok()) {
        std::map<std::string, std::string> env, annotations;
        (void)MergeIntoTask(*g, &env, &annotations);
      }
      break;
    }
  }
  return 0;
}
