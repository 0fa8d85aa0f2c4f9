#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/strings.h"
#include "base/sys.h"
#include "hooks/bundle.h"
#include "hooks/hook.h"
#include "hooks/runner.h"
#include "test_util.h"

namespace outpost::hooks {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::MakeTempDir;
using outpost::testing::RunUntil;

picojson::value ParseJson(const std::string& text) {
  auto v = json::Parse(text);
  EXPECT_TRUE(v.ok()) << text << ": " << (v.ok() ? "" : v.error().message());
  return v.ok() ? *v : picojson::value();
}

std::vector<std::string> ErrorsOf(const std::string& text) {
  std::vector<std::string> errors;
  HooksFromJson(ParseJson(text), "hooks", "test", &errors);
  return errors;
}

bool AnyContains(const std::vector<std::string>& v, const std::string& part) {
  for (const auto& s : v) {
    if (s.find(part) != std::string::npos) return true;
  }
  return false;
}

Hook Sh(const std::string& script, int64_t timeout = 0) {
  Hook h;
  h.path = "/bin/sh";
  h.args = {"sh", "-c", script};
  h.timeout_seconds = timeout;
  return h;
}

// A process that is gone or a zombie (whoever reaps orphans here may not).
bool Gone(pid_t pid) {
  auto stat = sys::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return true;
  size_t p = stat->rfind(')');
  return p != std::string::npos && p + 2 < stat->size() && ((*stat)[p + 2] == 'Z' || (*stat)[p + 2] == 'X');
}

pid_t ReadPid(const std::string& path) {
  auto text = sys::ReadFile(path);
  if (!text.ok()) return 0;
  std::string s = *text;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  auto n = ParseInt(s, 1, 1 << 30);
  return n.ok() ? static_cast<pid_t>(*n) : 0;
}

// ---- hook.h ----------------------------------------------------------------

TEST(HookJson, ReadsEveryField) {
  std::vector<std::string> errors;
  HookSet set = HooksFromJson(ParseJson(R"({"prestart":[{"path":"/bin/a","args":["a","-x"],"env":["A=1","B="],
      "timeout":5}],"poststop":[{"path":"/b"},{"path":"/c"}]})"),
                              "hooks", "job spec", &errors);
  ASSERT_TRUE(errors.empty()) << json::JoinErrors(errors);
  ASSERT_EQ(set.at(Stage::kPrestart).size(), 1u);
  const Hook& h = set.at(Stage::kPrestart)[0];
  EXPECT_EQ(h.path, "/bin/a");
  EXPECT_EQ(h.args, (std::vector<std::string>{"a", "-x"}));
  EXPECT_EQ(h.env, (std::vector<std::string>{"A=1", "B="}));
  EXPECT_EQ(h.timeout_seconds, 5);
  EXPECT_EQ(h.source, "job spec");
  EXPECT_EQ(set.at(Stage::kPoststop).size(), 2u);
  EXPECT_EQ(set.size(), 3u);
  EXPECT_EQ(set.at(Stage::kPoststop)[1].Argv(), std::vector<std::string>{"/c"});  // default argv
}

TEST(HookJson, NamesEachProblemByPath) {
  auto e = ErrorsOf(R"({"prestart":[{"path":"bin/a"}]})");
  EXPECT_TRUE(AnyContains(e, "hooks.prestart[0].path: must be an absolute path")) << json::JoinErrors(e);
  e = ErrorsOf(R"({"prestart":[{}]})");
  EXPECT_TRUE(AnyContains(e, "hooks.prestart[0].path: required")) << json::JoinErrors(e);
  e = ErrorsOf(R"({"preStart":[{"path":"/a"}]})");
  EXPECT_TRUE(AnyContains(e, "hooks.preStart: unknown hook stage")) << json::JoinErrors(e);
  e = ErrorsOf(R"({"poststop":[{"path":"/a","tiemout":3}]})");
  EXPECT_TRUE(AnyContains(e, "tiemout")) << json::JoinErrors(e);
  e = ErrorsOf(R"({"poststop":[{"path":"/a","env":["A=1","NOEQ","=v"]}]})");
  EXPECT_TRUE(AnyContains(e, "hooks.poststop[0].env[1]: expected \"NAME=VALUE\"")) << json::JoinErrors(e);
  EXPECT_TRUE(AnyContains(e, "hooks.poststop[0].env[2]")) << json::JoinErrors(e);
  for (const char* t : {"0", "-1", "1.5", "\"5\""}) {
    e = ErrorsOf(std::string(R"({"poststart":[{"path":"/a","timeout":)") + t + "}]}");
    EXPECT_TRUE(AnyContains(e, "hooks.poststart[0].timeout")) << t << ": " << json::JoinErrors(e);
  }
  e = ErrorsOf(R"({"prestart":{"path":"/a"}})");
  EXPECT_TRUE(AnyContains(e, "hooks.prestart: expected an array")) << json::JoinErrors(e);
  e = ErrorsOf(R"([])");
  EXPECT_FALSE(e.empty());
}

