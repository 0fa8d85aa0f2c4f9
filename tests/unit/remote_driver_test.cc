// driver/remote: a TaskDriver plugin (simulated on the test's loop, over
// real sockets) registers, becomes a driver in the driver registry, and
// serves the Driver contract: start with the handle kept, WaitTask across
// long-poll deadlines and a dropped connection, optional calls it does not
// offer, and a disconnected driver saying so.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/clock.h"
#include "base/log.h"
#include "base/sys.h"
#include "driver/registry.h"
#include "driver/remote.h"
#include "driver/remote_codec.h"
#include "driverproto/plugin_codec.h"
#include "plugin/registry.h"
#include "plugin/watcher.h"
#include "plugin_test_util.h"
#include "test_util.h"

namespace outpost::driver {
namespace {

using outpost::testing::FakePlugin;
using outpost::testing::RunUntil;
using remote::kService;
// The fake driver plugin speaks the plugin library's side of the protocol.
namespace proto = outpost::driverproto;
namespace sdk = outpost::plugin_sdk;

class RemoteDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetLevel(log::Level::kError);
    loop_ = outpost::testing::MakeLoop();
    ASSERT_NE(loop_, nullptr);
    dir_ = outpost::testing::MakeTempDir("/tmp", "remote-driver");
    plugins_ = std::make_unique<plugin::Registry>(loop_.get(), plugin::RegistryOptions{});
    RemoteOptions ro;
    ro.wait_poll_nanos = 300 * kNanosPerMilli;
    ro.events_poll_nanos = 300 * kNanosPerMilli;
    ro.call_timeout_nanos = 2 * kNanosPerSecond;
    TaskDriverHandler::Hooks hooks;
    hooks.changed = [this](const std::string& n) { changed_.push_back(n); };
    handler_ = std::make_unique<TaskDriverHandler>(loop_.get(), plugins_.get(), &drivers_, ro, hooks);
    ASSERT_TRUE(plugins_->AddHandler(handler_.get()).ok());
    plugin::WatcherOptions wo;
    wo.dir = dir_;
    auto w = plugin::Watcher::Start(loop_.get(), plugins_.get(), wo);
    ASSERT_TRUE(w.ok());
    watcher_ = std::move(*w);
  }
  void TearDown() override {
    watcher_.reset();
    plugin_.reset();
    handler_.reset();
    plugins_.reset();
    (void)sys::RemoveTree(dir_);
    log::SetLevel(log::Level::kInfo);
  }

  // A driver plugin "fake" with the calls every driver has.
  void ServeDriver(bool signals = true) {
    plugin_ = FakePlugin::Serve(loop_.get(), dir_ + "/fake.sock", "fake");
    plugin_->type = "TaskDriver";
    sdk::Capabilities caps;
    caps.send_signals = signals;
    caps.exec = true;
    caps.fs_isolation = "none";
    plugin_->Handle(kService, "Capabilities", [caps](const wire::CallContext&, std::string_view, wire::Responder r) {
      r.Finish(proto::EncodeCapabilities(caps));
    });
    plugin_->Handle(kService, "Fingerprint", [](const wire::CallContext&, std::string_view, wire::Responder r) {
      sdk::Fingerprint f;
      f.health = static_cast<int32_t>(Health::kHealthy);
      f.description = "Healthy";
      f.attributes["driver.fake"] = "1";
      r.Finish(proto::EncodeFingerprint(f));
    });
    plugin_->Handle(kService, "StartTask", [this](const wire::CallContext&, std::string_view p, wire::Responder r) {
      auto c = proto::DecodeStartTask(p);
      ASSERT_TRUE(c.ok());
      started_ = *c;
      sdk::TaskHandle h;
      h.version = 3;
      h.pid = 4242;
      h.started_at_unix_nanos = 77;
      h.driver_state = std::string("st\0ate", 6);
      r.Finish(proto::EncodeStartTaskResponse(h));
    });
    plugin_->Handle(kService, "WaitTask", [this](const wire::CallContext& ctx, std::string_view p, wire::Responder r) {
      auto id = proto::DecodeTaskId(p);
      ASSERT_TRUE(id.ok());
      ++wait_calls_;
      if (exit_code_ >= 0) {
        sdk::ExitResult e;
        e.exit_code = exit_code_;
        return r.Finish(proto::EncodeWaitTask(true, e));
      }
      waiting_ = r;  // answered when the task "exits", or never (the deadline passes)
      (void)ctx;
    });
    plugin_->Handle(kService, "StopTask", [](const wire::CallContext&, std::string_view, wire::Responder r) {
      r.Reply("");
    });
    plugin_->Handle(kService, "RecoverTask", [this](const wire::CallContext&, std::string_view, wire::Responder r) {
      ++recover_calls_;
      r.Reply("");
    });
  }

