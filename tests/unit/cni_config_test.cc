// net::ParseNetworkList (Debian-plugin-shaped conflists and single .conf
// files, cniVersion(s), disableCheck, every malformed field with the path
// the error names), CompareVersions, and ConfigDir: libcni's lookup order,
// duplicates and invalid files as problems, a missing directory, and
// changes seen through the watch (tests wait on the dir's state, never on a
// fixed sleep).
#include "net/cni_config.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/sys.h"
#include "test_util.h"

namespace outpost::net {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

// What /etc/cni/net.d holds for Nomad-style bridge networking with the
// Debian containernetworking-plugins.
const char kBridgeConflist[] = R"({
  "cniVersion": "0.4.0",
  "name": "outpost",
  "plugins": [
    {"type": "loopback"},
    {"type": "bridge", "bridge": "outpost0", "ipMasq": true, "isGateway": true, "forceAddress": true,
     "hairpinMode": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.46.0.0/20"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "firewall", "backend": "iptables", "iptablesAdminChainName": "OUTPOST-ADMIN"},
    {"type": "portmap", "capabilities": {"portMappings": true, "bandwidth": false}, "snat": true}
  ]
})";

Result<NetworkList> Parse(const std::string& text, bool conflist = true) {
  return ParseNetworkList(text, conflist, "x.conflist");
}

std::string ErrorOf(const std::string& text, bool conflist = true) {
  auto l = Parse(text, conflist);
  if (l.ok()) return "(parsed)";
  EXPECT_EQ(l.error().code(), Code::kInvalidArgument);
  return l.error().message();
}

TEST(CniConfigTest, ParsesDebianBridgeConflist) {
  auto l = Parse(kBridgeConflist);
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->name, "outpost");
  EXPECT_EQ(l->cni_version, "0.4.0");
  EXPECT_FALSE(l->disable_check);
  EXPECT_EQ(l->file, "x.conflist");
  EXPECT_EQ(l->bytes, kBridgeConflist);
  ASSERT_EQ(l->plugins.size(), 4u);
  EXPECT_EQ(l->plugins[0].type, "loopback");
  EXPECT_EQ(l->plugins[1].type, "bridge");
  EXPECT_EQ(l->plugins[3].type, "portmap");
  // Unknown fields are kept for the plugin.
  EXPECT_EQ(l->plugins[1].raw.at("bridge").get<std::string>(), "outpost0");
  EXPECT_TRUE(l->plugins[1].raw.at("ipam").is<picojson::object>());
  EXPECT_EQ(l->plugins[2].raw.at("iptablesAdminChainName").get<std::string>(), "OUTPOST-ADMIN");
  EXPECT_TRUE(l->plugins[3].HasCapability("portMappings"));
  EXPECT_FALSE(l->plugins[3].HasCapability("bandwidth"));
  EXPECT_FALSE(l->plugins[3].HasCapability("ips"));
  EXPECT_FALSE(l->plugins[1].HasCapability("portMappings"));
}

TEST(CniConfigTest, SingleConfIsAOneElementList) {
  const char conf[] =
      R"({"cniVersion":"0.3.1","name":"mynet","type":"bridge","bridge":"cni0",)"
      R"("ipam":{"type":"host-local","subnet":"10.22.0.0/16"}})";
  auto l = ParseNetworkList(conf, false, "10-mynet.conf");
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->name, "mynet");
  EXPECT_EQ(l->cni_version, "0.3.1");
  ASSERT_EQ(l->plugins.size(), 1u);
  EXPECT_EQ(l->plugins[0].type, "bridge");
  EXPECT_EQ(l->plugins[0].raw.at("bridge").get<std::string>(), "cni0");
  EXPECT_EQ(l->plugins[0].raw.at("name").get<std::string>(), "mynet");
  // A single plugin's errors have no plugins[...] path.
  EXPECT_EQ(ErrorOf(R"({"cniVersion":"0.3.1","name":"n","type":"a/b"})", false),
            "x.conflist: type: \"a/b\" must be a plain file name (no '/')");
  EXPECT_EQ(ErrorOf(R"({"cniVersion":"0.3.1","name":"n"})", false), "x.conflist: type: missing");
}

