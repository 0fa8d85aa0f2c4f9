// net::ParseCniResult and PickAddress (Debian bridge results in 0.4.0 and
// 1.0.0 form, Nomad's address rule, malformed fields with their path),
// ParseVersionAnswer, ParseCniError/DescribeCniError, and the result cache
// (round trip on disk with libcni's modes, zero-byte and corrupt entries,
// base64 vectors).
#include <sys/stat.h>
#include <unistd.h>

#include <ftw.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/sys.h"
#include "net/cni_cache.h"
#include "net/cni_result.h"
#include "test_util.h"

namespace outpost::net {
namespace {

// What the Debian bridge plugin (with host-local) prints for a 0.4.0 ADD.
const char kBridgeResult040[] = R"({
  "cniVersion": "0.4.0",
  "interfaces": [
    {"name": "outpost0", "mac": "8a:2b:9c:10:00:01"},
    {"name": "veth5d3c7a1e", "mac": "ae:01:22:33:44:55"},
    {"name": "eth0", "mac": "02:42:0a:2e:00:02", "sandbox": "/run/netns/x"}
  ],
  "ips": [{"version": "4", "interface": 2, "address": "10.46.0.2/20", "gateway": "10.46.0.1"}],
  "routes": [{"dst": "0.0.0.0/0"}],
  "dns": {}
})";

// The same in 1.0.0 form: no ips[].version, mtu on interfaces.
const char kBridgeResult100[] = R"({
  "cniVersion": "1.0.0",
  "interfaces": [
    {"name": "outpost0", "mac": "8a:2b:9c:10:00:01", "mtu": 1500},
    {"name": "veth5d3c7a1e", "mac": "ae:01:22:33:44:55", "mtu": 1500},
    {"name": "eth0", "mac": "02:42:0a:2e:00:02", "mtu": 1500, "sandbox": "/run/netns/x"}
  ],
  "ips": [{"interface": 2, "address": "fd00:46::2/64", "gateway": "fd00:46::1"},
          {"interface": 2, "address": "10.46.0.2/20", "gateway": "10.46.0.1"}],
  "routes": [{"dst": "0.0.0.0/0", "gw": "10.46.0.1"}],
  "dns": {"nameservers": ["10.46.0.1"], "search": ["svc.local"]}
})";

std::string ResultError(const std::string& text) {
  auto r = ParseCniResult(text, "0.4.0");
  if (r.ok()) return "(parsed)";
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  return r.error().message();
}

std::string Pick(const std::string& text) {
  auto r = ParseCniResult(text, "1.0.0");
  if (!r.ok()) return "parse: " + r.error().message();
  std::string ip, cidr;
  Status st = PickAddress(*r, &ip, &cidr);
  if (!st.ok()) return st.error().message();
  return ip + " " + cidr;
}

TEST(CniResultTest, ParsesDebianBridgeResult040) {
  auto r = ParseCniResult(kBridgeResult040, "0.4.0");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->cni_version, "0.4.0");
  ASSERT_EQ(r->interfaces.size(), 3u);
  EXPECT_EQ(r->interfaces[0].name, "outpost0");
  EXPECT_EQ(r->interfaces[0].sandbox, "");
  EXPECT_EQ(r->interfaces[2].name, "eth0");
  EXPECT_EQ(r->interfaces[2].mac, "02:42:0a:2e:00:02");
  EXPECT_EQ(r->interfaces[2].sandbox, "/run/netns/x");
  ASSERT_EQ(r->ips.size(), 1u);
  EXPECT_EQ(r->ips[0].address, "10.46.0.2/20");
  EXPECT_EQ(r->ips[0].gateway, "10.46.0.1");
  EXPECT_EQ(r->ips[0].interface, 2);
  EXPECT_TRUE(r->raw.get<picojson::object>().count("routes"));
  std::string ip, cidr;
  ASSERT_TRUE(PickAddress(*r, &ip, &cidr).ok());
  EXPECT_EQ(ip, "10.46.0.2");
  EXPECT_EQ(cidr, "10.46.0.2/20");
}

TEST(CniResultTest, ParsesResult100AndPrefersIPv4) {
  auto r = ParseCniResult(kBridgeResult100, "1.0.0");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->cni_version, "1.0.0");
  EXPECT_EQ(r->ips.size(), 2u);
  EXPECT_EQ(Pick(kBridgeResult100), "10.46.0.2 10.46.0.2/20");
}

