#include "net/cni_exec.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/strings.h"
#include "base/sys.h"
#include "proc/child_run.h"
#include "test_util.h"

namespace outpost::net {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::MakeTempDir;
using outpost::testing::RunUntil;

picojson::value Json(const std::string& text) {
  picojson::value v;
  std::string err = picojson::parse(v, text);
  EXPECT_EQ(err, "") << text;
  return v;
}

bool HasLine(const std::vector<std::string>& lines, const std::string& want) {
  for (const auto& l : lines) {
    if (l == want) return true;
  }
  return false;
}

constexpr const char* kResultA = R"({"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}],"ips":[{"address":"10.0.0.2/24"}]})";
constexpr const char* kResultB =
    R"({"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}],"ips":[{"address":"10.0.0.2/24"}],"dns":{"domain":"b"}})";

class CniExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_ = MakeLoop();
    dir_ = MakeTempDir("/tmp", "cni-exec");
    env_.path = {dir_, "/nonexistent/cni"};
    env_.timeout_nanos = 20 * kNanosPerSecond;
    env_.busy_retry_nanos = 20 * kNanosPerMilli;
    att_.container_id = "abc123";
    att_.netns = "/run/netns/test";
    att_.ifname = "eth0";
  }
  void TearDown() override {
    op_.reset();
    if (!dir_.empty()) (void)sys::RemoveTree(dir_);
  }

  // A fake plugin: records that it ran (in `calls`), its environment and its
  // stdin, then runs body (which prints the answer and exits).
  void Plugin(const std::string& name, const std::string& body) {
    std::string script = "#!/bin/sh\necho " + name + " >> " + dir_ + "/calls\nenv > " + dir_ + "/" + name +
                         ".env\ncat > " + dir_ + "/" + name + ".stdin\n" + body + "\n";
    ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/" + name, script, 0755, sys::Durability::kProcessCrash).ok());
  }
  void Succeeds(const std::string& name, const std::string& out) { Plugin(name, "printf '%s' '" + out + "'"); }

  std::string Read(const std::string& file) {
    auto r = sys::ReadFile(dir_ + "/" + file);
    return r.ok() ? *r : "";
  }
  std::vector<std::string> Calls() {
    std::vector<std::string> c = Split(Read("calls"), '\n');
    if (!c.empty() && c.back().empty()) c.pop_back();
    return c;
  }
  picojson::value Stdin(const std::string& name) { return Json(Read(name + ".stdin")); }
  std::vector<std::string> Env(const std::string& name) { return Split(Read(name + ".env"), '\n'); }

  static PluginConf Conf(const std::string& type, const std::string& raw_extra = "") {
    PluginConf p;
    p.type = type;
    p.raw = Json("{\"type\":\"" + type + "\"" + raw_extra + "}").get<picojson::object>();
    return p;
  }
  static NetworkList List(std::vector<PluginConf> plugins, const std::string& version = "1.0.0") {
    NetworkList l;
    l.name = "testnet";
    l.cni_version = version;
    l.plugins = std::move(plugins);
    return l;
  }

  // Starts the operation and runs the loop to its outcome.
  void Run(const NetworkList& list, const std::string& command,
           const picojson::value& cached = picojson::value()) {
    done_ = false;
    op_ = ListOp::Start(loop_.get(), env_, list, command, att_, cached, [this](ListOutcome o) {
      outcome_ = std::move(o);
      done_ = true;
      done_mono_ = MonotonicNanos();
    });
    EXPECT_FALSE(done_) << "done ran from inside Start";
    ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done_; }, 30 * kNanosPerSecond));
  }
  std::string Status() const { return outcome_.status.ok() ? "OK" : outcome_.status.error().message(); }
  std::vector<std::string> TimingTypes() const {
    std::vector<std::string> t;
    for (const auto& x : outcome_.timings) t.push_back(x.type);
    return t;
  }

  std::unique_ptr<Loop> loop_;
  std::string dir_;
  PluginEnv env_;
  Attachment att_;
  std::unique_ptr<ListOp> op_;
  ListOutcome outcome_;
  bool done_ = false;
  int64_t done_mono_ = 0;
};

