// Health checks: the `checks` field of a task (validation, defaults,
// canonical form, fingerprint), the thresholds, the HTTP response parser
// (split at every offset, truncation), tcp probes against real sockets, and
// a task's checks driving its supervisor (healthy, unhealthy, the restart
// through the policy) with a fake runner.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strings.h"
#include "job/check_http.h"
#include "job/check_probe.h"
#include "job/checks.h"
#include "job/spec.h"
#include "job/supervisor.h"
#include "test_util.h"
#include "unit/job_spec_test_util.h"

namespace outpost::job {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;
using spec_test::kSec;
using spec_test::Task;

std::string Checks(const std::string& items) { return Task(R"("checks": [)" + items + "]"); }

// The text with JSON's optional "\/" escape undone (picojson writes it).
std::string Unslashed(std::string s) {
  for (size_t p; (p = s.find("\\/")) != std::string::npos;) s.erase(p, 1);
  return s;
}

// ---- spec -----------------------------------------------------------------------

TEST(JobChecksSpec, Defaults) {
  auto s = ParseJobSpec(Checks(R"({"type": "http", "port": 8080}, {"type": "exec", "command": ["pg_isready", "-q"]},
                                  {"type": "tcp", "port": 5432, "interval": "1s", "on_unhealthy": "restart"})"));
  ASSERT_TRUE(s.ok()) << s.error().message();
  const auto& c = s->tasks[0].checks;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].type, CheckType::kHttp);
  EXPECT_EQ(c[0].path, "/");
  EXPECT_EQ(c[0].address, "127.0.0.1");
  EXPECT_EQ(c[0].interval_nanos, 10 * kSec);
  EXPECT_EQ(c[0].timeout_nanos, 2 * kSec);
  EXPECT_EQ(c[0].grace_nanos, 0);
  EXPECT_EQ(c[0].failure_threshold, 3);
  EXPECT_EQ(c[0].success_threshold, 1);
  EXPECT_EQ(c[0].on_unhealthy, OnUnhealthy::kNone);
  EXPECT_EQ(c[0].Label(), "http /");
  EXPECT_EQ(c[1].Label(), "exec pg_isready");
  EXPECT_EQ((c[1].command), (std::vector<std::string>{"pg_isready", "-q"}));
  EXPECT_EQ(c[2].Label(), "tcp 5432");
  EXPECT_EQ(c[2].interval_nanos, kSec);
  EXPECT_EQ(c[2].on_unhealthy, OnUnhealthy::kRestart);
}

struct Bad {
  std::string checks;
  std::string error;
};

