// The plugins built with the NRI plugin library, run as a runtime launches
// them (fd 3 = NRI_PLUGIN_SOCKET) against a fake runtime: the test plugin
// (tests/helpers/nri/) with its adjustment and misbehaviour flags, and the
// examples (nri-logger, nri-annotations). Skipped where the binaries were
// not built next to unit_tests (`make nri-plugins`).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/strings.h"
#include "base/sys.h"
#include "nri_fake_runtime.h"
#include "nriproto/codec.h"

namespace outpost::testing {
namespace {

using namespace outpost::nri;  // NOLINT

std::string BinPath(const std::string& name) {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return sys::Dirname(n > 0 ? std::string(buf, static_cast<size_t>(n)) : "") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// Runs path with an unknown flag: each of these plugins exits 2 with its
// usage. False where it cannot be run (qemu-user without binfmt_misc).
bool CanRun(const std::string& path) {
  if (::access(path.c_str(), X_OK) != 0) return false;
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    char* const argv[] = {const_cast<char*>(path.c_str()), const_cast<char*>("-no-such-flag"), nullptr};
    ::execv(path.c_str(), argv);
    ::_exit(99);
  }
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid) return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 2;
}

class NriStubBinaries : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("/tmp", "nri-plugins");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    if (!dir_.empty()) {
      ::unlink((dir_ + "/log").c_str());
      ::rmdir(dir_.c_str());
    }
  }

  // Execs the binary with fd 3 on the runtime's socketpair.
  bool Launch(const std::string& name, std::vector<std::string> args) {
    std::string path = BinPath(name);
    if (!CanRun(path)) return false;
    rt_.Start([path, args](int fd) {
      ::dup2(fd, 3);
      ::setenv("NRI_PLUGIN_SOCKET", "3", 1);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(path.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(path.c_str(), argv.data());
      ::_exit(98);
    });
    return true;
  }

  Result<CreateContainerResponse> Create(const std::string& ctr, std::map<std::string, std::string> ann = {}) {
    PodContainerRequest req;
    req.pod.emplace().id = "pod-1";
    req.container.emplace().name = ctr;
    req.container->id = "id-" + ctr;
    req.container->env = {"A=1", "B=2"};
    req.container->annotations = std::move(ann);
    auto r = rt_.Call("CreateContainer", nriproto::Encode(req));
    if (!r.ok()) return r.error();
    CreateContainerResponse resp;
    Status st = nriproto::Decode(*r, &resp);
    if (!st.ok()) return st.error();
    return resp;
  }

  std::string dir_;
  FakeNriRuntime rt_;
};

#define LAUNCH_OR_SKIP(name, ...)                                                     \
  if (!Launch(name, __VA_ARGS__)) {                                                   \
    GTEST_SKIP() << BinPath(name) << " not built or not runnable (make nri-plugins)"; \
  }