TEST(CniResultTest, MissingCniVersionIsTheConfigs) {
  auto r = ParseCniResult(R"({"ips":[{"address":"10.0.0.5/24"}]})", "0.4.0");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->cni_version, "0.4.0");
  // And the raw result says so when chained or cached.
  EXPECT_EQ(r->raw.get<picojson::object>().at("cniVersion").get<std::string>(), "0.4.0");
  EXPECT_EQ(r->ips[0].interface, -1);
}

TEST(CniResultTest, MalformedResultsNameTheField) {
  EXPECT_EQ(ResultError("[]"), "document: expected an object, got array");
  EXPECT_EQ(ResultError("not json").rfind("invalid JSON: ", 0), 0u);
  EXPECT_EQ(ResultError(R"({"cniVersion":4})"), "cniVersion: expected a string, got number");
  EXPECT_EQ(ResultError(R"({"interfaces":{}})"), "interfaces: expected an array, got object");
  EXPECT_EQ(ResultError(R"({"interfaces":[{"name":"eth0"},"eth1"]})"),
            "interfaces[1]: expected an object, got string");
  EXPECT_EQ(ResultError(R"({"interfaces":[{"name":1}]})"), "interfaces[0].name: expected a string, got number");
  EXPECT_EQ(ResultError(R"({"interfaces":[{"sandbox":false}]})"),
            "interfaces[0].sandbox: expected a string, got boolean");
  EXPECT_EQ(ResultError(R"({"interfaces":[{"mtu":"1500"}]})"), "interfaces[0].mtu: expected a number, got string");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":5}]})"), "ips[0].address: expected a string, got number");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":"10.0.0.1/24"},{"address":"ten"}]})"),
            "ips[1].address: \"ten\" is not an IP address in CIDR form");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":"10.0.0.1/33"}]})"),
            "ips[0].address: \"10.0.0.1/33\" is not an IP address in CIDR form");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":"10.0.0.1/-1"}]})"),
            "ips[0].address: \"10.0.0.1/-1\" is not an IP address in CIDR form");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":"10.0.0.1\u0000x/8"}]})"),
            "ips[0].address: \"10.0.0.1\\x00x/8\" is not an IP address in CIDR form");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":"10.0.0.1/8","gateway":"gw"}]})"),
            "ips[0].gateway: \"gw\" is not an IP address");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":"10.0.0.1/8","interface":"0"}]})"),
            "ips[0].interface: expected an index into interfaces, got string \"0\"");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":"10.0.0.1/8","interface":1.5}]})"),
            "ips[0].interface: expected an index into interfaces, got number 1.5");
  EXPECT_EQ(ResultError(R"({"interfaces":[{"name":"eth0"}],"ips":[{"address":"10.0.0.1/8","interface":1}]})"),
            "ips[0].interface: 1 is not an index into interfaces (1 entries)");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":"10.0.0.1/8","interface":-1}]})"),
            "ips[0].interface: -1 is not an index into interfaces (0 entries)");
  EXPECT_EQ(ResultError(R"({"ips":[{"address":"10.0.0.1/8","version":"5"}]})"),
            "ips[0].version: expected \"4\" or \"6\", got \"5\"");
  EXPECT_EQ(ResultError(R"({"routes":[{"dst":1}]})"), "routes[0].dst: expected a string, got number");
  EXPECT_EQ(ResultError(R"({"dns":{"nameservers":"8.8.8.8"}})"),
            "dns.nameservers: expected an array of strings, got string");
  EXPECT_EQ(ResultError(R"({"dns":[]})"), "dns: expected an object, got array");
  // Missing parts are fine.
  EXPECT_EQ(ResultError("{}"), "(parsed)");
  EXPECT_EQ(ResultError(R"({"ips":null,"dns":null})"), "(parsed)");
}