TEST(JobChecksSpec, ErrorsNameTheField) {
  const std::vector<Bad> rows = {
      {R"({"port": 80})", R"(tasks[0].checks[0].type: required: "exec", "http" or "tcp")"},
      {R"({"type": "udp", "port": 80})", R"(tasks[0].checks[0].type: must be "exec", "http" or "tcp", got "udp")"},
      {R"({"type": "http"})", "tasks[0].checks[0].port: required for a http check: the task's port, 1-65535"},
      {R"({"type": "tcp", "port": 0})", "tasks[0].checks[0].port: must be between 1 and 65535, got 0"},
      {R"({"type": "tcp", "port": 70000})", "tasks[0].checks[0].port: must be between 1 and 65535, got 70000"},
      {R"({"type": "exec"})",
       R"(tasks[0].checks[0].command: required for an exec check: the program and its arguments, e.g. ["pg_isready"])"},
      {R"({"type": "exec", "command": []})", "tasks[0].checks[0].command: must name a program"},
      {R"({"type": "exec", "command": ["x"], "port": 1})", "tasks[0].checks[0].port: only http and tcp checks connect to a port"},
      {R"({"type": "tcp", "port": 1, "command": ["x"]})", "tasks[0].checks[0].command: only an exec check runs a command"},
      {R"({"type": "tcp", "port": 1, "path": "/x"})", "tasks[0].checks[0].path: only an http check has a path"},
      {R"({"type": "http", "port": 1, "path": "x"})",
       R"(tasks[0].checks[0].path: must start with '/' and hold printable ASCII without spaces, got "x")"},
      {R"({"type": "http", "port": 1, "path": "/a b"})",
       R"(tasks[0].checks[0].path: must start with '/' and hold printable ASCII without spaces, got "/a b")"},
      {R"({"type": "http", "port": 1, "path": "/a\r\nX: y"})",
       R"(tasks[0].checks[0].path: must start with '/' and hold printable ASCII without spaces, got "/a\r\nX: y")"},
      {R"({"type": "tcp", "port": 1, "address": "localhost"})",
       R"(tasks[0].checks[0].address: must be an IPv4 address like 127.0.0.1, got "localhost")"},
      {R"({"type": "tcp", "port": 1, "interval": "10ms"})",
       "tasks[0].checks[0].interval: must be between 100ms and 24h, got 10ms"},
      {R"({"type": "tcp", "port": 1, "timeout": "0s"})", "tasks[0].checks[0].timeout: must be between 10ms and 1h, got 0s"},
      {R"({"type": "tcp", "port": 1, "grace": "2h"})", "tasks[0].checks[0].grace: must be between 0s and 1h, got 2h"},
      {R"({"type": "tcp", "port": 1, "failure_threshold": 0})",
       "tasks[0].checks[0].failure_threshold: must be between 1 and 100, got 0"},
      {R"({"type": "tcp", "port": 1, "success_threshold": 101})",
       "tasks[0].checks[0].success_threshold: must be between 1 and 100, got 101"},
      {R"({"type": "tcp", "port": 1, "on_unhealthy": "kill"})",
       R"(tasks[0].checks[0].on_unhealthy: must be "restart" or "none", got "kill")"},
      {R"({"type": "tcp", "port": 1}, {"type": "tcp", "port": 1})",
       R"(tasks[0].checks[1]: same name as checks[0] ("tcp 1"): give one a "name")"},
  };
  for (const Bad& b : rows) {
    auto s = ParseJobSpec(Checks(b.checks));
    ASSERT_FALSE(s.ok()) << b.checks;
    EXPECT_NE(Unslashed(s.error().message()).find(b.error), std::string::npos) << b.checks << "\n got: " << s.error().message();
  }
  auto s = ParseJobSpec(Task(R"("checks": {})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "tasks[0].checks: expected an array of checks, got object");
  std::string nine;
  for (int i = 0; i < 9; i++) nine += Format(R"(%s{"type": "tcp", "port": %d})", i ? ", " : "", i + 1);
  s = ParseJobSpec(Checks(nine));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "tasks[0].checks: 9 checks, more than the limit of 8");
  s = ParseJobSpec(Checks(R"({"type": "tcp", "port": 1, "intervall": "1s"})"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("tasks[0].checks[0].intervall"), std::string::npos) << s.error().message();
}

TEST(JobChecksSpec, CanonicalFormRoundTripsAndFingerprints) {
  auto s = ParseJobSpec(Checks(R"({"type": "http", "port": 8080, "path": "/healthz", "name": "web", "grace": "5s",
                                  "timeout": "500ms", "failure_threshold": 2, "success_threshold": 2},
                                 {"type": "exec", "command": ["true"], "on_unhealthy": "restart"})"));
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::string canon = JobSpecToJson(*s).serialize();
  auto back = ParseJobSpec(canon);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(JobSpecToJson(*back).serialize(), canon);
  EXPECT_NE(Unslashed(canon).find(R"("checks":[{"address":"127.0.0.1","failure_threshold":2,"grace":"5s","interval":"10s",)"
                       R"("name":"web","on_unhealthy":"none","path":"/healthz","port":8080,"success_threshold":2,)"
                       R"("timeout":"500ms","type":"http"},{"command":["true"],)"),
            std::string::npos)
      << canon;
  // A task without checks keeps the fingerprint it had; a changed check
  // changes it (the task is restarted with the new checks).
  auto plain = ParseJobSpec(Task(""));
  auto with = ParseJobSpec(Checks(R"({"type": "tcp", "port": 1})"));
  auto other = ParseJobSpec(Checks(R"({"type": "tcp", "port": 2})"));
  ASSERT_TRUE(plain.ok() && with.ok() && other.ok());
  EXPECT_EQ(JobSpecToJson(*plain).serialize().find("checks"), std::string::npos);
  EXPECT_NE(TaskFingerprint(plain->tasks[0]), TaskFingerprint(with->tasks[0]));
  EXPECT_NE(TaskFingerprint(with->tasks[0]), TaskFingerprint(other->tasks[0]));
}

// ---- thresholds -------------------------------------------------------------------

TEST(JobChecksThresholds, ConsecutiveResultsTurnTheVerdict) {
  CheckSpec c;
  c.failure_threshold = 3;
  c.success_threshold = 2;
  CheckState s;
  EXPECT_FALSE(RecordCheckResult(c, &s, true));
  EXPECT_EQ(s.verdict, CheckVerdict::kPending);
  EXPECT_TRUE(RecordCheckResult(c, &s, true));
  EXPECT_EQ(s.verdict, CheckVerdict::kPassing);
  EXPECT_FALSE(RecordCheckResult(c, &s, false));
  EXPECT_FALSE(RecordCheckResult(c, &s, false));
  EXPECT_FALSE(RecordCheckResult(c, &s, true));  // the run of failures is broken
  EXPECT_FALSE(RecordCheckResult(c, &s, false));
  EXPECT_FALSE(RecordCheckResult(c, &s, false));
  EXPECT_EQ(s.verdict, CheckVerdict::kPassing);
  EXPECT_TRUE(RecordCheckResult(c, &s, false));
  EXPECT_EQ(s.verdict, CheckVerdict::kFailing);
  EXPECT_EQ(s.failures, 3);
  EXPECT_FALSE(RecordCheckResult(c, &s, true));
  EXPECT_TRUE(RecordCheckResult(c, &s, true));
  EXPECT_EQ(s.verdict, CheckVerdict::kPassing);
  EXPECT_EQ(s.runs, 10u);
  // A check that never passed fails after its failures too.
  CheckState fresh;
  for (int i = 0; i < 2; i++) EXPECT_FALSE(RecordCheckResult(c, &fresh, false));
  EXPECT_TRUE(RecordCheckResult(c, &fresh, false));
  EXPECT_EQ(fresh.verdict, CheckVerdict::kFailing);
}

TEST(JobChecksThresholds, TaskHealthIsTheWorstCheck) {
  CheckState pass, fail, pending;
  pass.verdict = CheckVerdict::kPassing;
  fail.verdict = CheckVerdict::kFailing;
  EXPECT_EQ(HealthOf({pass, pass}), TaskHealth::kHealthy);
  EXPECT_EQ(HealthOf({pass, pending}), TaskHealth::kStarting);
  EXPECT_EQ(HealthOf({pending, fail}), TaskHealth::kUnhealthy);
  EXPECT_EQ(HealthOf({pass, fail}), TaskHealth::kUnhealthy);
  EXPECT_STREQ(TaskHealthName(TaskHealth::kUnhealthy), "unhealthy");
}

// ---- the HTTP response parser ---------------------------------------------------------

using P = HttpResponseParser;

TEST(JobChecksHttp, Request) {
  EXPECT_EQ(HttpCheckRequest("127.0.0.1", 8080, "/healthz?x=1"),
            "GET /healthz?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: outpost-check\r\nAccept: */*\r\n"
            "Connection: close\r\n\r\n");
}

TEST(JobChecksHttp, SplitAtEveryOffsetGivesTheSameResult) {
  const std::vector<std::pair<std::string, int>> good = {
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200},
      {"HTTP/1.0 503 Service Unavailable\r\nServer: x\r\n\r\n", 503},
      {"HTTP/1.1 301\r\nLocation: /a\r\n\r\n", 301},
      {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\n\r\n", 404},
      {"HTTP/1.1 204 No Content\n\n", 204},  // bare LF
  };
  for (const auto& [text, code] : good) {
    for (size_t cut = 0; cut <= text.size(); cut++) {
      P p;
      p.Feed(text.data(), cut);
      P::State st = p.Feed(text.data() + cut, text.size() - cut);
      ASSERT_EQ(st, P::State::kDone) << text << " cut at " << cut << ": " << p.error();
      EXPECT_EQ(p.status(), code);
    }
    // One byte at a time.
    P p;
    for (char c : text) p.Feed(&c, 1);
    EXPECT_EQ(p.state(), P::State::kDone);
    EXPECT_EQ(p.status(), code);
  }
  P p;
  p.Feed("HTTP/1.1 503 Service Unavailable\r\n\r\n", 36);
  EXPECT_EQ(p.reason(), "Service Unavailable");
}

TEST(JobChecksHttp, TruncatedAtEveryOffsetIsAnError) {
  const std::string text = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
  for (size_t cut = 0; cut + 1 < text.size(); cut++) {
    P p;
    ASSERT_EQ(p.Feed(text.data(), cut), P::State::kNeedMore) << cut;
    EXPECT_EQ(p.Finish(), P::State::kError) << cut;
    EXPECT_FALSE(p.error().empty());
  }
  P empty;
  EXPECT_EQ(empty.Finish(), P::State::kError);
  EXPECT_EQ(empty.error(), "connection closed without a response");
}

TEST(JobChecksHttp, Refused) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"SSH-2.0-OpenSSH_9.6\r\n", "not an HTTP/1.x status line: \"SSH-2.0-OpenSSH_9.6\""},
      {"HTTP/2 200\r\n\r\n", "not an HTTP/1.x status line: \"HTTP/2 200\""},
      {"HTTP/1.1 20 OK\r\n\r\n", "not an HTTP/1.x status line: \"HTTP/1.1 20 OK\""},
      {"HTTP/1.1 2000\r\n\r\n", "not an HTTP/1.x status line: \"HTTP/1.1 2000\""},
      {"HTTP/1.1 099 X\r\n\r\n", "status 99 out of range"},
      {"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", "header line without a name: \"NoColon\""},
      {"HTTP/1.1 200 OK\r\n: v\r\n\r\n", "header line without a name: \": v\""},
      {"HTTP/1.1 200 OK\r\nA B: v\r\n\r\n", "bad header name: \"A B\""},
      {"HTTP/1.1 200 OK\r\nA: v\r\n folded\r\n\r\n", "folded header line"},
      {std::string("HTTP/1.1 200 OK\r\nA\x01: v\r\n\r\n"), "bad header name: \"A?\""},
  };
  for (const auto& [text, error] : bad) {
    P p;
    EXPECT_EQ(p.Feed(text.data(), text.size()), P::State::kError) << text;
    EXPECT_EQ(p.error(), error);
  }
  std::string long_line = "HTTP/1.1 200 OK\r\nX: " + std::string(9000, 'a');
  P p;
  EXPECT_EQ(p.Feed(long_line.data(), long_line.size()), P::State::kError);
  EXPECT_EQ(p.error(), "response line over 8192 bytes");
  std::string many = "HTTP/1.1 200 OK\r\n";
  while (many.size() < 20000) many += "X-Header: value\r\n";
  P q;
  EXPECT_EQ(q.Feed(many.data(), many.size()), P::State::kError);
  EXPECT_EQ(q.error(), "response head over 16384 bytes");
  // Bytes after the head change nothing.
  P r;
  std::string done = "HTTP/1.1 200 OK\r\n\r\ngarbage\r\n\r\n";
  EXPECT_EQ(r.Feed(done.data(), done.size()), P::State::kDone);
  EXPECT_EQ(r.Feed("x", 1), P::State::kDone);
}