  // A driver instance at sock that logs "<tag> <method>" for each call
  // about a task (several instances of one driver "multi").
  std::unique_ptr<FakePlugin> ServeInstance(const std::string& sock, const std::string& tag) {
    auto p = FakePlugin::Serve(loop_.get(), dir_ + "/" + sock, "multi");
    p->type = "TaskDriver";
    p->Handle(kService, "Capabilities", [](const wire::CallContext&, std::string_view, wire::Responder r) {
      sdk::Capabilities caps;
      caps.send_signals = true;
      r.Finish(proto::EncodeCapabilities(caps));
    });
    p->Handle(kService, "Fingerprint", [](const wire::CallContext&, std::string_view, wire::Responder r) {
      sdk::Fingerprint f;
      f.health = static_cast<int32_t>(Health::kHealthy);
      r.Finish(proto::EncodeFingerprint(f));
    });
    for (const char* m : {"StartTask", "StopTask", "RecoverTask"}) {
      std::string method = m;
      p->Handle(kService, method, [this, tag, method](const wire::CallContext&, std::string_view, wire::Responder r) {
        calls_.push_back(tag + " " + method);
        if (method == "StartTask") {
          sdk::TaskHandle h;
          h.pid = 10;
          return r.Finish(proto::EncodeStartTaskResponse(h));
        }
        r.Reply("");
      });
    }
    return p;
  }

  // TaskEvents on the fake: a long poll answered when events above the
  // cursor exist (Emit), else never (the caller's deadline passes).
  void ServeEvents() {
    plugin_->Handle(kService, "TaskEvents", [this](const wire::CallContext&, std::string_view p, wire::Responder r) {
      auto after = proto::DecodeTaskEvents(p);
      ASSERT_TRUE(after.ok());
      ++event_calls_;
      cursors_.push_back(*after);
      events_waiting_ = std::move(r);
      events_after_ = *after;
      FlushEvents();
    });
  }
  void Emit(const std::string& task, const std::string& type) {
    proto::SequencedEvent e;
    e.sequence = plugin_events_.size() + 1;
    e.event.task_id = task;
    e.event.type = type;
    e.event.message = type + " " + task;
    e.event.timestamp_unix_nanos = 5;
    e.event.annotations["k"] = "v";
    plugin_events_.push_back(e);
    FlushEvents();
  }
  void FlushEvents() {
    if (!events_waiting_.pending()) return;
    std::vector<proto::SequencedEvent> events;
    for (const auto& e : plugin_events_) {
      if (e.sequence > events_after_) events.push_back(e);
    }
    if (events.empty()) return;
    events_waiting_.Finish(proto::EncodeTaskEventsResponse(events, events.back().sequence));
  }

  bool Registered() { return drivers_.Find("fake") != nullptr && plugins_->Active("TaskDriver", "fake") != nullptr; }
  bool Wait(const std::function<bool()>& pred) { return RunUntil(loop_.get(), pred, 15 * kNanosPerSecond); }

  std::unique_ptr<Loop> loop_;
  std::string dir_;
  Registry drivers_;
  std::unique_ptr<plugin::Registry> plugins_;
  std::unique_ptr<TaskDriverHandler> handler_;
  std::unique_ptr<plugin::Watcher> watcher_;
  std::unique_ptr<FakePlugin> plugin_;
  std::vector<std::string> changed_;
  sdk::TaskConfig started_;
  int wait_calls_ = 0;
  int recover_calls_ = 0;
  std::vector<std::string> calls_;
  int exit_code_ = -1;
  wire::Responder waiting_;
  int event_calls_ = 0;
  std::vector<uint64_t> cursors_;
  std::vector<proto::SequencedEvent> plugin_events_;
  wire::Responder events_waiting_;
  uint64_t events_after_ = 0;
};