TEST(CniResultTest, PickAddressFollowsNomadsRule) {
  // Interfaces by name: "eth0" before "eth1", whatever the order printed.
  EXPECT_EQ(Pick(R"({"interfaces":[{"name":"eth1","sandbox":"/ns"},{"name":"eth0","sandbox":"/ns"}],
                     "ips":[{"interface":0,"address":"10.0.1.2/24"},{"interface":1,"address":"10.0.0.2/24"}]})"),
            "10.0.0.2 10.0.0.2/24");
  // A host-side interface does not count, even if first by name.
  EXPECT_EQ(Pick(R"({"interfaces":[{"name":"a-host"},{"name":"eth0","sandbox":"/ns"}],
                     "ips":[{"interface":0,"address":"192.168.0.1/24"},{"interface":1,"address":"10.0.0.2/24"}]})"),
            "10.0.0.2 10.0.0.2/24");
  // IPv4 on any sandbox interface beats IPv6 on an earlier one.
  EXPECT_EQ(Pick(R"({"interfaces":[{"name":"eth0","sandbox":"/ns"},{"name":"eth1","sandbox":"/ns"}],
                     "ips":[{"interface":0,"address":"fd00::2/64"},{"interface":1,"address":"10.0.0.2/24"}]})"),
            "10.0.0.2 10.0.0.2/24");
  // IPv6 only.
  EXPECT_EQ(Pick(R"({"interfaces":[{"name":"eth0","sandbox":"/ns"}],
                     "ips":[{"interface":0,"address":"fd00::2/64"}]})"),
            "fd00::2 fd00::2/64");
  // No interface references: any address, IPv4 first.
  EXPECT_EQ(Pick(R"({"ips":[{"address":"fd00::2/64"},{"address":"10.0.0.9/16"}]})"), "10.0.0.9 10.0.0.9/16");
  EXPECT_EQ(Pick(R"({"ips":[{"address":"fd00::3/64"}]})"), "fd00::3 fd00::3/64");
  // An address without a prefix is taken as written.
  EXPECT_EQ(Pick(R"({"ips":[{"address":"10.0.0.9"}]})"), "10.0.0.9 10.0.0.9");
  EXPECT_EQ(Pick(R"({"interfaces":[{"name":"eth0","sandbox":"/ns"}]})"), "the result has no IP address");
  auto r = ParseCniResult("{}", "1.0.0");
  ASSERT_TRUE(r.ok());
  std::string ip, cidr;
  Status st = PickAddress(*r, &ip, &cidr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kFailedPrecondition);
  // A hand-built result with a bad index is no crash.
  CniResult bad;
  bad.ips.push_back(CniIp{"10.1.1.1/8", "", 7});
  ASSERT_TRUE(PickAddress(bad, &ip, &cidr).ok());
  EXPECT_EQ(ip, "10.1.1.1");
}

TEST(CniResultTest, VersionAnswer) {
  auto v = ParseVersionAnswer(R"({"cniVersion":"1.0.0","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1",)"
                              R"("0.4.0","1.0.0"]})");
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(v->size(), 6u);
  EXPECT_EQ(v->back(), "1.0.0");
  v = ParseVersionAnswer("{}");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, std::vector<std::string>{"0.1.0"});
  v = ParseVersionAnswer(R"({"cniVersion":"1.0.0"})");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message(), "supportedVersions: missing or empty");
  v = ParseVersionAnswer(R"({"cniVersion":"1.0.0","supportedVersions":["1.0.0",2]})");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message(), "supportedVersions[1]: expected a string, got number");
  v = ParseVersionAnswer("1.0.0");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code(), Code::kInvalidArgument);
}

TEST(CniResultTest, ErrorObjectsAndTheirText) {
  CniError e = ParseCniError(R"({"cniVersion":"1.0.0","code":7,"msg":"invalid config","details":"no ipam"})", "");
  EXPECT_EQ(e.code, 7);
  EXPECT_EQ(e.msg, "invalid config");
  EXPECT_EQ(e.details, "no ipam");
  EXPECT_EQ(DescribeCniError(e), "[code 7] invalid config: no ipam");
  e = ParseCniError(R"({"code":11,"msg":"failed to allocate for range 0: no IP addresses available"})" "\n", "");
  EXPECT_EQ(DescribeCniError(e), "[code 11] failed to allocate for range 0: no IP addresses available");
  // Not JSON: quoted (escaped, first 200 bytes).
  e = ParseCniError("panic: \"boom\"\n\x01" + std::string(300, 'x'), "goroutine 1");
  EXPECT_EQ(e.code, 0);
  EXPECT_EQ(e.msg, "the plugin's error output could not be parsed: \"panic: \\\"boom\\\"\\n\\x01" +
                       std::string(200 - 15, 'x') + "\"");
  EXPECT_EQ(e.details, "goroutine 1");
  e = ParseCniError("[1,2]", "");
  EXPECT_EQ(e.msg, "the plugin's error output could not be parsed: \"[1,2]\"");
  // No stdout: stderr's last KiB, trimmed.
  e = ParseCniError("", std::string(2000, 'a') + "\n  failed to find plugin \"bridge\"\n");
  EXPECT_EQ(e.code, 0);
  EXPECT_EQ(e.msg.size(), 1024u - 1u);  // the last KiB, its final newline trimmed
  EXPECT_EQ(DescribeCniError(e).substr(DescribeCniError(e).size() - 30), "failed to find plugin \"bridge\"");
  e = ParseCniError(" \n", "  ");
  EXPECT_EQ(DescribeCniError(e), "no error message");
  // An object without msg: stderr's text stands in.
  e = ParseCniError(R"({"code":"x"})", "oops");
  EXPECT_EQ(DescribeCniError(e), "oops");
  e = ParseCniError(R"({"code":4})", "");
  EXPECT_EQ(DescribeCniError(e), "[code 4] no error message");
  EXPECT_EQ(DescribeCniError(CniError{0, "m", "d"}), "m: d");
  EXPECT_EQ(DescribeCniError(CniError{2, "", "d"}), "[code 2] d");
  e = ParseCniError(R"({"details":"only details"})", "");
  EXPECT_EQ(DescribeCniError(e), "only details");
}