// ---- probes against real sockets ---------------------------------------------------------

// A listening socket on 127.0.0.1 (connects succeed without accept), and
// the port of one that was closed (connects are refused).
int Listen(UniqueFd* fd) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(s, 16) != 0) return 0;
  socklen_t len = sizeof sa;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len);
  *fd = UniqueFd(s);
  return ntohs(sa.sin_port);
}

TEST(JobChecksProbe, TcpConnectsOrIsRefused) {
  auto loop = MakeLoop();
  UniqueFd listener;
  int port = Listen(&listener);
  ASSERT_GT(port, 0);
  CheckSpec c;
  c.type = CheckType::kTcp;
  c.port = port;
  bool done = false;
  ProbeResult got;
  auto probe = std::make_unique<NetProbe>(loop.get(), c, "", [&](const ProbeResult& r) {
    got = r;
    done = true;
  });
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return done; }));
  EXPECT_TRUE(got.ok) << got.output;
  EXPECT_EQ(got.output, "connected");

  UniqueFd closed;
  c.port = Listen(&closed);
  closed.Reset();
  done = false;
  probe = std::make_unique<NetProbe>(loop.get(), c, "", [&](const ProbeResult& r) {
    got = r;
    done = true;
  });
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return done; }));
  EXPECT_FALSE(got.ok);
  EXPECT_EQ(got.output, "connect: Connection refused");
}