TEST_F(RemoteDriverTest, RegistersAsADriverAndStartsTasksThroughIt) {
  ServeDriver();
  ASSERT_TRUE(Wait([&] { return Registered(); }));
  Driver* d = drivers_.Find("fake");
  EXPECT_EQ(d->GetFingerprint().health, Health::kHealthy);
  EXPECT_EQ(d->GetFingerprint().attributes.at("driver.fake"), "1");
  EXPECT_TRUE(d->GetCapabilities().send_signals);

  TaskConfig c;
  c.id = "j.t.1";
  c.command = "/bin/true";
  c.args = {"a", "b"};
  c.env["K"] = "V";
  c.cgroup = "/sys/fs/cgroup/outpost.slice/j/t";
  c.SetJoined("/var/run/netns/outpost-j", "j-host");
  c.identity.switch_user = true;
  c.identity.uid = 80001;
  c.identity.groups = {80001, 5};
  c.rlimits.push_back({"nofile", 10, 20});
  c.driver_config = R"({"image":"x"})";
  bool done = false;
  Result<TaskHandle> got = Error(Code::kUnknown, "not yet");
  d->StartTask(c, [&](Result<TaskHandle> h) {
    got = std::move(h);
    done = true;
  });
  ASSERT_TRUE(Wait([&] { return done; }));
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(got->pid, 4242);
  EXPECT_EQ(got->version, 3);
  EXPECT_EQ(got->driver_state, std::string("st\0ate", 6));
  EXPECT_EQ(got->config.id, "j.t.1");  // outpost keeps its own config
  EXPECT_EQ(started_.command, "/bin/true");
  EXPECT_EQ(started_.args, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(started_.env.at("K"), "V");
  EXPECT_EQ(started_.cgroup, c.cgroup);
  EXPECT_EQ(started_.netns, c.Netns());
  EXPECT_EQ(started_.hostname, c.Hostname());
  EXPECT_TRUE(started_.switch_user);
  EXPECT_EQ(started_.uid, 80001u);
  EXPECT_EQ(started_.groups, (std::vector<uint32_t>{80001, 5}));
  ASSERT_EQ(started_.rlimits.size(), 1u);
  EXPECT_EQ(started_.rlimits[0].hard, 20u);
  EXPECT_EQ(started_.config_json, c.driver_config);
}

// WaitTask is a long poll: asked again when it runs out, and again after
// the connection dropped and came back; the exit arrives once.
TEST_F(RemoteDriverTest, WaitOutlivesDeadlinesAndReconnects) {
  ServeDriver();
  ASSERT_TRUE(Wait([&] { return Registered(); }));
  auto* d = static_cast<RemoteDriver*>(drivers_.Find("fake"));
  int exits = 0;
  ExitResult got;
  d->WaitTask("t1", [&](const ExitResult& e) {
    got = e;
    ++exits;
  });
  d->WaitTask("t1", [&](const ExitResult&) { ++exits; });  // a second waiter on the same task
  ASSERT_TRUE(Wait([&] { return wait_calls_ >= 3; }));     // deadlines passed, asked again
  EXPECT_EQ(exits, 0);
  int before = wait_calls_;
  size_t changes = changed_.size();
  plugin_->Drop();
  ASSERT_TRUE(Wait([&] { return changed_.size() > changes && plugins_->Active("TaskDriver", "fake"); }));
  // Asked again only once the task is recovered on the instance: a new
  // instance that does not know the task yet would answer "not found".
  ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_EQ(wait_calls_, before);
  TaskHandle h;
  h.config.id = "t1";
  bool recovered = false;
  d->RecoverTask(h, [&](Status st) { recovered = st.ok(); });
  ASSERT_TRUE(Wait([&] { return recovered && wait_calls_ > before; }));
  EXPECT_EQ(recover_calls_, 1);
  EXPECT_EQ(exits, 0);
  exit_code_ = 3;
  waiting_.Finish(proto::EncodeWaitTask(true, [] {
    sdk::ExitResult e;
    e.exit_code = 3;
    return e;
  }()));
  ASSERT_TRUE(Wait([&] { return exits == 2; }));
  EXPECT_EQ(got.exit_code, 3);
  EXPECT_EQ(d->pending_waits(), 0u);
  EXPECT_FALSE(changed_.empty());  // the reconnection was a change
}

// Two instances of one driver (an upgrade): new starts go to the newest,
// a task's calls to the instance that started it while that one is
// connected; when it goes, the task is recovered on the newest and its
// calls follow.
TEST_F(RemoteDriverTest, ATaskStaysWithItsInstanceUntilThatInstanceGoes) {
  auto a = ServeInstance("multi-a.sock", "a");
  ASSERT_TRUE(Wait([&] { return drivers_.Find("multi") != nullptr; }));
  Driver* d = drivers_.Find("multi");
  TaskConfig c;
  c.id = "t1";
  bool started = false;
  d->StartTask(c, [&](Result<TaskHandle> h) { started = h.ok(); });
  ASSERT_TRUE(Wait([&] { return started; }));
  size_t changes = changed_.size();
  auto b = ServeInstance("multi-b.sock", "b");
  ASSERT_TRUE(Wait([&] { return changed_.size() > changes; }));
  ASSERT_EQ(plugins_->Active("TaskDriver", "multi")->socket, dir_ + "/multi-b.sock");
  int answered = 0;
  auto count = [&](Status st) { answered += st.ok(); };
  d->StopTask("t1", kNanosPerSecond, "SIGTERM", count);
  TaskHandle h;
  h.config.id = "t1";
  d->RecoverTask(h, count);  // what the agent does at every change
  c.id = "t2";
  d->StartTask(c, [&](Result<TaskHandle> r) { answered += r.ok(); });
  d->StopTask("t2", kNanosPerSecond, "SIGTERM", count);
  ASSERT_TRUE(Wait([&] { return answered == 4; }));
  std::vector<std::string> on_a, on_b;  // each connection keeps its order
  for (const std::string& call : calls_) (call[0] == 'a' ? on_a : on_b).push_back(call);
  EXPECT_EQ(on_a, (std::vector<std::string>{"a StartTask", "a StopTask", "a RecoverTask"}));
  EXPECT_EQ(on_b, (std::vector<std::string>{"b StartTask", "b StopTask"}));
  // The old instance goes (its socket removed): t1 is recovered on b.
  calls_.clear();
  changes = changed_.size();
  a->Exit(/*remove=*/true);
  ASSERT_TRUE(Wait([&] { return changed_.size() > changes; }));
  d->RecoverTask(h, count);
  ASSERT_TRUE(Wait([&] { return answered == 5; }));
  d->StopTask("t1", kNanosPerSecond, "SIGTERM", count);
  ASSERT_TRUE(Wait([&] { return answered == 6; }));
  EXPECT_EQ(calls_, (std::vector<std::string>{"b RecoverTask", "b StopTask"}));
}

TEST_F(RemoteDriverTest, WhatTheDriverDoesNotOfferIsSaidPlainly) {
  ServeDriver(/*signals=*/false);
  ASSERT_TRUE(Wait([&] { return Registered(); }));
  Driver* d = drivers_.Find("fake");
  Status sig = Error(Code::kUnknown, "");
  Result<ExecResult> ex = Error(Code::kUnknown, "");
  int n = 0;
  d->SignalTask("t", "SIGHUP", [&](Status s) {
    sig = s;
    ++n;
  });
  d->ExecTask("t", {"ls"}, kNanosPerSecond, [&](Result<ExecResult> r) {
    ex = std::move(r);
    ++n;
  });
  ASSERT_TRUE(Wait([&] { return n == 2; }));
  EXPECT_EQ(sig.error().message(), "driver fake cannot signal tasks");
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.error().code(), Code::kUnimplemented);
  EXPECT_EQ(ex.error().message(), "driver fake does not implement ExecTask");
}

