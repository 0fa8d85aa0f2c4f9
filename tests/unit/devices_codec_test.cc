// The v1beta1 device plugin messages (devices/codec.h): round trips, the
// field numbers of the stock api.proto byte for byte, and untrusted bytes
// turned into errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "devices/codec.h"

namespace outpost::devices {
namespace {

// A length-delimited field: tag (field << 3 | 2), length, bytes.
std::string Field(int number, const std::string& bytes) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  out += static_cast<char>(bytes.size());  // the tests keep them under 128
  return out + bytes;
}
std::string Varint(int number, uint8_t v) { return std::string{static_cast<char>(number << 3), static_cast<char>(v)}; }

TEST(DevicesCodec, FieldNumbersOfTheStockProto) {
  // What a Go plugin built from k8s.io/kubelet's api.proto sends.
  std::string reg = Field(1, "v1beta1") + Field(2, "cam.sock") + Field(3, "vendor.example/camera") +
                    Field(4, Varint(1, 1) + Varint(2, 1));
  auto r = DecodeRegisterRequest(reg);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->version, "v1beta1");
  EXPECT_EQ(r->endpoint, "cam.sock");
  EXPECT_EQ(r->resource_name, "vendor.example/camera");
  EXPECT_TRUE(r->has_options);
  EXPECT_TRUE(r->options.pre_start_required);
  EXPECT_TRUE(r->options.get_preferred_allocation_available);
  EXPECT_EQ(EncodeRegisterRequest(*r), reg);

  // ListAndWatchResponse{devices: [{ID, health, topology{nodes[{ID: 1}]}}]}
  std::string dev = Field(1, "cam0") + Field(2, "Healthy") + Field(3, Field(1, Varint(1, 1)));
  auto list = DecodeListAndWatchResponse(Field(1, dev));
  ASSERT_TRUE(list.ok()) << list.error().message();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "cam0");
  EXPECT_TRUE((*list)[0].healthy());
  EXPECT_EQ((*list)[0].numa_nodes, std::vector<int64_t>{1});
  EXPECT_EQ(EncodeListAndWatchResponse(*list), Field(1, dev));

  // AllocateRequest{container_requests: [{devices_ids: ["a", "b"]}]}
  EXPECT_EQ(EncodeAllocateRequest({"a", "b"}), Field(1, Field(1, "a") + Field(1, "b")));
  EXPECT_EQ(EncodePreStartContainerRequest({"a"}), Field(1, "a"));
  // PreferredAllocationRequest{container_requests: [{available, must_include, allocation_size}]}
  EXPECT_EQ(EncodePreferredAllocationRequest({{"a", "b"}, {"a"}, 2}),
            Field(1, Field(1, "a") + Field(1, "b") + Field(2, "a") + Varint(3, 2)));
  auto pref = DecodePreferredAllocationResponse(Field(1, Field(1, "b") + Field(1, "a")));
  ASSERT_TRUE(pref.ok());
  EXPECT_EQ(*pref, (std::vector<std::string>{"b", "a"}));

  // ContainerAllocateResponse: envs 1 (map), mounts 2, devices 3, annotations 4 (map), cdi_devices 5.
  std::string car = Field(1, Field(1, "K") + Field(2, "V")) + Field(2, Field(1, "/c") + Field(2, "/h") + Varint(3, 1)) +
                    Field(3, Field(1, "/dev/x") + Field(2, "/dev/y") + Field(3, "rw")) +
                    Field(4, Field(1, "a") + Field(2, "b")) + Field(5, Field(1, "v.com/c=x"));
  auto resp = DecodeAllocateResponse(Field(1, car));
  ASSERT_TRUE(resp.ok()) << resp.error().message();
  EXPECT_EQ(resp->envs, (StringPairs{{"K", "V"}}));
  EXPECT_EQ(resp->mounts, (std::vector<Mount>{{"/c", "/h", true}}));
  EXPECT_EQ(resp->devices, (std::vector<DeviceSpec>{{"/dev/x", "/dev/y", "rw"}}));
  EXPECT_EQ(resp->annotations, (StringPairs{{"a", "b"}}));
  EXPECT_EQ(resp->cdi_devices, std::vector<std::string>{"v.com/c=x"});
  EXPECT_EQ(EncodeContainerAllocateResponse(*resp), car);
  EXPECT_EQ(EncodeAllocateResponse(*resp), Field(1, car));

  auto opts = DecodePluginOptions(Varint(2, 1));
  ASSERT_TRUE(opts.ok());
  EXPECT_FALSE(opts->pre_start_required);
  EXPECT_TRUE(opts->get_preferred_allocation_available);
  EXPECT_EQ(EncodePluginOptions(*opts), Varint(2, 1));
  EXPECT_EQ(EncodePluginOptions({}), "");
}