TEST(HookJson, RoundTrips) {
  HookSet set;
  Hook a;
  a.path = "/usr/libexec/a";
  a.args = {"a", "b c"};
  a.env = {"X=1"};
  a.timeout_seconds = 7;
  set.at(Stage::kCreateRuntime).push_back(a);
  Hook b;
  b.path = "/b";
  set.at(Stage::kPoststop).push_back(b);
  picojson::value v = HooksToJson(set);
  EXPECT_FALSE(v.get<picojson::object>().count("prestart"));  // only stages with hooks
  EXPECT_FALSE(v.get("poststop").get(0).contains("args"));    // only what is set
  std::vector<std::string> errors;
  HookSet back = HooksFromJson(ParseJson(v.serialize()), "", "", &errors);
  EXPECT_TRUE(errors.empty()) << json::JoinErrors(errors);
  EXPECT_EQ(back, set);
}

TEST(HookState, HasTheRuntimeSpecFormPerStage) {
  State s;
  s.id = "web.0";
  s.bundle = "/run/outpost/b";
  s.stage = Stage::kPrestart;
  // picojson writes '/' as "\/" (valid JSON).
  EXPECT_EQ(StateJson(s),
            R"({"ociVersion":"1.3.0","id":"web.0","status":"creating","bundle":"\/run\/outpost\/b"})");
  const char* want[] = {"creating", "creating", "creating", "created", "running", "stopped"};
  for (Stage st : kAllStages) {
    s.stage = st;
    picojson::value v = ParseJson(StateJson(s));
    EXPECT_EQ(v.get("status").get<std::string>(), want[static_cast<int>(st)]) << StageName(st);
  }
  s.stage = Stage::kPoststart;
  s.pid = 42;
  s.annotations = {{"b", "2"}, {"a", "\"1\""}};
  EXPECT_EQ(StateJson(s), R"({"ociVersion":"1.3.0","id":"web.0","status":"running","pid":42,)"
                          R"("bundle":"\/run\/outpost\/b","annotations":{"a":"\"1\"","b":"2"}})");
}

// ---- StageRun --------------------------------------------------------------

class StageRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_ = MakeLoop();
    dir_ = MakeTempDir("/tmp", "hooks");
  }
  void TearDown() override {
    run_.reset();
    if (!dir_.empty()) (void)sys::RemoveTree(dir_);
  }

  // Runs the stage to its end; the runs are in runs_, the outcome in status_.
  void Run(Stage stage, std::vector<Hook> hooks, StageOptions options = StageOptions()) {
    Start(stage, std::move(hooks), options);
    ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done_; }, 30 * kNanosPerSecond));
  }
  void Start(Stage stage, std::vector<Hook> hooks, StageOptions options) {
    runs_.clear();
    done_ = false;
    run_ = StageRun::Start(loop_.get(), stage, std::move(hooks), state_, options,
                           [this](const HookRun& r) { runs_.push_back(r); },
                           [this](Status st) {
                             EXPECT_FALSE(done_) << "done called twice";
                             status_ = st;
                             done_ = true;
                           });
  }

  std::unique_ptr<Loop> loop_;
  std::string dir_;
  std::string state_ = R"({"ociVersion":"1.3.0","id":"t","status":"creating","bundle":"/b"})";
  std::unique_ptr<StageRun> run_;
  std::vector<HookRun> runs_;
  Status status_;
  bool done_ = false;
};

TEST_F(StageRunTest, NothingIsCalledFromInsideStart) {
  Start(Stage::kPrestart, {}, StageOptions());
  EXPECT_FALSE(done_);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done_; }));
  EXPECT_TRUE(status_.ok());
  Start(Stage::kPrestart, {Sh("exit 0")}, StageOptions());
  EXPECT_FALSE(done_);
  EXPECT_TRUE(runs_.empty());
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done_; }, 30 * kNanosPerSecond));
  EXPECT_TRUE(status_.ok()) << status_.error().message();
  ASSERT_EQ(runs_.size(), 1u);
}