TEST_F(RemoteDriverTest, ADisconnectedDriverSaysSo) {
  ServeDriver();
  ASSERT_TRUE(Wait([&] { return Registered(); }));
  Driver* d = drivers_.Find("fake");
  size_t changes = changed_.size();
  plugin_->Exit(false);  // the process is gone; its socket file stays
  ASSERT_TRUE(Wait([&] { return plugins_->Active("TaskDriver", "fake") == nullptr; }));
  // Losing the last instance is not a change to act on (no recovery
  // through nothing): the grace period decides.
  EXPECT_EQ(changed_.size(), changes);
  EXPECT_EQ(d->GetFingerprint().health, Health::kUnhealthy);
  EXPECT_EQ(d->GetFingerprint().description, "driver fake is disconnected");
  Status st = OkStatus();
  bool done = false;
  d->StopTask("t", 0, "SIGTERM", [&](Status s) {
    st = s;
    done = true;
  });
  ASSERT_TRUE(Wait([&] { return done; }));
  EXPECT_EQ(st.error().code(), Code::kUnavailable);
  EXPECT_EQ(st.error().message(), "driver fake is disconnected");
}

TEST_F(RemoteDriverTest, ValidateRefusesBuiltinNamesBadNamesAndOtherVersions) {
  RemoteDriver builtin(loop_.get(), plugins_.get(), "exec", {});
  ASSERT_TRUE(drivers_.Add(&builtin).ok());
  plugin::Info info;
  info.type = "TaskDriver";
  info.name = "exec";
  info.supported_versions = {"v1"};
  auto r = handler_->Validate(info);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "driver name \"exec\" is a built-in driver's");
  info.name = "Fancy";
  EXPECT_NE(handler_->Validate(info).error().message().find("lower-case"), std::string::npos);
  info.name = "fancy";
  info.supported_versions = {"v0", "v2"};
  EXPECT_EQ(handler_->Validate(info).error().message(),
            "none of the supported versions [v0, v2] is one this agent speaks (v1)");
  info.supported_versions = {"v2", "v1"};
  auto v = handler_->Validate(info);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "v1");
  drivers_.Remove("exec");
}