TEST_F(CniExecTest, AddChainsResultsAndPassesEnvironment) {
  Succeeds("a", kResultA);
  Succeeds("b", kResultB);
  att_.cni_args = {{"K8S_POD_NAME", "web"}, {"X", "1"}};
  Run(List({Conf("a"), Conf("b")}), "ADD");
  ASSERT_EQ(Status(), "OK");
  EXPECT_EQ(Calls(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(outcome_.result.serialize(), Json(kResultB).serialize());
  EXPECT_EQ(TimingTypes(), (std::vector<std::string>{"a", "b"}));
  EXPECT_GT(outcome_.nanos, 0);

  auto env = Env("a");
  EXPECT_TRUE(HasLine(env, "CNI_COMMAND=ADD"));
  EXPECT_TRUE(HasLine(env, "CNI_CONTAINERID=abc123"));
  EXPECT_TRUE(HasLine(env, "CNI_NETNS=/run/netns/test"));
  EXPECT_TRUE(HasLine(env, "CNI_IFNAME=eth0"));
  EXPECT_TRUE(HasLine(env, "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAME=web;X=1"));
  EXPECT_TRUE(HasLine(env, "CNI_PATH=" + dir_ + ":/nonexistent/cni"));
  const char* path = std::getenv("PATH");
  ASSERT_NE(path, nullptr);
  EXPECT_TRUE(HasLine(env, std::string("PATH=") + path)) << "the agent's PATH is inherited";

  picojson::value a = Stdin("a"), b = Stdin("b");
  EXPECT_EQ(a.get("name").to_str(), "testnet");
  EXPECT_EQ(a.get("cniVersion").to_str(), "1.0.0");
  EXPECT_EQ(a.get("type").to_str(), "a");
  EXPECT_FALSE(a.contains("prevResult"));
  EXPECT_EQ(b.get("prevResult").serialize(), Json(kResultA).serialize());
}

TEST_F(CniExecTest, AddStopsAtTheFirstFailure) {
  Succeeds("a", kResultA);
  Plugin("b", R"(printf '%s' '{"cniVersion":"1.0.0","code":7,"msg":"bad config","details":"no bridge"}'; exit 1)");
  Succeeds("c", kResultA);
  Run(List({Conf("a"), Conf("b"), Conf("c")}), "ADD");
  EXPECT_EQ(Status(), "plugin b: [code 7] bad config: no bridge");
  EXPECT_EQ(Calls(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(outcome_.result.is<picojson::null>());
  EXPECT_EQ(TimingTypes(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(CniExecTest, ErrorFallsBackToStderr) {
  Plugin("a", "echo 'cannot open /dev/net' >&2; exit 1");
  Run(List({Conf("a")}), "ADD");
  EXPECT_EQ(Status(), "plugin a: cannot open /dev/net");
}

TEST_F(CniExecTest, AddResultMustParse) {
  Succeeds("a", "this is not json");
  Run(List({Conf("a")}), "ADD");
  EXPECT_EQ(Status().rfind("plugin a: invalid result: ", 0), 0u) << Status();
}

TEST_F(CniExecTest, DelRunsInReverseWithCachedResultPastFailures) {
  Succeeds("a", "");
  Plugin("b", R"(printf '%s' '{"code":11,"msg":"busy"}'; exit 1)");
  Plugin("c", "echo gone >&2; exit 1");
  picojson::value cached = Json(kResultB);
  Run(List({Conf("a"), Conf("missing"), Conf("b"), Conf("c")}), "DEL", cached);
  EXPECT_EQ(Status(), "plugin c: gone") << "the first failure is reported";
  EXPECT_EQ(Calls(), (std::vector<std::string>{"c", "b", "a"}));
  EXPECT_EQ(TimingTypes(), (std::vector<std::string>{"c", "b", "a"}));
  for (const char* p : {"a", "b", "c"}) {
    EXPECT_EQ(Stdin(p).get("prevResult").serialize(), cached.serialize()) << p;
    EXPECT_TRUE(HasLine(Env(p), "CNI_COMMAND=DEL")) << p;
  }
  EXPECT_TRUE(outcome_.result.is<picojson::null>());
}

TEST_F(CniExecTest, DelWithAMissingPluginFirstStillRunsTheOthers) {
  Succeeds("a", "");
  att_.netns = "";  // DEL after the namespace is gone
  Run(List({Conf("a"), Conf("missing")}), "DEL");
  EXPECT_EQ(TimingTypes(), (std::vector<std::string>{"a"}));
  // Skipped (logged), not a failure: it cannot clean up anything, ever.
  EXPECT_EQ(Status(), "OK");
  EXPECT_EQ(Calls(), (std::vector<std::string>{"a"}));
  EXPECT_FALSE(Stdin("a").contains("prevResult")) << "no cached result: none sent";
  EXPECT_TRUE(HasLine(Env("a"), "CNI_NETNS="));
  EXPECT_TRUE(HasLine(Env("a"), "CNI_ARGS=")) << "CNI_ARGS is set even without args";
}

TEST_F(CniExecTest, AddWithAMissingPluginFails) {
  Succeeds("a", kResultA);
  Run(List({Conf("nope"), Conf("a")}), "ADD");
  EXPECT_EQ(Status(), "plugin nope: failed to find plugin \"nope\" in path [" + dir_ + " /nonexistent/cni]");
  EXPECT_EQ(outcome_.status.error().code(), Code::kNotFound);
  EXPECT_EQ(Read("calls"), "");
  EXPECT_TRUE(outcome_.timings.empty());
}

TEST_F(CniExecTest, CheckUsesTheCachedResultAndNeedsVersion040) {
  Succeeds("a", "");
  Plugin("b", R"(printf '%s' '{"code":4,"msg":"no such address"}'; exit 1)");
  Succeeds("c", "");
  picojson::value cached = Json(kResultA);
  Run(List({Conf("a"), Conf("b"), Conf("c")}), "CHECK", cached);
  EXPECT_EQ(Status(), "plugin b: [code 4] no such address");
  EXPECT_EQ(Calls(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Stdin("a").get("prevResult").serialize(), cached.serialize());
  EXPECT_TRUE(HasLine(Env("a"), "CNI_COMMAND=CHECK"));

  ASSERT_EQ(::unlink((dir_ + "/calls").c_str()), 0);
  Run(List({Conf("a")}, "0.3.1"), "CHECK", cached);
  EXPECT_EQ(Status().rfind("CHECK needs cniVersion 0.4.0 or newer", 0), 0u) << Status();
  EXPECT_EQ(Read("calls"), "");
}

TEST_F(CniExecTest, InvalidAttachmentIsReportedFromTheLoop) {
  Succeeds("a", kResultA);
  att_.ifname = "eth0:1";
  Run(List({Conf("a")}), "ADD");
  EXPECT_EQ(outcome_.status.error().code(), Code::kInvalidArgument);
  EXPECT_NE(Status().find("interface name"), std::string::npos) << Status();
  EXPECT_EQ(Read("calls"), "");
}

TEST_F(CniExecTest, EmptyListSucceedsAndUnknownCommandFails) {
  Run(List({}), "ADD");
  EXPECT_EQ(Status(), "OK");
  EXPECT_TRUE(outcome_.result.is<picojson::null>());
  Succeeds("a", kResultA);
  Run(List({Conf("a")}), "GC");
  EXPECT_EQ(Status(), "unknown CNI command \"GC\"");
  att_.netns = "";
  Run(List({Conf("a")}), "ADD");
  EXPECT_EQ(Status(), "network namespace: missing (needed for ADD)");
  EXPECT_EQ(Read("calls"), "");
}

TEST_F(CniExecTest, RuntimeConfigHoldsOnlyDeclaredCapabilities) {
  Succeeds("a", kResultA);
  Succeeds("b", kResultB);
  PluginConf a = Conf("a", R"(,"runtimeConfig":{"stale":1},"capabilities":{"portMappings":false})");
  a.capabilities = {{"portMappings", false}};
  PluginConf b = Conf("b", R"(,"capabilities":{"portMappings":true,"ipRanges":true})");
  b.capabilities = {{"portMappings", true}, {"ipRanges", true}};
  att_.capability_args = Json(R"({"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}],
                                  "bandwidth":{"ingressRate":1}})")
                             .get<picojson::object>();
  Run(List({a, b}), "ADD");
  ASSERT_EQ(Status(), "OK");
  EXPECT_FALSE(Stdin("a").contains("runtimeConfig")) << Read("a.stdin");
  EXPECT_EQ(Stdin("b").get("runtimeConfig").serialize(),
            R"({"portMappings":[{"containerPort":80,"hostPort":8080,"protocol":"tcp"}]})");
  EXPECT_TRUE(Stdin("b").get("capabilities").get("portMappings").get<bool>()) << "the plugin object as written";
}

TEST_F(CniExecTest, TimeoutKillsAHangingPlugin) {
  Plugin("a", "exec sleep 100");
  env_.timeout_nanos = 200 * kNanosPerMilli;
  Run(List({Conf("a")}), "ADD");
  EXPECT_EQ(Status(), "plugin a: ran past its timeout of 200ms; killed");
  EXPECT_EQ(outcome_.status.error().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(TimingTypes(), (std::vector<std::string>{"a"}));
}

TEST_F(CniExecTest, DestroyingTheOpKillsThePluginAndDoneNeverRuns) {
  Plugin("a", "echo $$ > " + dir_ + "/pid; exec sleep 100");
  bool called = false;
  op_ = ListOp::Start(loop_.get(), env_, List({Conf("a")}), "ADD", att_, picojson::value(),
                      [&](ListOutcome) { called = true; });
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return !Read("pid").empty(); }));
  pid_t pid = std::atoi(Read("pid").c_str());
  ASSERT_GT(pid, 0);
  op_.reset();
  // Killed at once, reaped by the loop.
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return ::kill(pid, 0) == -1 && errno == ESRCH; })) << "still runs";
  bool tick = false;
  loop_->AddTimer(50 * kNanosPerMilli, [&] { tick = true; });
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return tick; }));
  EXPECT_FALSE(called);
}