TEST_F(NriStubBinaries, TestPluginAdjustsAndLogs) {
  std::string log = dir_ + "/log";
  LAUNCH_OR_SKIP("test_nri_plugin", {"-idx", "07", "-name", "tester", "-log", log, "-adjust-env", "X=1",
                                     "-remove-annotation", "gone", "-adjust-memory", "1048576", "-adjust-rlimit",
                                     "RLIMIT_NOFILE=10:20", "-adjust-hook", "poststart:/bin/true"});
  EXPECT_EQ(rt_.registered.plugin_name, "tester");
  EXPECT_EQ(rt_.registered.plugin_idx, "07");
  EXPECT_EQ(rt_.Configure().events,
            static_cast<int32_t>(kValidEvents & ~EventMask(Event::kValidateContainerAdjustment)));
  auto resp = Create("web", {{"k", "v"}});
  ASSERT_TRUE(resp.ok()) << resp.error().message();
  ASSERT_TRUE(resp->adjust.has_value());
  ASSERT_EQ(resp->adjust->env.size(), 1u);
  EXPECT_EQ(resp->adjust->env[0].key, "X");
  EXPECT_EQ(resp->adjust->annotations.count("-gone"), 1u);
  ASSERT_TRUE(resp->adjust->linux && resp->adjust->linux->resources && resp->adjust->linux->resources->memory);
  EXPECT_EQ(resp->adjust->linux->resources->memory->limit, 1048576);
  ASSERT_EQ(resp->adjust->rlimits.size(), 1u);
  EXPECT_EQ(resp->adjust->rlimits[0].type, "RLIMIT_NOFILE");
  EXPECT_EQ(resp->adjust->rlimits[0].soft, 10u);
  EXPECT_EQ(resp->adjust->rlimits[0].hard, 20u);
  ASSERT_TRUE(resp->adjust->hooks.has_value());
  ASSERT_EQ(resp->adjust->hooks->poststart.size(), 1u);
  EXPECT_EQ(resp->adjust->hooks->poststart[0].path, "/bin/true");
  std::string text = ReadFile(log);
  EXPECT_NE(text.find("Configure runtime=fake version=v0"), std::string::npos) << text;
  EXPECT_NE(text.find("CreateContainer web id=id-web pod=pod-1 env=A=1,B=2 ann=k=v"), std::string::npos) << text;
}

TEST_F(NriStubBinaries, TestPluginMisbehavesOnDemand) {
  LAUNCH_OR_SKIP("test_nri_plugin", {"-idx", "08", "-name", "bad", "-fail-on", "StartContainer", "-garbage-on",
                                     "createcontainer", "-update-during", "StopContainer:other:4096"});
  rt_.Configure();
  auto garbage = Create("web");
  EXPECT_FALSE(garbage.ok());

  PodContainerRequest req;
  req.pod.emplace().id = "pod-1";
  req.container.emplace().name = "web";
  auto failed = rt_.Call("StartContainer", nriproto::Encode(req));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code(), Code::kUnknown);
  EXPECT_NE(failed.error().message().find("StartContainer"), std::string::npos) << failed.error().message();

  auto stopped = rt_.Call("StopContainer", nriproto::Encode(req));
  EXPECT_TRUE(stopped.ok()) << stopped.error().message();
  // The update went out (and was answered) before StopContainer's reply.
  ASSERT_EQ(rt_.updates.size(), 1u);
  ASSERT_EQ(rt_.updates[0].update.size(), 1u);
  EXPECT_EQ(rt_.updates[0].update[0].container_id, "other");
  ASSERT_TRUE(rt_.updates[0].update[0].resources && rt_.updates[0].update[0].resources->memory);
  EXPECT_EQ(rt_.updates[0].update[0].resources->memory->limit, 4096);
}

TEST_F(NriStubBinaries, TestPluginCrashesOnDemand) {
  LAUNCH_OR_SKIP("test_nri_plugin", {"-idx", "09", "-name", "crash", "-crash-on", "RunPodSandbox"});
  rt_.Configure();
  PodContainerRequest req;
  req.pod.emplace().id = "pod-1";
  auto r = rt_.Call("RunPodSandbox", nriproto::Encode(req));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(rt_.WaitChild(), 3);
}