TEST(CniConfigTest, MalformedConfigsNameFileAndField) {
  const std::string ok_head = R"("cniVersion":"1.0.0","name":"n")";
  EXPECT_EQ(ErrorOf("{"), "x.conflist: invalid JSON: syntax error at line 1 (unexpected end of the document)");
  EXPECT_EQ(ErrorOf("[]"), "x.conflist: document: expected an object, got array");
  EXPECT_EQ(ErrorOf(R"({"cniVersion":"1.0.0","plugins":[{"type":"bridge"}]})"), "x.conflist: name: missing");
  EXPECT_EQ(ErrorOf(R"({"cniVersion":"1.0.0","name":7,"plugins":[{"type":"bridge"}]})"),
            "x.conflist: name: expected a string, got number");
  EXPECT_EQ(ErrorOf(R"({"cniVersion":"1.0.0","name":"-bad","plugins":[{"type":"bridge"}]})"),
            "x.conflist: name: \"-bad\" is not a valid network name (letters, digits, '_', '.', '-', starting with "
            "a letter or digit)");
  EXPECT_EQ(ErrorOf(R"({"cniVersion":"1.0.0","name":"a b","plugins":[{"type":"bridge"}]})").substr(0, 37),
            "x.conflist: name: \"a b\" is not a vali");
  EXPECT_EQ(ErrorOf(R"({"name":"n","plugins":[{"type":"bridge"}]})"), "x.conflist: cniVersion: missing");
  EXPECT_EQ(ErrorOf(R"({"cniVersion":"one","name":"n","plugins":[{"type":"bridge"}]})"),
            "x.conflist: cniVersion: \"one\" is not a version");
  EXPECT_EQ(ErrorOf(R"({"cniVersion":"1.1.0","name":"n","plugins":[{"type":"bridge"}]})"),
            "x.conflist: cniVersion \"1.1.0\" is newer than 1.0.0, the newest this agent and the Debian CNI "
            "plugins speak");
  EXPECT_EQ(ErrorOf("{" + ok_head + "}"), "x.conflist: plugins: missing");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"plugins":{}})"), "x.conflist: plugins: expected an array, got object");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"plugins":[]})"), "x.conflist: plugins: must not be empty");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"plugins":[{"type":"bridge"},{"ipam":{}}]})"),
            "x.conflist: plugins[1].type: missing");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"plugins":[{"type":"bridge"},"portmap"]})"),
            "x.conflist: plugins[1]: expected an object, got string");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"plugins":[{"type":""}]})"), "x.conflist: plugins[0].type: must not be empty");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"plugins":[{"type":true}]})"),
            "x.conflist: plugins[0].type: expected a string, got boolean");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"plugins":[{"type":"../../bin/sh"}]})"),
            "x.conflist: plugins[0].type: \"../../bin/sh\" must be a plain file name (no '/')");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"plugins":[{"type":"p","capabilities":[]}]})"),
            "x.conflist: plugins[0].capabilities: expected an object, got array");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"plugins":[{"type":"p","capabilities":{"portMappings":"yes"}}]})"),
            "x.conflist: plugins[0].capabilities.portMappings: expected true or false, got string");
  EXPECT_EQ(ErrorOf("{" + ok_head + R"(,"disableCheck":"yes","plugins":[{"type":"p"}]})"),
            "x.conflist: disableCheck: expected true or false, got \"yes\"");
  // Every error is reported, each line naming the file.
  EXPECT_EQ(ErrorOf(R"({"name":"n","plugins":[{},{"type":"a/b"}]})"),
            "x.conflist: cniVersion: missing\nx.conflist: plugins[0].type: missing\n"
            "x.conflist: plugins[1].type: \"a/b\" must be a plain file name (no '/')");
}

TEST(CniConfigTest, DisableCheckTakesBooleansAndTheirStrings) {
  for (const auto& [value, want] : std::vector<std::pair<std::string, bool>>{
           {"true", true}, {"false", false}, {"\"true\"", true}, {"\"false\"", false}}) {
    auto l = Parse(R"({"cniVersion":"1.0.0","name":"n","disableCheck":)" + value + R"(,"plugins":[{"type":"p"}]})");
    ASSERT_TRUE(l.ok()) << value << ": " << l.error().message();
    EXPECT_EQ(l->disable_check, want) << value;
  }
}