TEST(DevicesCodec, RoundTrips) {
  std::vector<Device> devices = {{"a", "Healthy", {}}, {"b", "Unhealthy", {0, 1}}, {"c", "", {}}};
  auto back = DecodeListAndWatchResponse(EncodeListAndWatchResponse(devices));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, devices);
  EXPECT_FALSE((*back)[2].healthy()) << "anything but \"Healthy\" is unhealthy";

  ContainerAllocateResponse r;
  r.envs = {{"A", "1"}, {"B", ""}};
  r.annotations = {{"x.example/y", "z"}};
  r.mounts = {{"/data", "/srv/data", false}};
  r.devices = {{"/dev/video0", "/dev/video0", "rwm"}};
  r.cdi_devices = {"vendor.com/camera=0", "vendor.com/camera=1"};
  auto rb = DecodeContainerAllocateResponse(EncodeContainerAllocateResponse(r));
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(*rb, r);

  auto pq = DecodePreferredAllocationRequest(EncodePreferredAllocationRequest({{"a", "b", "c"}, {"b"}, 2}));
  ASSERT_TRUE(pq.ok());
  EXPECT_EQ(pq->available, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(pq->must_include, std::vector<std::string>{"b"});
  EXPECT_EQ(pq->size, 2);
  auto aq = DecodeAllocateRequest(EncodeAllocateRequest({"x", "y"}));
  ASSERT_TRUE(aq.ok());
  EXPECT_EQ(*aq, (std::vector<std::string>{"x", "y"}));
  auto ps = DecodePreStartContainerRequest(EncodePreStartContainerRequest({"x"}));
  ASSERT_TRUE(ps.ok());
  EXPECT_EQ(*ps, std::vector<std::string>{"x"});
  auto pr = DecodePreferredAllocationResponse(EncodePreferredAllocationResponse({"y"}));
  ASSERT_TRUE(pr.ok());
  EXPECT_EQ(*pr, std::vector<std::string>{"y"});
}

TEST(DevicesCodec, MapsAndRepeatedIdsAsProto3AndTheKubeletReadThem) {
  // A repeated map key keeps its last value; maps come out sorted.
  std::string car = Field(1, Field(1, "Z") + Field(2, "1")) + Field(1, Field(1, "A") + Field(2, "2")) +
                    Field(1, Field(1, "Z") + Field(2, "3"));
  auto r = DecodeContainerAllocateResponse(car);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->envs, (StringPairs{{"A", "2"}, {"Z", "3"}}));
  // A repeated device ID keeps its last entry, in the place of its first.
  std::string list = Field(1, Field(1, "a") + Field(2, "Healthy")) + Field(1, Field(1, "b") + Field(2, "Healthy")) +
                     Field(1, Field(1, "a") + Field(2, "Unhealthy"));
  auto l = DecodeListAndWatchResponse(list);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].id, "a");
  EXPECT_EQ((*l)[0].health, "Unhealthy");
  // NUMA nodes: sorted, once each.
  auto n = DecodeListAndWatchResponse(
      Field(1, Field(1, "a") + Field(3, Field(1, Varint(1, 3)) + Field(1, Varint(1, 1)) + Field(1, Varint(1, 3)))));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ((*n)[0].numa_nodes, (std::vector<int64_t>{1, 3}));
  // Unknown fields are skipped, as proto3 does.
  auto u = DecodePluginOptions(Varint(1, 1) + Field(9, "future"));
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->pre_start_required);
}

TEST(DevicesCodec, UntrustedBytesAreErrors) {
  auto empty_id = DecodeListAndWatchResponse(Field(1, Field(2, "Healthy")));
  ASSERT_FALSE(empty_id.ok());
  EXPECT_EQ(empty_id.error().message(), "ListAndWatchResponse: devices[0]: empty ID");
  std::vector<Device> many(kMaxDevices + 1);
  for (size_t i = 0; i < many.size(); ++i) many[i].id = std::to_string(i);
  auto too_many = DecodeListAndWatchResponse(EncodeListAndWatchResponse(many));
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().message(), "ListAndWatchResponse: 10001 devices, more than the limit of 10000");
  auto long_id = DecodeListAndWatchResponse(EncodeListAndWatchResponse({{std::string(1025, 'x'), "Healthy", {}}}));
  ASSERT_FALSE(long_id.ok());
  EXPECT_EQ(long_id.error().message(), "ListAndWatchResponse: devices[0]: ID of 1025 bytes, more than the limit of 1024");
  auto none = DecodeAllocateResponse("");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "no containers return in allocation response (container_responses is empty)");
  auto big = DecodeAllocateResponse(std::string(kMaxMessageBytes + 1, '\0'));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), Code::kResourceExhausted);
  for (const std::string& junk : {std::string("\x0a\x05" "ab"), std::string("\xff\xff\xff"), std::string("\x0a"),
                                  Field(1, "\x0a\x7f")}) {
    EXPECT_FALSE(DecodeListAndWatchResponse(junk).ok());
    EXPECT_FALSE(DecodeAllocateResponse(junk).ok());
  }
  EXPECT_FALSE(DecodeRegisterRequest("\xff\xff\xff").ok());
  EXPECT_FALSE(DecodeRegisterRequest("\x0a\x05").ok());
  // No preference is no error.
  auto no_pref = DecodePreferredAllocationResponse("");
  ASSERT_TRUE(no_pref.ok());
  EXPECT_TRUE(no_pref->empty());
}

}  // namespace
}  // namespace outpost::devices