// A driver's ConfigSchema decides which `config` a job may give it: unknown
// fields, wrong types and missing required ones are each named; a driver
// without one takes anything; a malformed one refuses the registration.
TEST_F(RemoteDriverTest, ConfigIsCheckedAgainstTheDriversSchema) {
  ServeDriver();
  plugin_->Handle(kService, "ConfigSchema", [](const wire::CallContext&, std::string_view, wire::Responder r) {
    r.Finish(proto::EncodeConfigSchema({{"image", "string", true, ""}, {"mounts", "list", false, ""}}));
  });
  ASSERT_TRUE(Wait([&] { return Registered(); }));
  Driver* d = drivers_.Find("fake");
  EXPECT_TRUE(d->CheckConfig(R"({"image":"busybox","mounts":["a"]})").ok());
  Status st = d->CheckConfig(R"({"extra":1,"mounts":"a"})");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(),
            "config.extra: unknown field for driver fake (it takes: image, mounts)\n"
            "config.mounts: expected list for driver fake\n"
            "config.image: required by driver fake");
  EXPECT_EQ(d->CheckConfig("").error().message(), "config.image: required by driver fake");
}

// Nested fields (an object's, a list of objects' items) and absolute paths
// are checked at submission, each problem with its path.
TEST_F(RemoteDriverTest, NestedSchemaFieldsAreCheckedWithTheirPaths) {
  ServeDriver();
  plugin_->Handle(kService, "ConfigSchema", [](const wire::CallContext&, std::string_view, wire::Responder r) {
    sdk::ConfigField mounts{"mounts", "list", false, ""};
    mounts.fields = {{"destination", "string", true, "", {}, "absolute_path"}, {"ro", "bool", false, ""}};
    sdk::ConfigField net{"net", "object", false, ""};
    net.fields = {{"mode", "string", true, ""}};
    sdk::ConfigField paths{"paths", "list", false, ""};
    paths.format = "absolute_path";
    r.Finish(proto::EncodeConfigSchema({mounts, net, paths}));
  });
  ASSERT_TRUE(Wait([&] { return Registered(); }));
  Driver* d = drivers_.Find("fake");
  EXPECT_TRUE(d->CheckConfig(R"({"mounts":[{"destination":"/d","ro":true}],"net":{"mode":"x"},"paths":["/a"]})").ok());
  Status st = d->CheckConfig(R"({"mounts":[{"destination":"d","ro":1},{"x":1},5],"net":{},"paths":["a",1]})");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(),
            "config.mounts[0].destination: must be an absolute path, got \"d\"\n"
            "config.mounts[0].ro: expected bool for driver fake\n"
            "config.mounts[1].x: unknown field (it takes: destination, ro)\n"
            "config.mounts[1].destination: required\n"
            "config.mounts[2]: expected an object\n"
            "config.net.mode: required\n"
            "config.paths[0]: must be an absolute path (a string starting with /)\n"
            "config.paths[1]: must be an absolute path (a string starting with /)");
}