TEST(CniConfigTest, CniVersionsPicksTheHighestSupported) {
  auto l = Parse(R"({"cniVersion":"0.3.1","cniVersions":["0.4.0","1.1.0","1.0.0","0.3.1"],"name":"n",)"
                 R"("plugins":[{"type":"p"}]})");
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->cni_version, "1.0.0");
  // Without cniVersion.
  l = Parse(R"({"cniVersions":["0.4.0","0.3.1"],"name":"n","plugins":[{"type":"p"}]})");
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->cni_version, "0.4.0");
  // Only newer ones listed: cniVersion is the fallback.
  l = Parse(R"({"cniVersion":"0.4.0","cniVersions":["1.1.0","2.0.0"],"name":"n","plugins":[{"type":"p"}]})");
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->cni_version, "0.4.0");
  EXPECT_EQ(ErrorOf(R"({"cniVersions":["1.1.0"],"name":"n","plugins":[{"type":"p"}]})"),
            "x.conflist: cniVersions: none of the versions is 1.0.0 or older, and cniVersion is missing");
  EXPECT_EQ(ErrorOf(R"({"cniVersions":[],"name":"n","plugins":[{"type":"p"}]})"),
            "x.conflist: cniVersions: none of the versions is 1.0.0 or older, and cniVersion is missing");
  EXPECT_EQ(ErrorOf(R"({"cniVersions":"1.0.0","name":"n","plugins":[{"type":"p"}]})"),
            "x.conflist: cniVersions: expected an array of strings, got string");
  EXPECT_EQ(ErrorOf(R"({"cniVersions":["1.0.0",1],"name":"n","plugins":[{"type":"p"}]})"),
            "x.conflist: cniVersions[1]: expected a string, got number");
  EXPECT_EQ(ErrorOf(R"({"cniVersions":["1.0.0","v1"],"name":"n","plugins":[{"type":"p"}]})"),
            "x.conflist: cniVersions[1]: \"v1\" is not a version");
}

TEST(CniConfigTest, CompareVersionsIsNumericPerPart) {
  EXPECT_LT(CompareVersions("0.4.0", "1.0.0"), 0);
  EXPECT_GT(CompareVersions("1.0.0", "0.4.0"), 0);
  EXPECT_EQ(CompareVersions("1.0.0", "1.0.0"), 0);
  EXPECT_EQ(CompareVersions("1.0", "1.0.0"), 0);
  EXPECT_LT(CompareVersions("0.3.1", "0.4.0"), 0);
  EXPECT_LT(CompareVersions("0.9.0", "0.10.0"), 0);  // not lexical
  EXPECT_GT(CompareVersions("1.1.0", kMaxCniVersion), 0);
  EXPECT_EQ(CompareVersions("x.1", "0.1"), 0);  // malformed parts count as 0
}