TEST_F(StageRunTest, ArgvEnvAndStdinAreExactlyWhatWasGiven) {
  Hook argv;
  argv.path = "/bin/sh";
  argv.args = {"my-zero", "-c", "tr '\\0' '\\n' < /proc/$$/cmdline", "x", "a b", ""};
  Hook env;
  env.path = "/usr/bin/env";
  env.env = {"ONLY=1", "EMPTY="};
  Hook no_env;
  no_env.path = "/usr/bin/env";
  Hook cat;
  cat.path = "/bin/cat";
  Run(Stage::kCreateRuntime, {argv, env, no_env, cat});
  EXPECT_TRUE(status_.ok()) << status_.error().message();
  ASSERT_EQ(runs_.size(), 4u);
  EXPECT_EQ(runs_[0].out_tail, "my-zero\n-c\ntr '\\0' '\\n' < /proc/$$/cmdline\nx\na b\n\n");
  EXPECT_EQ(runs_[1].out_tail, "ONLY=1\nEMPTY=\n");
  EXPECT_EQ(runs_[2].out_tail, "");  // nothing inherited from the agent
  EXPECT_EQ(runs_[3].out_tail, state_);
  for (const HookRun& r : runs_) {
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.stage, Stage::kCreateRuntime);
    EXPECT_GT(r.started_unix_nanos, 0);
    EXPECT_GT(r.duration_nanos, 0);
    EXPECT_EQ(r.timeout_seconds, 10);  // the default
  }
  std::string d = DescribeRun(runs_[3]);
  EXPECT_TRUE(StartsWith(d, "hook createRuntime /bin/cat: exit 0 in ")) << d;
  EXPECT_TRUE(EndsWith(d, " ms")) << d;
}

TEST_F(StageRunTest, AFailureEndsTheStageWithItsText) {
  std::string marker = dir_ + "/ran";
  Run(Stage::kCreateContainer, {Sh("echo out; printf 'bad thing\\n  second line\\n\\n' >&2; exit 3"),
                                 Sh("touch " + marker)});
  ASSERT_EQ(runs_.size(), 1u);
  EXPECT_EQ(::access(marker.c_str(), F_OK), -1);
  ASSERT_FALSE(status_.ok());
  const std::string& msg = status_.error().message();
  EXPECT_TRUE(StartsWith(msg, "hook createContainer /bin/sh: exit code 3 in ")) << msg;
  EXPECT_TRUE(EndsWith(msg, " ms: bad thing; second line")) << msg;
  EXPECT_EQ(runs_[0].error, msg);
  EXPECT_EQ(runs_[0].exit_code, 3);
  EXPECT_EQ(runs_[0].out_tail, "out\n");
  EXPECT_EQ(DescribeRun(runs_[0]), msg);
}

TEST_F(StageRunTest, ContinueAfterFailureRunsAllAndReportsTheFirst) {
  StageOptions o;
  o.continue_after_failure = true;
  std::string marker = dir_ + "/ran";
  Run(Stage::kPoststop, {Sh("echo first >&2; exit 3"), Sh("echo second; exit 4"), Sh("touch " + marker)}, o);
  ASSERT_EQ(runs_.size(), 3u);
  EXPECT_EQ(::access(marker.c_str(), F_OK), 0);
  ASSERT_FALSE(status_.ok());
  EXPECT_TRUE(StartsWith(status_.error().message(), "hook poststop /bin/sh: exit code 3")) << status_.error().message();
  EXPECT_TRUE(EndsWith(status_.error().message(), ": first"));
  EXPECT_TRUE(EndsWith(runs_[1].error, " ms: second")) << runs_[1].error;  // stdout when stderr is empty
  EXPECT_TRUE(runs_[2].ok());
}

TEST_F(StageRunTest, AMissingProgramIsAFailedHook) {
  Hook h;
  h.path = dir_ + "/no-such-hook";
  Run(Stage::kPrestart, {h});
  ASSERT_EQ(runs_.size(), 1u);
  EXPECT_EQ(runs_[0].exit_code, -1);
  EXPECT_TRUE(StartsWith(runs_[0].error, "hook prestart " + h.path + ": cannot start: ")) << runs_[0].error;
  EXPECT_EQ(DescribeRun(runs_[0]), runs_[0].error);
  ASSERT_FALSE(status_.ok());
  EXPECT_EQ(status_.error().message(), runs_[0].error);
}