TEST(RemoteCodec, SchemaNestingIsOneLevelAndFormatsKnown) {
  sdk::ConfigField inner{"b", "object", false, ""};
  inner.fields = {{"c", "string", true, ""}};  // a third level: not sent
  sdk::ConfigField outer{"a", "object", false, ""};
  outer.fields = {inner};
  auto one = remote::DecodeConfigSchema(*proto::EncodeConfigSchema({outer}));
  ASSERT_TRUE(one.ok()) << one.error().message();
  ASSERT_EQ((*one)[0].fields.size(), 1u);
  EXPECT_TRUE((*one)[0].fields[0].fields.empty());
  sdk::ConfigField bad{"p", "string", false, ""};
  bad.format = "url";
  EXPECT_EQ(remote::DecodeConfigSchema(*proto::EncodeConfigSchema({bad})).error().message(),
            "ConfigSchema.fields[0].format must be absolute_path or empty");
  sdk::ConfigField scalar{"n", "number", false, ""};
  scalar.fields = {{"x", "bool", false, ""}};
  EXPECT_EQ(remote::DecodeConfigSchema(*proto::EncodeConfigSchema({scalar})).error().message(),
            "ConfigSchema.fields[0].fields: only for object or list");
}

TEST_F(RemoteDriverTest, ADriverWithoutASchemaTakesAnyConfigAndABadSchemaIsRefused) {
  ServeDriver();
  ASSERT_TRUE(Wait([&] { return Registered(); }));
  EXPECT_TRUE(drivers_.Find("fake")->CheckConfig(R"({"anything":[1,2]})").ok());
  plugin_->Exit(true);
  ASSERT_TRUE(Wait([&] { return plugins_->Active("TaskDriver", "fake") == nullptr; }));
  ServeDriver();
  plugin_->Handle(kService, "ConfigSchema", [](const wire::CallContext&, std::string_view, wire::Responder r) {
    r.Finish(proto::EncodeConfigSchema({{"a", "string", false, ""}, {"a", "number", false, ""}}));
  });
  ASSERT_TRUE(Wait([&] { return !plugin_->notified.empty(); }));
  EXPECT_FALSE(plugin_->notified[0].first);
  EXPECT_EQ(plugin_->notified[0].second, "ConfigSchema: ConfigSchema names field a twice");
}

// What a driver answers is checked: out-of-range values are refused with
// the field named.
TEST(RemoteCodec, AnswersOutOfRangeAreRefused) {
  sdk::ExitResult e;
  e.exit_code = 300;
  auto bytes = proto::EncodeWaitTask(true, e);
  ASSERT_TRUE(bytes.ok());
  ExitResult out;
  auto r = remote::DecodeWaitTask(*bytes, &out);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("WaitTaskResponse.result"), std::string::npos);
  sdk::TaskHandle h;
  h.version = 0;
  auto resp = proto::EncodeStartTaskResponse(h);
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(remote::DecodeStartTaskResponse(*resp, TaskConfig{}).error().message(),
            "StartTaskResponse.handle.version must be > 0");
  EXPECT_FALSE(remote::DecodeCapabilities("\xff\xff").ok());
}