// Whether this kernel refuses to exec a file open for writing (it has since
// forever, but 6.11 dropped it for a while).
bool ExecOfOpenFileIsBusy(Loop* loop, const std::string& dir) {
  std::string probe = dir + "/busy-probe";
  if (!sys::WriteFileAtomic(probe, "#!/bin/sh\nexit 0\n", 0755, sys::Durability::kProcessCrash).ok()) return false;
  int fd = ::open(probe.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  proc::ChildRunRequest req;
  req.path = probe;
  req.argv = {probe};
  bool finished = false;
  auto run = proc::ChildRun::Start(loop, req, [&](const proc::ChildRunResult&) { finished = true; });
  ::close(fd);
  if (run.ok()) {
    RunUntil(loop, [&] { return finished; });
    return false;
  }
  return run.error().message().find(std::strerror(ETXTBSY)) != std::string::npos;
}

TEST_F(CniExecTest, TextFileBusyIsRetried) {
  if (!ExecOfOpenFileIsBusy(loop_.get(), dir_)) GTEST_SKIP() << "this kernel execs files open for writing";
  Succeeds("a", kResultA);
  int fd = ::open((dir_ + "/a").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  bool closed = false;
  loop_->AddTimer(70 * kNanosPerMilli, [&] {
    ::close(fd);
    closed = true;
  });
  Run(List({Conf("a")}), "ADD");
  EXPECT_TRUE(closed);
  EXPECT_EQ(Status(), "OK");
  EXPECT_EQ(Calls(), (std::vector<std::string>{"a"}));
  EXPECT_EQ(TimingTypes(), (std::vector<std::string>{"a"}));
}

TEST_F(CniExecTest, TextFileBusyGivesUpAfterFiveRetries) {
  if (!ExecOfOpenFileIsBusy(loop_.get(), dir_)) GTEST_SKIP() << "this kernel execs files open for writing";
  Succeeds("a", kResultA);
  int fd = ::open((dir_ + "/a").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  env_.busy_retry_nanos = 5 * kNanosPerMilli;
  const int64_t started = MonotonicNanos();
  Run(List({Conf("a")}), "ADD");
  ::close(fd);
  EXPECT_NE(Status().find(std::strerror(ETXTBSY)), std::string::npos) << Status();
  EXPECT_EQ(Status().rfind("plugin a: ", 0), 0u) << Status();
  EXPECT_GE(done_mono_ - started, 5 * env_.busy_retry_nanos) << "five retries, each after the delay";
  EXPECT_EQ(Read("calls"), "");
}

TEST(CniExecPure, PluginEnvironmentLaterDuplicatesWin) {
  ASSERT_EQ(::setenv("CNI_IFNAME", "stale0", 1), 0);
  Attachment a;
  a.container_id = "c1";
  a.ifname = "net1";
  auto env = PluginEnvironment("ADD", a, {"/opt/cni/bin", "/usr/lib/cni"});
  ::unsetenv("CNI_IFNAME");
  int ifnames = 0;
  for (const auto& e : env) ifnames += e.rfind("CNI_IFNAME=", 0) == 0;
  EXPECT_EQ(ifnames, 1);
  EXPECT_TRUE(HasLine(env, "CNI_IFNAME=net1"));
  EXPECT_TRUE(HasLine(env, "CNI_ARGS="));
  EXPECT_TRUE(HasLine(env, "CNI_PATH=/opt/cni/bin:/usr/lib/cni"));
  EXPECT_TRUE(HasLine(env, "CNI_NETNS="));
}

TEST(CniExecPure, PluginStdinOverridesNameAndVersion) {
  NetworkList l;
  l.name = "real";
  l.cni_version = "0.4.0";
  PluginConf p;
  p.type = "bridge";
  p.raw = Json(R"({"type":"bridge","name":"other","cniVersion":"9.9.9","bridge":"br0","prevResult":{"x":1}})")
              .get<picojson::object>();
  l.plugins = {p};
  EXPECT_EQ(PluginStdin(l, 0, picojson::value(), {}),
            R"({"bridge":"br0","cniVersion":"0.4.0","name":"real","type":"bridge"})");
  EXPECT_EQ(PluginStdin(l, 0, Json(R"({"cniVersion":"0.4.0"})"), {}),
            R"({"bridge":"br0","cniVersion":"0.4.0","name":"real","prevResult":{"cniVersion":"0.4.0"},"type":"bridge"})");
}

TEST(CniExecPure, FindPluginTakesTheFirstRegularFile) {
  std::string d1 = MakeTempDir("/tmp", "cni-find1"), d2 = MakeTempDir("/tmp", "cni-find2");
  ASSERT_EQ(::mkdir((d1 + "/bridge").c_str(), 0755), 0);  // a directory is skipped
  ASSERT_TRUE(sys::WriteFileAtomic(d2 + "/bridge", "x", 0644, sys::Durability::kProcessCrash).ok());
  auto found = FindPlugin({d1, d2}, "bridge");
  ASSERT_TRUE(found.ok()) << found.error().message();
  EXPECT_EQ(*found, d2 + "/bridge") << "the exec bit is not checked";
  auto missing = FindPlugin({d1, d2}, "portmap");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "failed to find plugin \"portmap\" in path [" + d1 + " " + d2 + "]");
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  EXPECT_FALSE(FindPlugin({d1, d2}, "").ok());
  EXPECT_FALSE(FindPlugin({d1, "/"}, "../bin/sh").ok());
  (void)sys::RemoveTree(d1);
  (void)sys::RemoveTree(d2);
}

TEST(CniExecPure, ValidateAttachment) {
  auto check = [](void (*edit)(Attachment*)) {
    Attachment a;
    a.container_id = "abc-1.x_y";
    a.netns = "/run/netns/x";
    edit(&a);
    Status st = ValidateAttachment(a);
    return st.ok() ? std::string("OK") : st.error().message();
  };
  EXPECT_EQ(check([](Attachment*) {}), "OK");
  EXPECT_EQ(check([](Attachment* a) { a->ifname = "abcdefghijklmno"; }), "OK");
  EXPECT_EQ(check([](Attachment* a) { a->cni_args = {{"K", "a=b"}}; }), "OK");
  EXPECT_NE(check([](Attachment* a) { a->container_id = ""; }).find("container id"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->container_id = "-abc"; }).find("container id"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->container_id = "a/b"; }).find("container id"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->ifname = ""; }).find("interface name"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->ifname = "abcdefghijklmnop"; }).find("interface name"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->ifname = ".."; }).find("interface name"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->ifname = "eth 0"; }).find("interface name"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->ifname = "a/b"; }).find("interface name"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->cni_args = {{"", "v"}}; }).find("CNI_ARGS"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->cni_args = {{"a=b", "v"}}; }).find("CNI_ARGS"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->cni_args = {{"k;", "v"}}; }).find("CNI_ARGS"), std::string::npos);
  EXPECT_NE(check([](Attachment* a) { a->cni_args = {{"k", "v;x"}}; }).find("CNI_ARGS"), std::string::npos);
}