TEST_F(StageRunTest, ASignalDeathIsNamed) {
  Run(Stage::kPoststart, {Sh("kill -TERM $$")});
  ASSERT_EQ(runs_.size(), 1u);
  EXPECT_EQ(runs_[0].signal, SIGTERM);
  EXPECT_EQ(runs_[0].exit_code, 128 + SIGTERM);
  EXPECT_TRUE(StartsWith(runs_[0].error, "hook poststart /bin/sh: killed by SIGTERM in ")) << runs_[0].error;
}

TEST_F(StageRunTest, TheTimeoutKillsTheWholeProcessGroup) {
  StageOptions o;
  o.default_timeout_seconds = 1;
  std::string pidfile = dir_ + "/bg";
  Run(Stage::kPoststop, {Sh("sleep 60 & echo $! > " + pidfile + "; wait")}, o);
  ASSERT_EQ(runs_.size(), 1u);
  EXPECT_TRUE(runs_[0].timed_out);
  EXPECT_EQ(runs_[0].error, "hook poststop /bin/sh ran past its timeout of 1s");
  ASSERT_FALSE(status_.ok());
  EXPECT_EQ(status_.error().code(), Code::kDeadlineExceeded);
  pid_t bg = ReadPid(pidfile);
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return Gone(bg); }, 10 * kNanosPerSecond)) << "background pid " << bg;
}

TEST_F(StageRunTest, DestroyingItKillsTheRunningHookAndCallsNothing) {
  std::string pidfile = dir_ + "/pid";
  Start(Stage::kPrestart, {Sh("echo $$ > " + pidfile + ".tmp; mv " + pidfile + ".tmp " + pidfile + "; exec sleep 60")},
        StageOptions());
  pid_t pid = 0;
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return (pid = ReadPid(pidfile)) > 0; }, 30 * kNanosPerSecond));
  run_.reset();
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return Gone(pid); }, 10 * kNanosPerSecond));
  EXPECT_TRUE(runs_.empty());
  EXPECT_FALSE(done_);
}

TEST_F(StageRunTest, EachMayDestroyTheRun) {
  int calls = 0;
  run_ = StageRun::Start(loop_.get(), Stage::kPrestart, {Sh("exit 0"), Sh("exit 0")}, state_, StageOptions(),
                         [&](const HookRun&) {
                           ++calls;
                           run_.reset();
                         },
                         [&](Status) { done_ = true; });
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return calls > 0; }, 30 * kNanosPerSecond));
  EXPECT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(done_);
}

TEST(HookDescribe, CutsLongOutputToItsEnd) {
  HookRun r;
  r.stage = Stage::kPrestart;
  r.hook.path = "/x";
  r.exit_code = 1;
  r.duration_nanos = 12 * kNanosPerMilli + 5;
  r.err_tail = std::string(2000, 'a') + "\r\nthe end\n";
  std::string d = DescribeRun(r);
  EXPECT_TRUE(StartsWith(d, "hook prestart /x: exit code 1 in 12 ms: ...aaa")) << d;
  EXPECT_TRUE(EndsWith(d, "aaa; the end")) << d;
  EXPECT_LT(d.size(), 600u);
  r.err_tail = " \n";
  r.out_tail = "";
  EXPECT_EQ(DescribeRun(r), "hook prestart /x: exit code 1 in 12 ms");
  r.timed_out = true;
  r.timeout_seconds = 5;
  EXPECT_EQ(DescribeRun(r), "hook prestart /x ran past its timeout of 5s");
}

// ---- InChildHooks ----------------------------------------------------------

struct ChildOutcome {
  int rc = -1;
  bool sigpipe_default = false;  // SIGPIPE's disposition was given back
  std::string message;
};

// Runs hooks->Run() in a forked child (as the task's process would) and
// brings back what it returned.
ChildOutcome RunInChild(InChildHooks* hooks) {
  ChildOutcome out;
  int p[2];
  EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);  // the hooks must not hold it open
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    int rc = hooks->Run();
    struct sigaction now;
    ::sigaction(SIGPIPE, nullptr, &now);
    int dfl = now.sa_handler == SIG_DFL;
    (void)!::write(p[1], &rc, sizeof rc);
    (void)!::write(p[1], &dfl, sizeof dfl);
    (void)!::write(p[1], hooks->message(), std::strlen(hooks->message()));
    ::_exit(0);
  }
  ::close(p[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) got.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  if (got.size() < 2 * sizeof(int)) return out;
  std::memcpy(&out.rc, got.data(), sizeof(int));
  int dfl = 0;
  std::memcpy(&dfl, got.data() + sizeof(int), sizeof(int));
  out.sigpipe_default = dfl != 0;
  out.message = got.substr(2 * sizeof(int));
  return out;
}

class InChildHooksTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("/tmp", "inchild"); }
  void TearDown() override {
    if (!dir_.empty()) (void)sys::RemoveTree(dir_);
  }
  static State DefaultState() {
    State s;
    s.id = "t";
    s.stage = Stage::kStartContainer;
    s.bundle = "/b";
    return s;
  }
  ChildOutcome Run(std::vector<Hook> hooks, const State& state = DefaultState()) {
    auto p = InChildHooks::Prepare(Stage::kStartContainer, hooks, state, 10);
    EXPECT_TRUE(p.ok()) << p.error().message();
    if (!p.ok()) return ChildOutcome();
    EXPECT_EQ((*p)->empty(), hooks.empty());
    return RunInChild(p->get());
  }
  std::string dir_;
};

TEST_F(InChildHooksTest, RunsEachInOrderWithTheStateOnStdin) {
  std::string out = dir_ + "/out";
  State state = DefaultState();
  state.pid = 99;  // ignored: the state carries the pid of the process the hooks run in
  state.annotations["a"] = "b";
  ChildOutcome o = Run({Sh("cat > " + out), Sh("echo \" second $PPID\" >> " + out)}, state);
  EXPECT_EQ(o.rc, 0) << o.message;
  EXPECT_EQ(o.message, "");
  EXPECT_TRUE(o.sigpipe_default);
  auto text = sys::ReadFile(out);
  ASSERT_TRUE(text.ok());
  size_t second = text->find(" second ");
  ASSERT_NE(second, std::string::npos) << *text;
  std::string ppid = text->substr(second + 8, text->size() - second - 9);
  EXPECT_EQ(text->substr(0, second),
            "{\"ociVersion\":\"1.3.0\",\"id\":\"t\",\"status\":\"created\",\"pid\":" + ppid +
                ",\"bundle\":\"\\/b\",\"annotations\":{\"a\":\"b\"}}");
  EXPECT_NE(ppid, "99");
  EXPECT_EQ(Run({}).rc, 0);
}

TEST_F(InChildHooksTest, AFailureStopsAndSaysWhy) {
  std::string marker = dir_ + "/ran";
  Hook fail = Sh("printf 'X=%s HOME=%s' \"$X\" \"${HOME-unset}\"; echo ' oops' >&2; exit 3");
  fail.env = {"X=1"};
  ChildOutcome o = Run({fail, Sh("touch " + marker)});
  EXPECT_EQ(o.rc, ECANCELED);
  EXPECT_TRUE(StartsWith(o.message, "hook startContainer /bin/sh: exit code 3 in ")) << o.message;
  EXPECT_TRUE(EndsWith(o.message, " ms: X=1 HOME=unset oops")) << o.message;
  EXPECT_EQ(::access(marker.c_str(), F_OK), -1);
  EXPECT_TRUE(o.sigpipe_default);
}

TEST_F(InChildHooksTest, LongOutputKeepsItsEnd) {
  ChildOutcome o = Run({Sh("i=0; while [ $i -lt 300 ]; do echo 'line of output'; i=$((i+1)); done; "
                           "echo 'the real error' >&2; exit 1")});
  EXPECT_EQ(o.rc, ECANCELED);
  EXPECT_TRUE(EndsWith(o.message, "line of output; the real error")) << o.message;
  EXPECT_NE(o.message.find(" ms: ..."), std::string::npos) << o.message;
}

TEST_F(InChildHooksTest, AHookThatDoesNotReadItsStdinIsNoProblem) {
  State big = DefaultState();
  big.annotations["big"] = std::string(1 << 20, 'x');
  ChildOutcome o = Run({Sh("exit 0")}, big);
  EXPECT_EQ(o.rc, 0) << o.message;
  EXPECT_TRUE(o.sigpipe_default);
}

TEST_F(InChildHooksTest, AMissingProgramCannotStart) {
  Hook h;
  h.path = dir_ + "/missing";
  ChildOutcome o = Run({h});
  EXPECT_EQ(o.rc, ENOENT);
  EXPECT_EQ(o.message, "hook startContainer " + h.path + ": cannot start: No such file or directory");
}