TEST(JobChecksProbe, HttpTimesOutAgainstASilentPeer) {
  auto loop = MakeLoop();
  UniqueFd listener;  // accepts (in the backlog) and never answers
  int port = Listen(&listener);
  CheckSpec c;
  c.type = CheckType::kHttp;
  c.port = port;
  c.timeout_nanos = 100 * 1000000LL;
  bool done = false;
  ProbeResult got;
  NetProbe probe(loop.get(), c, "", [&](const ProbeResult& r) {
    got = r;
    done = true;
  });
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return done; }));
  EXPECT_FALSE(got.ok);
  EXPECT_EQ(got.output, "timed out after 100ms");
}

TEST(JobChecksProbe, DestroyedProbeNeverReports) {
  auto loop = MakeLoop();
  CheckSpec c;
  c.type = CheckType::kTcp;
  c.port = 1;
  c.address = "127.0.0.1";
  bool called = false;
  {
    NetProbe probe(loop.get(), c, "/nonexistent/netns", [&](const ProbeResult&) { called = true; });
  }
  for (int i = 0; i < 3; i++) ASSERT_TRUE(loop->RunOnce(10 * 1000000LL).ok());
  EXPECT_FALSE(called);
}

// ---- a supervisor driven by its checks ----------------------------------------------------