// ---- cache ----

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

class CniCacheTest : public ::testing::Test {
 protected:
  CniCacheTest() { tmp_ = outpost::testing::MakeTempDir("/tmp", "cnicache"); }
  ~CniCacheTest() override { ::nftw(tmp_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

  static CacheEntry Entry() {
    CacheEntry e;
    e.network = "outpost";
    e.container_id = "3f2a9c0e-web";
    e.ifname = "eth0";
    e.netns = "/run/netns/x";
    e.config = R"({"cniVersion":"0.4.0","name":"outpost","plugins":[{"type":"bridge"}]})";
    e.cni_args = {{"IgnoreUnknown", "1"}, {"K8S_POD_NAME", "web"}};
    picojson::object pm;
    pm["hostPort"] = picojson::value(int64_t{8080});
    pm["containerPort"] = picojson::value(int64_t{80});
    pm["protocol"] = picojson::value("tcp");
    e.capability_args["portMappings"] = picojson::value(picojson::array{picojson::value(pm)});
    return e;
  }

  std::string tmp_;
};

TEST_F(CniCacheTest, RoundTripOnDiskWithLibcniLayout) {
  CacheEntry e = Entry();
  ASSERT_TRUE(WriteCacheEntry(tmp_, e).ok());
  std::string path = CacheEntryPath(tmp_, "outpost", "3f2a9c0e-web", "eth0");
  EXPECT_EQ(path, tmp_ + "/results/outpost-3f2a9c0e-web-eth0");
  struct stat st;
  ASSERT_EQ(0, ::stat((tmp_ + "/results").c_str(), &st));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(0, ::stat(path.c_str(), &st));
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  auto back = ReadCacheEntry(tmp_, "outpost", "3f2a9c0e-web", "eth0");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->network, e.network);
  EXPECT_EQ(back->container_id, e.container_id);
  EXPECT_EQ(back->ifname, e.ifname);
  EXPECT_EQ(back->netns, e.netns);
  EXPECT_EQ(back->config, e.config);
  EXPECT_EQ(back->cni_args, e.cni_args);
  EXPECT_EQ(picojson::value(back->capability_args).serialize(), picojson::value(e.capability_args).serialize());
  EXPECT_FALSE(back->HasResult());
  // Without a result there is no "result" key (libcni's reader takes null
  // as no result too); the config is base64.
  auto text = sys::ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find("\"result\""), std::string::npos);
  EXPECT_NE(text->find("\"kind\":\"cniCacheV1\""), std::string::npos);
  EXPECT_NE(text->find("\"config\":\"" + Base64Encode(e.config) + "\""), std::string::npos);

  // Rewritten with the result after ADD.
  auto r = ParseCniResult(kBridgeResult040, "0.4.0");
  ASSERT_TRUE(r.ok());
  e.result = r->raw;
  ASSERT_TRUE(WriteCacheEntry(tmp_, e).ok());
  back = ReadCacheFile(path);
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_TRUE(back->HasResult());
  EXPECT_EQ(back->result.serialize(), r->raw.serialize());

  CacheEntry other = Entry();
  other.ifname = "eth1";
  ASSERT_TRUE(WriteCacheEntry(tmp_, other).ok());
  EXPECT_EQ(ListCacheFiles(tmp_), (std::vector<std::string>{path, tmp_ + "/results/outpost-3f2a9c0e-web-eth1"}));
  ASSERT_TRUE(RemoveCacheEntry(tmp_, "outpost", "3f2a9c0e-web", "eth0").ok());
  ASSERT_TRUE(RemoveCacheEntry(tmp_, "outpost", "3f2a9c0e-web", "eth0").ok());  // missing is fine
  EXPECT_EQ(ListCacheFiles(tmp_), (std::vector<std::string>{tmp_ + "/results/outpost-3f2a9c0e-web-eth1"}));
  auto gone = ReadCacheEntry(tmp_, "outpost", "3f2a9c0e-web", "eth0");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), Code::kNotFound);
  EXPECT_TRUE(ListCacheFiles(tmp_ + "/none").empty());
}