TEST_F(InChildHooksTest, TheTimeoutKillsTheWholeProcessGroup) {
  std::string pidfile = dir_ + "/bg";
  ChildOutcome o = Run({Sh("sleep 60 & echo $! > " + pidfile + "; wait", 1)});
  EXPECT_EQ(o.rc, ETIMEDOUT);
  EXPECT_EQ(o.message, "hook startContainer /bin/sh ran past its timeout of 1s");
  pid_t bg = ReadPid(pidfile);
  ASSERT_GT(bg, 0);
  auto loop = MakeLoop();
  EXPECT_TRUE(RunUntil(loop.get(), [&] { return Gone(bg); }, 10 * kNanosPerSecond)) << "background pid " << bg;
}

TEST(InChildHooksPrepare, RefusesARelativePath) {
  Hook h;
  h.path = "hook";
  auto p = InChildHooks::Prepare(Stage::kStartContainer, {h}, State(), 10);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("\"hook\" is not absolute"), std::string::npos) << p.error().message();
}

// ---- bundle.h --------------------------------------------------------------

BundleInput SampleInput() {
  BundleInput in;
  in.id = "web.0";
  in.args = {"/usr/bin/web", "--port", "80"};
  in.env = {"PATH=/usr/bin", "A=1"};
  in.cwd = "/srv";
  in.uid = 1000;
  in.gid = 1001;
  in.additional_gids = {5, 6};
  in.rlimits = {{"nofile", 1024, 4096}, {"RLIMIT_CORE", 0, RLIM_INFINITY}};
  in.hostname = "web-host";
  return in;
}

TEST(BundleConfig, HasTheRequiredFieldsWithTheirTypes) {
  picojson::value c = BundleConfig(SampleInput());
  EXPECT_EQ(c.get("ociVersion").get<std::string>(), kOciVersion);
  const picojson::value& p = c.get("process");
  EXPECT_EQ(p.get("terminal").get<bool>(), false);
  EXPECT_EQ(p.get("user").get("uid").get<double>(), 1000);
  EXPECT_EQ(p.get("user").get("gid").get<double>(), 1001);
  ASSERT_TRUE(p.get("user").get("additionalGids").is<picojson::array>());
  EXPECT_EQ(p.get("user").get("additionalGids").get(1).get<double>(), 6);
  EXPECT_EQ(p.get("args").get(0).get<std::string>(), "/usr/bin/web");
  EXPECT_EQ(p.get("args").get<picojson::array>().size(), 3u);
  EXPECT_EQ(p.get("env").get(1).get<std::string>(), "A=1");
  EXPECT_EQ(p.get("cwd").get<std::string>(), "/srv");
  EXPECT_EQ(p.get("rlimits").get(0).get("type").get<std::string>(), "RLIMIT_NOFILE");
  EXPECT_EQ(p.get("rlimits").get(0).get("soft").get<double>(), 1024);
  EXPECT_EQ(p.get("rlimits").get(0).get("hard").get<double>(), 4096);
  EXPECT_EQ(p.get("rlimits").get(1).get("type").get<std::string>(), "RLIMIT_CORE");
  EXPECT_EQ(p.get("rlimits").get(1).get("hard").get<int64_t>(), INT64_MAX);  // "unlimited", as large as JSON here holds
  EXPECT_EQ(p.get("noNewPrivileges").get<bool>(), false);
  EXPECT_EQ(c.get("root").get("path").get<std::string>(), "/");
  EXPECT_EQ(c.get("root").get("readonly").get<bool>(), false);
  EXPECT_EQ(c.get("hostname").get<std::string>(), "web-host");
  ASSERT_TRUE(c.get("mounts").is<picojson::array>());
  EXPECT_EQ(c.get("mounts").get(0).get("destination").get<std::string>(), "/proc");
  ASSERT_TRUE(c.get("linux").get("namespaces").is<picojson::array>());
  EXPECT_TRUE(c.get("linux").get("namespaces").get<picojson::array>().empty());
  EXPECT_FALSE(c.get("linux").contains("resources"));
  EXPECT_FALSE(c.get("linux").contains("cgroupsPath"));
  EXPECT_FALSE(c.contains("hooks"));
  EXPECT_FALSE(c.contains("annotations"));
  BundleInput no_host = SampleInput();
  no_host.hostname = "";
  EXPECT_TRUE(BundleConfig(no_host).get("hostname").is<std::string>());
}