class CheckRunner : public TaskRunner, public task::EventSink {
 public:
  int exec_exit = 0;  // what the next exec checks exit with
  int starts = 0;
  int execs = 0;
  std::vector<std::string> commands;
  std::vector<driver::TaskEvent> events;
  ExitCallback exited;

  void Start(const driver::TaskConfig&, std::function<void(Status)> started, ExitCallback e) override {
    starts++;
    exited = std::move(e);
    started(OkStatus());
  }
  Status Watch(const std::string&, ExitCallback) override { return OkStatus(); }
  void Stop(const std::string&, int64_t, std::function<void(Status)> done) override {
    auto e = std::move(exited);
    exited = nullptr;
    done(OkStatus());
    if (e) {
      driver::ExitResult r;
      r.exit_code = 143;
      r.signal = 15;
      e(r);
    }
  }
  void CheckAlive(const std::string&, std::function<void(bool)> done) override { done(true); }
  Status UpdateResources(const std::string&, const cgroup::Resources&) override { return OkStatus(); }
  Status ApplyJobResources(const std::string&, const cgroup::Resources&) override { return OkStatus(); }
  void ExecCheck(const std::string&, const std::vector<std::string>& cmd, int64_t,
                 driver::Driver::ExecCallback done) override {
    execs++;
    commands.push_back(cmd.empty() ? "" : cmd[0]);
    driver::ExecResult r;
    r.exit_code = exec_exit;
    r.output = exec_exit ? "not ready\n" : "";
    done(r);
  }
  void Publish(const driver::TaskEvent& ev) override { events.push_back(ev); }
  int Count(const std::string& type) const {
    int n = 0;
    for (const auto& e : events) n += e.type == type;
    return n;
  }
  std::string Last(const std::string& type) const {
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (it->type == type) return it->message;
    }
    return "";
  }
};

std::shared_ptr<TaskSpec> ExecCheckedTask(OnUnhealthy on) {
  auto t = std::make_shared<TaskSpec>();
  t->name = "web";
  t->command = "/bin/sleep";
  t->restart.policy = RestartPolicy::kAlways;
  t->restart.delay_nanos = 0;
  CheckSpec c;
  c.type = CheckType::kExec;
  c.command = {"ready"};
  c.interval_nanos = 100 * 1000000LL;
  c.failure_threshold = 2;
  c.on_unhealthy = on;
  t->checks.push_back(c);
  return t;
}