TEST(CniConfigTest, ConfigFileNames) {
  EXPECT_TRUE(IsConfigFileName("10-outpost.conflist"));
  EXPECT_TRUE(IsConfigFileName("a.conf"));
  EXPECT_TRUE(IsConfigFileName("a.json"));
  EXPECT_FALSE(IsConfigFileName(".json"));
  EXPECT_FALSE(IsConfigFileName("a.conflist~"));
  EXPECT_FALSE(IsConfigFileName("a.yaml"));
  EXPECT_FALSE(IsConfigFileName("README"));
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

class CniConfigDirTest : public ::testing::Test {
 protected:
  CniConfigDirTest() : loop_(MakeLoop()) { tmp_ = outpost::testing::MakeTempDir("/tmp", "cninet"); }
  ~CniConfigDirTest() override {
    dir_.reset();
    ::nftw(tmp_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  }

  // Installed the atomic way: written under a dot name, renamed in.
  void Put(const std::string& name, const std::string& text) {
    std::string tmp = tmp_ + "/." + name + ".tmp";
    auto fd = sys::Open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd.ok()) << fd.error().message();
    ASSERT_TRUE(sys::WriteAll(fd->get(), text.data(), text.size(), "write").ok());
    ASSERT_EQ(0, ::rename(tmp.c_str(), (tmp_ + "/" + name).c_str()));
  }
  static std::string Conflist(const std::string& name, const std::string& type = "bridge") {
    return R"({"cniVersion":"1.0.0","name":")" + name + R"(","plugins":[{"type":")" + type + R"("}]})";
  }
  static std::string Conf(const std::string& name, const std::string& type = "bridge") {
    return R"({"cniVersion":"1.0.0","name":")" + name + R"(","type":")" + type + R"("})";
  }
  void Start(const std::string& dir) {
    auto d = ConfigDir::Start(loop_.get(), dir, [this] { ++changed_; });
    ASSERT_TRUE(d.ok()) << d.error().message();
    dir_ = std::move(d.value());
  }
  std::string TypeOf(const std::string& net) const {
    auto l = dir_->Find(net);
    return l.ok() ? (*l)->plugins.at(0).type : l.error().message();
  }

  std::unique_ptr<Loop> loop_;
  std::string tmp_;
  std::unique_ptr<ConfigDir> dir_;
  int changed_ = 0;
};

TEST_F(CniConfigDirTest, ConflistsFirstThenFirstFilePerNameWins) {
  Put("50-b.conflist", Conflist("x", "from-b-conflist"));
  Put("60-a.conflist", Conflist("x", "from-a-conflist"));
  Put("00-c.conf", Conf("x", "from-c-conf"));  // sorts first, but .conflist files come first
  Put("10-y.json", Conf("y", "from-y-json"));
  Put("20-y.conf", Conf("y", "from-y-conf"));
  Put("30-bad.conflist", R"({"cniVersion":"1.0.0","name":"z","plugins":[{"type":"a"},{}]})");
  Put("notes.txt", "not a config");
  Start(tmp_);
  EXPECT_EQ(changed_, 0);  // the first read is Start's, not a change
  EXPECT_EQ(dir_->networks().size(), 2u);
  EXPECT_EQ(TypeOf("x"), "from-b-conflist");
  EXPECT_EQ(TypeOf("y"), "from-y-json");  // .conf and .json sort together by name
  EXPECT_EQ(dir_->networks().at("x").file, tmp_ + "/50-b.conflist");
  std::map<std::string, std::string> want = {
      {tmp_ + "/60-a.conflist", "duplicate network name 'x' (already in 50-b.conflist); ignored"},
      {tmp_ + "/00-c.conf", "duplicate network name 'x' (already in 50-b.conflist); ignored"},
      {tmp_ + "/20-y.conf", "duplicate network name 'y' (already in 10-y.json); ignored"},
      {tmp_ + "/30-bad.conflist", tmp_ + "/30-bad.conflist: plugins[1].type: missing"},
  };
  EXPECT_EQ(dir_->problems(), want);
  EXPECT_EQ(dir_->DirProblem(), "");
  auto missing = dir_->Find("z");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  EXPECT_EQ(missing.error().message(), "network 'z' is not in " + tmp_ + " (networks: x, y; not used: " + tmp_ +
                "/30-bad.conflist: plugins[1].type: missing)");
}

TEST_F(CniConfigDirTest, WatchedChangesReloadAndCallChanged) {
  Start(tmp_);
  EXPECT_TRUE(dir_->networks().empty());
  Put("10-a.conflist", Conflist("a", "one"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return dir_->networks().count("a") == 1; }));
  EXPECT_EQ(changed_, 1);
  EXPECT_EQ(TypeOf("a"), "one");

  // Rewritten: the new content applies.
  Put("10-a.conflist", Conflist("a", "two"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return TypeOf("a") == "two"; }));
  EXPECT_EQ(changed_, 2);

  // A file that turns invalid drops its network and becomes a problem.
  Put("10-a.conflist", R"({"cniVersion":"1.1.0","name":"a","plugins":[{"type":"p"}]})");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return dir_->networks().empty(); }));
  EXPECT_EQ(changed_, 3);
  ASSERT_EQ(dir_->problems().size(), 1u);
  EXPECT_EQ(dir_->problems().begin()->second,
            tmp_ + "/10-a.conflist: cniVersion \"1.1.0\" is newer than 1.0.0, the newest this agent and the "
                   "Debian CNI plugins speak");

  // A file whose network does not change (another duplicate) calls nothing.
  Put("05-b.conf", Conf("b"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return dir_->networks().count("b") == 1; }));
  EXPECT_EQ(changed_, 4);
  Put("06-b.conf", Conf("b", "other"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return dir_->problems().count(tmp_ + "/06-b.conf") == 1; }));
  EXPECT_EQ(changed_, 4);

  ASSERT_EQ(0, ::unlink((tmp_ + "/05-b.conf").c_str()));
  // 06-b.conf takes over the name: a change.
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return TypeOf("b") == "other"; }));
  EXPECT_EQ(changed_, 5);
  EXPECT_EQ(dir_->problems().count(tmp_ + "/06-b.conf"), 0u);
}

TEST_F(CniConfigDirTest, MissingDirectoryHasNoNetworksAndSaysWhy) {
  Start(tmp_ + "/absent");
  EXPECT_TRUE(dir_->networks().empty());
  EXPECT_TRUE(dir_->problems().empty());
  EXPECT_NE(dir_->DirProblem(), "");
  auto l = dir_->Find("x");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code(), Code::kNotFound);
  EXPECT_EQ(l.error().message().rfind("network 'x' is not in " + tmp_ + "/absent (no networks; ", 0), 0u)
      << l.error().message();
}

}  // namespace
}  // namespace outpost::net