// NRI's mounts, devices and oom_score_adj, as a runtime reads them.
TEST(BundleConfig, HasNriMountsDevicesAndOomScoreAdj) {
  BundleInput in = SampleInput();
  in.bind_mounts = {{"/srv/data", "/data", true}};
  in.devices = {{"/dev/fuse", "c", 10, 229, 0666u, 0u, {}, {}, {}}};
  in.oom_score_adj = -500;
  picojson::value c = BundleConfig(in);
  EXPECT_EQ(c.get("process").get("oomScoreAdj").get<int64_t>(), -500);
  const picojson::array& mounts = c.get("mounts").get<picojson::array>();
  const picojson::value& m = mounts.back();
  EXPECT_EQ(m.get("destination").get<std::string>(), "/data");
  EXPECT_EQ(m.get("type").get<std::string>(), "bind");
  EXPECT_EQ(m.get("source").get<std::string>(), "/srv/data");
  EXPECT_EQ(m.get("options").serialize(), "[\"rbind\",\"rprivate\",\"ro\"]");
  const picojson::value& d = c.get("linux").get("devices").get<picojson::array>().at(0);
  EXPECT_EQ(d.get("path").get<std::string>(), "/dev/fuse");
  EXPECT_EQ(d.get("major").get<int64_t>(), 10);
  EXPECT_FALSE(d.contains("gid"));
  EXPECT_EQ(d.get("uid").get<int64_t>(), 0);
  EXPECT_EQ(d.get("fileMode").get<int64_t>(), 0666);
  const picojson::value& rule = c.get("linux").get("resources").get("devices").get<picojson::array>().at(0);
  EXPECT_EQ(rule.serialize(), "{\"access\":\"rwm\",\"allow\":true,\"major\":10,\"minor\":229,\"type\":\"c\"}");
  // A device plugin's permissions narrow the rule.
  in.devices[0].access = "r";
  EXPECT_EQ(BundleConfig(in).get("linux").get("resources").get("devices").get<picojson::array>().at(0).get("access").to_str(),
            "r");
  in.bind_mounts.clear();
  in.devices.clear();
  in.oom_score_adj.reset();
  picojson::value plain = BundleConfig(in);
  EXPECT_FALSE(plain.get("process").contains("oomScoreAdj"));
  EXPECT_FALSE(plain.get("linux").contains("devices"));
  EXPECT_FALSE(plain.get("linux").contains("resources")) << "no resources, no devices: nothing";
  auto text = BundleText(in, false);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, plain.serialize());
  in.cwd = "rel";
  EXPECT_NE(BundleText(in, false).error().message().find("process.cwd: must be absolute"), std::string::npos);
}

TEST(BundleConfig, MapsResourcesToTheOciForm) {
  BundleInput in = SampleInput();
  in.cgroup_path = "/outpost.slice/web.0";
  cgroup::Resources& r = in.resources;
  r.memory_max = 1000;
  r.memory_swap_max = 500;
  r.memory_low = 100;
  r.memory_high = 900;
  r.cpu_max_quota_us = 50000;
  r.cpu_max_period_us = 100000;
  r.cpu_weight = 100;
  r.cpuset_cpus = "0-1";
  r.cpuset_mems = "0";
  r.pids_max = 64;
  r.io_weight = 10000;
  cgroup::IoDeviceLimit dev;
  dev.major = 8;
  dev.minor = 16;
  dev.rbps = 1 << 20;
  dev.wiops = 10;
  r.io_max = {dev};
  picojson::value l = BundleConfig(in).get("linux");
  EXPECT_EQ(l.get("cgroupsPath").get<std::string>(), "/outpost.slice/web.0");
  const picojson::value& res = l.get("resources");
  EXPECT_EQ(res.get("memory").get("limit").get<double>(), 1000);
  EXPECT_EQ(res.get("memory").get("reservation").get<double>(), 100);
  EXPECT_EQ(res.get("memory").get("swap").get<double>(), 1500);  // memory+swap
  EXPECT_EQ(res.get("cpu").get("quota").get<double>(), 50000);
  EXPECT_EQ(res.get("cpu").get("period").get<double>(), 100000);
  EXPECT_EQ(res.get("cpu").get("shares").get<double>(), 2 + (99 * 262142) / 9999);
  EXPECT_EQ(res.get("cpu").get("cpus").get<std::string>(), "0-1");
  EXPECT_EQ(res.get("cpu").get("mems").get<std::string>(), "0");
  EXPECT_EQ(res.get("pids").get("limit").get<double>(), 64);
  EXPECT_EQ(res.get("blockIO").get("weight").get<double>(), 1000);
  const picojson::value& rbps = res.get("blockIO").get("throttleReadBpsDevice");
  ASSERT_EQ(rbps.get<picojson::array>().size(), 1u);
  EXPECT_EQ(rbps.get(0).get("major").get<double>(), 8);
  EXPECT_EQ(rbps.get(0).get("minor").get<double>(), 16);
  EXPECT_EQ(rbps.get(0).get("rate").get<double>(), 1 << 20);
  EXPECT_EQ(res.get("blockIO").get("throttleWriteIOPSDevice").get(0).get("rate").get<double>(), 10);
  EXPECT_FALSE(res.get("blockIO").contains("throttleWriteBpsDevice"));
  const picojson::value& u = res.get("unified");
  EXPECT_EQ(u.get("memory.high").get<std::string>(), "900");
  EXPECT_EQ(u.get("cpu.weight").get<std::string>(), "100");
  EXPECT_EQ(u.get("io.weight").get<std::string>(), "10000");
  EXPECT_FALSE(u.contains("memory.swap.max"));

  cgroup::Resources swap_only;
  swap_only.memory_swap_max = 0;
  in.resources = swap_only;
  const picojson::value res2 = BundleConfig(in).get("linux").get("resources");
  EXPECT_FALSE(res2.contains("memory"));
  EXPECT_EQ(res2.get("unified").get("memory.swap.max").get<std::string>(), "0");
}