// NRI mounts, devices and oom_score_adj reach a plugin only in oci_spec:
// the flags count only with oci_runtime, which also carries the spec.
TEST(RemoteCodec, NriCapabilitiesCountOnlyForAnOciRuntimeDriver) {
  sdk::Capabilities c;
  c.mounts = c.devices = c.oom_score_adj = true;
  auto bytes = proto::EncodeCapabilities(c);
  ASSERT_TRUE(bytes.ok());
  auto plain = remote::DecodeCapabilities(*bytes);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->mounts || plain->devices || plain->oom_score_adj || plain->oci_runtime);
  c.oci_runtime = true;
  bytes = proto::EncodeCapabilities(c);
  ASSERT_TRUE(bytes.ok());
  auto oci = remote::DecodeCapabilities(*bytes);
  ASSERT_TRUE(oci.ok());
  EXPECT_TRUE(oci->mounts && oci->devices && oci->oom_score_adj && oci->oci_runtime);
  TaskConfig t;
  t.id = "j.t";
  t.oci_spec = "{\"ociVersion\": \"1.0.2\"}";
  auto req = remote::EncodeStartTask(t);
  ASSERT_TRUE(req.ok());
  auto back = proto::DecodeStartTask(*req);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->oci_spec, t.oci_spec);
}

// Network isolation: empty (drivers from before the field) joins job
// networks; otherwise only with "group"; unknown modes are refused.
TEST(RemoteCodec, NetworkIsolationSaysWhetherTheDriverJoinsJobNetworks) {
  sdk::Capabilities c;
  auto none = remote::DecodeCapabilities(*proto::EncodeCapabilities(c));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->JoinsJobNetworks());
  c.network_isolation = {"host"};
  auto host = remote::DecodeCapabilities(*proto::EncodeCapabilities(c));
  ASSERT_TRUE(host.ok());
  EXPECT_FALSE(host->JoinsJobNetworks());
  c.network_isolation = {"host", "group", "none"};
  auto all = remote::DecodeCapabilities(*proto::EncodeCapabilities(c));
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->JoinsJobNetworks());
  EXPECT_EQ(all->network_isolation.size(), 3u);
  c.network_isolation = {"bridge"};
  auto bad = remote::DecodeCapabilities(*proto::EncodeCapabilities(c));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "Capabilities.network_isolation: unknown mode \"bridge\" (host, group or none)");
}

}  // namespace
}  // namespace outpost::driver

namespace outpost::driver {
namespace {

// TaskEvents: one long poll kept going across deadlines and a dropped
// connection, with the cursor moving on; every event reaches every
// subscriber once.
TEST_F(RemoteDriverTest, TaskEventsAreRelayedAcrossDeadlinesAndReconnects) {
  ServeDriver();
  ServeEvents();
  ASSERT_TRUE(Wait([&] { return Registered(); }));
  auto* d = static_cast<RemoteDriver*>(drivers_.Find("fake"));
  std::vector<TaskEvent> a, b;
  d->SubscribeEvents([&](const TaskEvent& e) { a.push_back(e); });
  uint64_t sub_b = d->SubscribeEvents([&](const TaskEvent& e) { b.push_back(e); });
  ASSERT_TRUE(Wait([&] { return event_calls_ >= 2; }));  // a deadline passed, asked again
  EXPECT_TRUE(d->polling_events());
  Emit("t1", "pulling");
  Emit("t1", "pulled");
  ASSERT_TRUE(Wait([&] { return a.size() == 2; }));
  EXPECT_EQ(a[0].task_id, "t1");
  EXPECT_EQ(a[0].type, "pulling");
  EXPECT_EQ(a[0].message, "pulling t1");
  EXPECT_EQ(a[0].timestamp_unix_nanos, 5);
  EXPECT_EQ(a[0].annotations.at("k"), "v");
  EXPECT_EQ(b.size(), 2u);
  d->UnsubscribeEvents(sub_b);
  int before = event_calls_;
  plugin_->Drop();
  ASSERT_TRUE(Wait([&] { return event_calls_ > before && plugins_->Active("TaskDriver", "fake"); }));
  EXPECT_EQ(cursors_.back(), 2u);  // the new connection goes on from the cursor
  Emit("t2", "oom");
  ASSERT_TRUE(Wait([&] { return a.size() == 3; }));
  EXPECT_EQ(a[2].type, "oom");
  EXPECT_EQ(b.size(), 2u);
  for (int i = 0; i < 5; ++i) (void)loop_->RunOnce(50 * kNanosPerMilli);
  EXPECT_EQ(a.size(), 3u);  // nothing twice
}

TEST_F(RemoteDriverTest, ADriverWithoutTaskEventsIsNotAskedAgain) {
  ServeDriver();
  ASSERT_TRUE(Wait([&] { return Registered(); }));
  auto* d = static_cast<RemoteDriver*>(drivers_.Find("fake"));
  d->SubscribeEvents([](const TaskEvent&) { ADD_FAILURE() << "no events expected"; });
  ASSERT_TRUE(Wait([&] { return !d->polling_events(); }));
  for (int i = 0; i < 10; ++i) (void)loop_->RunOnce(50 * kNanosPerMilli);
  EXPECT_FALSE(d->polling_events());
}

TEST(RemoteCodecTest, TaskEventsRoundTripAndBadRepliesAreRefused) {
  auto req = remote::EncodeTaskEvents(41);
  ASSERT_TRUE(req.ok());
  auto after = proto::DecodeTaskEvents(*req);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, 41u);