TEST_F(NriStubBinaries, TestPluginValidatesHangsAndUpdatesAfterSync) {
  LAUNCH_OR_SKIP("test_nri_plugin", {"-idx", "11", "-name", "v", "-events", "RemoveContainer", "-reject", "nope",
                                     "-update-after-sync", "c9:8192", "-hang-on", "removecontainer"});
  EXPECT_EQ(rt_.Configure().events, static_cast<int32_t>(EventMask(Event::kRemoveContainer) |
                                                         EventMask(Event::kValidateContainerAdjustment)));
  auto sync = rt_.Call("Synchronize", nriproto::Encode(SynchronizeRequest{}));
  ASSERT_TRUE(sync.ok()) << sync.error().message();
  ASSERT_TRUE(RunUntil(rt_.loop(), [&] { return !rt_.updates.empty(); }));
  ASSERT_EQ(rt_.updates[0].update.size(), 1u);
  EXPECT_EQ(rt_.updates[0].update[0].container_id, "c9");

  ValidateContainerAdjustmentRequest vreq;
  vreq.container.emplace().name = "web";
  auto v = rt_.Call("ValidateContainerAdjustment", nriproto::Encode(vreq));
  ASSERT_TRUE(v.ok()) << v.error().message();
  ValidateContainerAdjustmentResponse vresp;
  ASSERT_TRUE(nriproto::Decode(*v, &vresp).ok());
  EXPECT_TRUE(vresp.reject);
  EXPECT_EQ(vresp.reason, "nope");

  PodContainerRequest req;
  req.container.emplace().name = "web";
  auto hung = rt_.Call("RemoveContainer", nriproto::Encode(req), 200 * kNanosPerMilli);
  ASSERT_FALSE(hung.ok());
  EXPECT_EQ(hung.error().code(), Code::kDeadlineExceeded);
}

TEST_F(NriStubBinaries, TestPluginExitsAfterRegister) {
  LAUNCH_OR_SKIP("test_nri_plugin", {"-idx", "12", "-name", "gone", "-exit-after-register"});
  EXPECT_EQ(rt_.WaitChild(), 0);
}

TEST_F(NriStubBinaries, LoggerInjectsItsPid) {
  LAUNCH_OR_SKIP("nri-logger", {"-idx", "10", "-add-env", "LOGGER", "-log-file", dir_ + "/log"});
  EXPECT_EQ(rt_.registered.plugin_idx, "10");
  EXPECT_EQ(rt_.Configure().events, static_cast<int32_t>(kValidEvents));
  auto resp = Create("web");
  ASSERT_TRUE(resp.ok()) << resp.error().message();
  ASSERT_TRUE(resp->adjust.has_value());
  ASSERT_EQ(resp->adjust->env.size(), 1u);
  EXPECT_EQ(resp->adjust->env[0].key, "LOGGER");
  EXPECT_TRUE(StartsWith(resp->adjust->env[0].value, "logger-pid-")) << resp->adjust->env[0].value;
  EXPECT_NE(ReadFile(dir_ + "/log").find("=== CreateContainer ==="), std::string::npos);
}

TEST_F(NriStubBinaries, AnnotationsBecomeAdjustments) {
  LAUNCH_OR_SKIP("nri-annotations", {"-idx", "20"});
  EXPECT_EQ(rt_.Configure().events, static_cast<int32_t>(EventMask(Event::kCreateContainer)));
  auto resp = Create("web", {{"memory.outpost.dev/limit", "64M"},
                             {"env.outpost.dev/GREETING", "hi"},
                             {"rlimits.outpost.dev/nofile", "1024:2048"}});
  ASSERT_TRUE(resp.ok()) << resp.error().message();
  ASSERT_TRUE(resp->adjust && resp->adjust->linux && resp->adjust->linux->resources &&
              resp->adjust->linux->resources->memory);
  EXPECT_EQ(resp->adjust->linux->resources->memory->limit, int64_t{64} << 20);
  ASSERT_EQ(resp->adjust->env.size(), 1u);
  EXPECT_EQ(resp->adjust->env[0].key, "GREETING");
  ASSERT_EQ(resp->adjust->rlimits.size(), 1u);
  EXPECT_EQ(resp->adjust->rlimits[0].type, "RLIMIT_NOFILE");
  EXPECT_EQ(resp->adjust->rlimits[0].soft, 1024u);
  EXPECT_EQ(resp->adjust->rlimits[0].hard, 2048u);

  auto bad = Create("web", {{"memory.outpost.dev/limit", "lots"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("memory.outpost.dev/limit"), std::string::npos) << bad.error().message();
  EXPECT_NE(bad.error().message().find("\"lots\""), std::string::npos) << bad.error().message();
}

}  // namespace
}  // namespace outpost::testing