TEST(BundleConfig, CarriesHooksAnnotationsAndNamespaces) {
  BundleInput in = SampleInput();
  Hook h;
  h.path = "/usr/libexec/oci/hooks.d/x";
  h.timeout_seconds = 3;
  in.hooks.at(Stage::kCreateRuntime).push_back(h);
  in.annotations = {{"org.example/a", "1"}};
  in.namespaces = {"network", "pid"};
  in.namespace_paths = {{"network", "/run/netns/outpost-job"}};
  picojson::value c = BundleConfig(in);
  std::vector<std::string> errors;
  // As a hook reads it: from the file.
  HookSet back = HooksFromJson(ParseJson(c.get("hooks").serialize()), "hooks", "", &errors);
  EXPECT_TRUE(errors.empty()) << json::JoinErrors(errors);
  EXPECT_EQ(back, in.hooks);
  EXPECT_EQ(c.get("annotations").get("org.example/a").get<std::string>(), "1");
  const picojson::value& ns = c.get("linux").get("namespaces");
  ASSERT_EQ(ns.get<picojson::array>().size(), 2u);
  EXPECT_EQ(ns.get(0).get("type").get<std::string>(), "network");
  EXPECT_EQ(ns.get(0).get("path").get<std::string>(), "/run/netns/outpost-job");
  EXPECT_EQ(ns.get(1).get("type").get<std::string>(), "pid");
  EXPECT_FALSE(ns.get(1).contains("path"));
}

TEST(BundleWrite, WritesParseableConfigAtomically) {
  std::string dir = MakeTempDir("/tmp", "bundle");
  ASSERT_FALSE(dir.empty());
  std::string bundle = dir + "/tasks/web.0";
  BundleInput in = SampleInput();
  ASSERT_TRUE(WriteBundle(bundle, in).ok());
  auto text = sys::ReadFile(bundle + "/config.json");
  ASSERT_TRUE(text.ok()) << text.error().message();
  EXPECT_EQ(ParseJson(*text), BundleConfig(in));
  EXPECT_EQ(::access((bundle + "/config.json.tmp").c_str(), F_OK), -1);
  struct stat st;
  ASSERT_EQ(::stat(bundle.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  in.args = {"/bin/other"};
  ASSERT_TRUE(WriteBundle(bundle, in).ok());  // again, over the old one
  text = sys::ReadFile(bundle + "/config.json");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(ParseJson(*text).get("process").get("args").get(0).get<std::string>(), "/bin/other");
  (void)sys::RemoveTree(dir);
}

TEST(BundleWrite, RefusesWhatTheRuntimeSpecRequires) {
  std::string dir = MakeTempDir("/tmp", "bundle");
  BundleInput in = SampleInput();
  in.args.clear();
  in.cwd = "srv";
  Status st = WriteBundle(dir + "/b", in);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("process.args"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("process.cwd"), std::string::npos) << st.error().message();
  EXPECT_EQ(::access((dir + "/b/config.json").c_str(), F_OK), -1);
  ASSERT_TRUE(sys::WriteFileAtomic(dir + "/file", "x", 0644).ok());
  st = WriteBundle(dir + "/file", SampleInput());  // not a directory
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find(dir + "/file"), std::string::npos) << st.error().message();
  (void)sys::RemoveTree(dir);
}

}  // namespace
}  // namespace outpost::hooks