TEST_F(CniCacheTest, NamesThatWouldLeaveTheDirectoryAreRefused) {
  CacheEntry e = Entry();
  e.container_id = "../../etc";
  Status st = WriteCacheEntry(tmp_, e);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kInvalidArgument);
  EXPECT_FALSE(ReadCacheEntry(tmp_, "n", "c", "").ok());
  EXPECT_FALSE(RemoveCacheEntry(tmp_, "..", "c", "eth0").ok());
}

TEST_F(CniCacheTest, ZeroByteAndCorruptEntries) {
  ASSERT_TRUE(sys::MkdirAll(tmp_ + "/results", 0700).ok());
  std::string path = CacheEntryPath(tmp_, "outpost", "c1", "eth0");
  ASSERT_TRUE(sys::WriteFileAtomic(path, "", 0600, sys::Durability::kProcessCrash).ok());
  auto e = ReadCacheEntry(tmp_, "outpost", "c1", "eth0");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code(), Code::kInvalidArgument);
  EXPECT_EQ(e.error().message(), path + ": empty (written by an interrupted agent?)");

  auto bad = [](const std::string& text) {
    auto d = DecodeCacheEntry(text);
    return d.ok() ? std::string("(decoded)") : d.error().message();
  };
  const std::string head = R"("kind":"cniCacheV1","containerId":"c","ifName":"eth0","networkName":"n")";
  EXPECT_EQ(bad("{" + head + R"(,"config":"e30="})"), "(decoded)");
  EXPECT_EQ(bad(R"({"kind":"cniCacheV2","containerId":"c","ifName":"eth0","networkName":"n"})"),
            "kind: expected \"cniCacheV1\", got \"cniCacheV2\"");
  EXPECT_EQ(bad(R"({"containerId":"c","ifName":"eth0","networkName":"n"})"), "kind: expected \"cniCacheV1\", got \"\"");
  EXPECT_EQ(bad(R"({"kind":"cniCacheV1","ifName":"eth0","networkName":"n"})"), "containerId: missing");
  EXPECT_EQ(bad("{" + head + R"(,"config":"e30"})"), "config: not valid base64: length 3 is not a multiple of 4");
  EXPECT_EQ(bad("{" + head + R"(,"config":"e3!="})"), "config: not valid base64: bad character at offset 2");
  EXPECT_EQ(bad("{" + head + R"(,"config":7})"), "config: expected a string, got number");
  EXPECT_EQ(bad("{" + head + R"(,"netns":[]})"), "netns: expected a string, got array");
  EXPECT_EQ(bad("{" + head + R"(,"cniArgs":[["a","b"],["c"]]})"),
            "cniArgs[1]: expected a [key, value] pair of strings, got [\"c\"]");
  EXPECT_EQ(bad("{" + head + R"(,"cniArgs":{}})"), "cniArgs: expected an array, got object");
  EXPECT_EQ(bad("{" + head + R"(,"capabilityArgs":[]})"), "capabilityArgs: expected an object, got array");
  EXPECT_EQ(bad("{" + head + R"(,"result":"ok"})"), "result: expected an object, got string");
  EXPECT_EQ(bad("{" + head + R"(,"result":null})"), "(decoded)");
  EXPECT_EQ(bad("[]"), "document: expected an object, got array");
  EXPECT_EQ(bad("{\"kind\"").rfind("invalid JSON: ", 0), 0u);

  ASSERT_TRUE(sys::WriteFileAtomic(path, "{}", 0600, sys::Durability::kProcessCrash).ok());
  e = ReadCacheFile(path);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message().rfind(path + ": kind: ", 0), 0u) << e.error().message();
}

TEST(CniBase64Test, Rfc4648Vectors) {
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},         {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
      {std::string("\x00\xff\xfe", 3), "AP/+"},
  };
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), coded);
    auto d = Base64Decode(coded);
    ASSERT_TRUE(d.ok()) << coded << ": " << d.error().message();
    EXPECT_EQ(*d, plain);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  auto d = Base64Decode(Base64Encode(all));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, all);
}

TEST(CniBase64Test, RejectsNonCanonicalInput) {
  for (const char* s : {"Zg", "Zg=", "Zg===", "Z===", "====", "Zm9v\n", "Zm-v", "Zm_v", "Zh==", "Zm9=", "Zg==Zg==",
                        "Zm=v"}) {
    EXPECT_FALSE(Base64Decode(s).ok()) << s;
  }
}

}  // namespace
}  // namespace outpost::net