class CniExecProbeTest : public CniExecTest {
 protected:
  Result<std::vector<std::string>> Probe(const std::string& binary) {
    bool finished = false;
    Result<std::vector<std::string>> got = Error(Code::kUnknown, "not run");
    ProbeVersion(loop_.get(), env_, binary, [&](Result<std::vector<std::string>> r) {
      got = std::move(r);
      finished = true;
    });
    EXPECT_FALSE(finished) << "done ran from inside ProbeVersion";
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return finished; }, 30 * kNanosPerSecond));
    return got;
  }
};

TEST_F(CniExecProbeTest, VersionAnswer) {
  Succeeds("v", R"({"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0"]})");
  auto r = Probe(dir_ + "/v");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, (std::vector<std::string>{"0.3.1", "0.4.0", "1.0.0"}));
  auto env = Env("v");
  EXPECT_TRUE(HasLine(env, "CNI_COMMAND=VERSION"));
  EXPECT_TRUE(HasLine(env, "CNI_NETNS=dummy"));
  EXPECT_TRUE(HasLine(env, "CNI_IFNAME=dummy"));
  EXPECT_TRUE(HasLine(env, "CNI_PATH=dummy"));
  EXPECT_EQ(Read("v.stdin"), R"({"cniVersion":"1.0.0"})");
}

TEST_F(CniExecProbeTest, OldPluginWithoutVersionIs010) {
  Plugin("old", R"(printf '%s' '{"code":4,"msg":"unknown CNI_COMMAND: VERSION"}'; exit 1)");
  auto r = Probe(dir_ + "/old");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, (std::vector<std::string>{"0.1.0"}));
}

TEST_F(CniExecProbeTest, FailuresNameThePlugin) {
  Plugin("bad", "echo crashed >&2; exit 2");
  auto r = Probe(dir_ + "/bad");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "plugin bad: crashed");
  auto missing = Probe(dir_ + "/none");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message().rfind("plugin none: ", 0), 0u) << missing.error().message();
}

TEST_F(CniExecProbeTest, DebianLoopbackSpeaks100) {
  const std::string loopback = "/usr/lib/cni/loopback";
  if (::access(loopback.c_str(), X_OK) != 0) GTEST_SKIP() << loopback << " is not installed";
  auto r = Probe(loopback);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(HasLine(*r, "1.0.0"));
}

}  // namespace
}  // namespace outpost::net