  std::vector<proto::SequencedEvent> b;
  for (uint64_t seq : {3, 7}) {
    proto::SequencedEvent e;
    e.sequence = seq;
    e.event.task_id = "j.t";
    e.event.type = "restarting";
    e.event.annotations["why"] = "oom";
    b.push_back(e);
  }
  auto bytes = proto::EncodeTaskEventsResponse(b, 7);
  ASSERT_TRUE(bytes.ok());
  auto got = remote::DecodeTaskEventsResponse(*bytes);
  ASSERT_TRUE(got.ok()) << got.error().message();
  ASSERT_EQ(got->events.size(), 2u);
  EXPECT_EQ(got->events[1].sequence, 7u);
  EXPECT_EQ(got->events[1].event.annotations.at("why"), "oom");
  EXPECT_EQ(got->next, 7u);
  // Every truncation decodes or fails; none crashes.
  for (size_t n = 0; n < bytes->size(); ++n) (void)remote::DecodeTaskEventsResponse(bytes->substr(0, n));

  auto down = b;
  down[1].sequence = 2;
  EXPECT_FALSE(remote::DecodeTaskEventsResponse(*proto::EncodeTaskEventsResponse(down, 7)).ok());
  EXPECT_FALSE(remote::DecodeTaskEventsResponse(*proto::EncodeTaskEventsResponse(b, 5)).ok());  // next behind
  auto untyped = b;
  untyped[0].event.type = "";
  EXPECT_FALSE(remote::DecodeTaskEventsResponse(*proto::EncodeTaskEventsResponse(untyped, 7)).ok());
  auto e = remote::DecodeTaskEventsResponse(*proto::EncodeTaskEventsResponse({}, 9));
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->events.empty());
  EXPECT_EQ(e->next, 9u);
}

TEST(RemoteCodec, TaskIdsRoundTripAndWhatIsNoTaskIdIsRefused) {
  auto bytes = proto::EncodeTaskIds({"web.api", "web.db"});
  ASSERT_TRUE(bytes.ok());
  auto ids = remote::DecodeTaskIds(*bytes);
  ASSERT_TRUE(ids.ok()) << ids.error().message();
  EXPECT_EQ(*ids, (std::vector<std::string>{"web.api", "web.db"}));
  for (size_t n = 0; n < bytes->size(); ++n) (void)remote::DecodeTaskIds(bytes->substr(0, n));
  for (const std::string& bad : {std::string(), std::string("../x"), std::string(300, 'a')}) {
    auto got = remote::DecodeTaskIds(*proto::EncodeTaskIds({"ok", bad}));
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_NE(got.error().message().find("TaskIdsResponse.ids[1]: not a task id"), std::string::npos);
  }
}

}  // namespace
}  // namespace outpost::driver