TEST(JobChecksSupervisor, HealthyOnlyOnceTheChecksPassAndAgainAfterRecovery) {
  auto loop = MakeLoop();
  CheckRunner runner;
  runner.exec_exit = 1;
  int changes = 0;
  auto sup = std::make_shared<TaskSupervisor>(loop.get(), &runner, &runner, "j", ExecCheckedTask(OnUnhealthy::kNone),
                                              0, [&] { changes++; });
  sup->Go();
  ASSERT_EQ(sup->state(), RunState::kRunning);
  EXPECT_EQ(sup->health(), "starting");
  EXPECT_FALSE(sup->healthy());  // min_healthy_time is 0: without checks it would be healthy
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return sup->health() == "unhealthy"; }));
  EXPECT_FALSE(sup->healthy());
  EXPECT_EQ(runner.Last("unhealthy"), "check exec ready: exit code 1: not ready (2 of 2)");
  EXPECT_EQ(runner.starts, 1);  // on_unhealthy "none": no restart
  auto views = sup->check_views();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].state.verdict, CheckVerdict::kFailing);
  EXPECT_EQ(views[0].state.output, "exit code 1: not ready");
  EXPECT_GT(views[0].state.last_unix_nanos, 0);
  runner.exec_exit = 0;
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return sup->healthy(); }));
  EXPECT_EQ(sup->health(), "healthy");
  EXPECT_EQ(runner.Last("healthy"), "check exec ready: exit code 0");
  EXPECT_EQ(runner.Count("healthy"), 1);
  EXPECT_EQ(runner.commands[0], "ready");
  sup->Stop(-1);
  EXPECT_EQ(sup->state(), RunState::kDead);
  EXPECT_EQ(sup->health(), "");
  int execs = runner.execs;
  for (int i = 0; i < 5; i++) ASSERT_TRUE(loop->RunOnce(50 * 1000000LL).ok());
  EXPECT_EQ(runner.execs, execs);  // no check runs for a stopped task
}

TEST(JobChecksSupervisor, OnUnhealthyRestartGoesThroughThePolicy) {
  auto loop = MakeLoop();
  CheckRunner runner;
  runner.exec_exit = 1;
  auto sup = std::make_shared<TaskSupervisor>(loop.get(), &runner, &runner, "j",
                                              ExecCheckedTask(OnUnhealthy::kRestart), 0, [] {});
  sup->Go();
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return runner.starts >= 2; }, 10 * kSec));
  EXPECT_EQ(sup->restarts(), 1u);
  EXPECT_EQ(sup->last_exit(), "unhealthy: check exec ready: exit code 1: not ready (2 of 2); killed by SIGTERM");
  EXPECT_NE(runner.Last("restarting").find("unhealthy: check exec ready"), std::string::npos) << runner.Last("restarting");
  runner.exec_exit = 0;
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return sup->healthy(); }, 10 * kSec));
  EXPECT_EQ(sup->restarts(), 1u);
  sup->Stop(-1);
}

// docs/supervision.md, "Restart policy": a restart for a check that never
// passed is a quick death (the delay doubles from `delay`); one of an
// instance that had been healthy comes at once.
TEST(JobChecksSupervisor, AFailingCheckBacksOffUntilTheTaskWasHealthy) {
  auto loop = MakeLoop();
  CheckRunner runner;
  runner.exec_exit = 1;
  auto spec = ExecCheckedTask(OnUnhealthy::kRestart);
  spec->restart.delay_nanos = 1 * kSec;
  spec->restart.max_delay_nanos = 2 * kSec;
  auto sup = std::make_shared<TaskSupervisor>(loop.get(), &runner, &runner, "j", spec, 0, [] {});
  sup->Go();
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return runner.Count("restarting") >= 1; }, 10 * kSec));
  const std::string why = "unhealthy: check exec ready: exit code 1: not ready (2 of 2); killed by SIGTERM";
  EXPECT_EQ(runner.Last("restarting"), "restarting in 1s: " + why);
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return runner.Count("restarting") >= 2; }, 10 * kSec));
  EXPECT_EQ(runner.Last("restarting"), "restarting in 2s: " + why);
  // The third instance passes its checks, serves past the one-second
  // throttle, then fails them: back at once.
  runner.exec_exit = 0;
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return runner.starts >= 3 && sup->healthy(); }, 10 * kSec));
  const int64_t healthy_at = MonotonicNanos();
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return MonotonicNanos() - healthy_at > kSec; }, 10 * kSec));
  runner.exec_exit = 1;
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return runner.Count("restarting") >= 3; }, 10 * kSec));
  EXPECT_EQ(runner.Last("restarting"), "restarting now: " + why);
  EXPECT_EQ(sup->restarts(), 3u);
  sup->Stop(-1);
}

}  // namespace
}  // namespace outpost::job
