// plugin/watcher and plugin/registry against real unix sockets in a temp
// plugins dir, served by fake plugins on the same loop: kubelet's
// pluginwatcher conformance list (spec B5 1-9) plus what outpost does
// better (rename away, retry after a failed Register, peer uid, backoff
// reset on a new appearance) and 100 plugins at once.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/sys.h"
#include "plugin/registry.h"
#include "plugin/watcher.h"
#include "pluginregistration.pb.h"
#include "plugin_test_util.h"
#include "test_util.h"
#include "wire/rpc_server.h"

namespace outpost::plugin {
namespace {

using outpost::testing::FakePlugin;
using outpost::testing::RunUntil;

constexpr const char kType[] = "TestPlugin";

class FakeHandler : public Handler {
 public:
  std::set<std::string> refuse_names;  // Validate fails
  int fail_registers = 0;              // the next N Register calls fail
  std::vector<std::string> registered, deregistered, changed, expired;

  const char* type() const override { return kType; }
  Result<std::string> Validate(const Info& info) override {
    if (refuse_names.count(info.name)) return Error(Code::kInvalidArgument, "name " + info.name + " is refused");
    for (const std::string& v : info.supported_versions) {
      if (v == "v1") return v;
    }
    return Error(Code::kInvalidArgument, "none of the supported versions is v1");
  }
  void Register(const Instance& inst, std::function<void(Status)> done) override {
    EXPECT_NE(inst.client, nullptr);
    if (fail_registers > 0) {
      --fail_registers;
      return done(Error(Code::kUnavailable, "handler says no"));
    }
    registered.push_back(inst.name);
    done(OkStatus());
  }
  void Deregister(const Instance& inst) override { deregistered.push_back(inst.name); }
  void Changed(const std::string& name) override { changed.push_back(name); }
  void Expired(const std::string& name) override { expired.push_back(name); }
};

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetLevel(log::Level::kError);
    loop_ = outpost::testing::MakeLoop();
    ASSERT_NE(loop_, nullptr);
    dir_ = outpost::testing::MakeTempDir("/tmp", "plugins");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    watcher_.reset();
    registry_.reset();
    plugins_.clear();
    (void)sys::RemoveTree(dir_);
    log::SetLevel(log::Level::kInfo);
  }

  void StartRegistry(RegistryOptions ro = {}) {
    ro.on_event = [this](const Event& e) { events_.push_back(e); };
    registry_ = std::make_unique<Registry>(loop_.get(), ro);
    ASSERT_TRUE(registry_->AddHandler(&handler_).ok());
  }
  void Start(WatcherOptions wo = {}, RegistryOptions ro = {}) {
    if (!registry_) StartRegistry(ro);
    wo.dir = dir_;
    wo.on_event = [this](const Event& e) { events_.push_back(e); };
    auto w = Watcher::Start(loop_.get(), registry_.get(), wo);
    ASSERT_TRUE(w.ok()) << w.error().message();
    watcher_ = std::move(*w);
  }
  FakePlugin* Serve(const std::string& rel, const std::string& name) {
    auto p = FakePlugin::Serve(loop_.get(), dir_ + "/" + rel, name);
    FakePlugin* raw = p.get();
    plugins_.push_back(std::move(p));
    return raw;
  }
  size_t Instances() const { return registry_->instance_count(); }
  // No registration attempt is running (each plugin has had its answer).
  bool Settled() const {
    for (const auto& s : watcher_->Sockets()) {
      if (s.state == "registering") return false;
    }
    return true;
  }
  bool WaitFor(const std::function<bool()>& pred, int64_t timeout = 10 * kNanosPerSecond) {
    return RunUntil(loop_.get(), pred, timeout);
  }
  int Count(const std::string& kind, const std::string& name = "") const {
    return static_cast<int>(std::count_if(events_.begin(), events_.end(), [&](const Event& e) {
      return e.kind == kind && (name.empty() || e.name == name);
    }));
  }
  // Runs the loop for d (a timer marks the end: no sleeping).
  void RunFor(int64_t d) {
    bool done = false;
    loop_->AddTimer(d, [&] { done = true; });
    ASSERT_TRUE(WaitFor([&] { return done; }, d + 10 * kNanosPerSecond));
  }

  std::unique_ptr<Loop> loop_;
  std::string dir_;
  FakeHandler handler_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<Watcher> watcher_;
  std::vector<std::unique_ptr<FakePlugin>> plugins_;
  std::vector<Event> events_;
};

// B5.1: sockets made one after another are registered; each goes when its
// plugin removes its socket.
TEST_F(PluginTest, SocketsAppearAndGoOneByOne) {
  Start();
  for (int i = 0; i < 10; ++i) {
    FakePlugin* p = Serve("p" + std::to_string(i) + ".sock", "p" + std::to_string(i));
    ASSERT_TRUE(WaitFor([&] { return Instances() == static_cast<size_t>(i + 1) && !p->notified.empty(); }));
    EXPECT_EQ(p->notified.back(), std::make_pair(true, std::string()));
  }
  for (int i = 0; i < 10; ++i) {
    plugins_[i]->Exit(true);
    ASSERT_TRUE(WaitFor([&] { return Instances() == static_cast<size_t>(9 - i); }));
  }
  EXPECT_EQ(handler_.deregistered.size(), 10u);
  EXPECT_TRUE(watcher_->Sockets().empty());
}

// B5.2 and B4: one name on ten sockets is one plugin with ten instances;
// calls go to the newest connected one, and the next takes over.
TEST_F(PluginTest, SameNameOnManySocketsIsOnePluginNewestWins) {
  Start();
  for (int i = 0; i < 10; ++i) {
    Serve("i" + std::to_string(i) + ".sock", "same");
    ASSERT_TRUE(WaitFor([&] { return Instances() == static_cast<size_t>(i + 1); }));
  }
  auto list = registry_->List();
  ASSERT_EQ(list.size(), 1u);
  ASSERT_EQ(list[0].instances.size(), 10u);
  const Instance* active = registry_->Active(kType, "same");
  ASSERT_NE(active, nullptr);
  EXPECT_EQ(active->socket, dir_ + "/i9.sock");
  // The newest goes away: the one before it takes over, nothing expires.
  plugins_[9]->Exit(true);
  ASSERT_TRUE(WaitFor([&] { return Instances() == 9; }));
  active = registry_->Active(kType, "same");
  ASSERT_NE(active, nullptr);
  EXPECT_EQ(active->socket, dir_ + "/i8.sock");
  // A disconnected newer instance does not get the calls.
  ASSERT_TRUE(WaitFor([&] { return Settled() && plugins_[8]->open_connections() == 1; }));
  plugins_[8]->Drop();
  ASSERT_TRUE(WaitFor([&] { return Count("disconnected", "same") == 2; }));  // i9's, then i8's
  active = registry_->Active(kType, "same");
  ASSERT_NE(active, nullptr);
  EXPECT_EQ(active->socket, dir_ + "/i7.sock");
  EXPECT_TRUE(handler_.expired.empty());
  EXPECT_EQ(registry_->List()[0].expires_unix_nanos, 0);
}

// B5.3 and B5.6: re-creating one socket path ten times, each with a new
// name, leaves one socket entry and one instance: each appearance
// deregisters the last one and registers anew.
TEST_F(PluginTest, RecreatedSocketIsANewInstance) {
  Start();
  uint64_t last_appearance = 0;
  for (int i = 0; i < 10; ++i) {
    if (i > 0) plugins_.back()->Exit(true);
    FakePlugin* p = Serve("re.sock", "n" + std::to_string(i));
    ASSERT_TRUE(WaitFor([&] {
      const Instance* a = registry_->Active(kType, p->name);
      return a != nullptr && Instances() == 1;
    })) << i;
    auto socks = watcher_->Sockets();
    ASSERT_EQ(socks.size(), 1u);
    EXPECT_GT(socks[0].appearance, last_appearance);
    last_appearance = socks[0].appearance;
    EXPECT_EQ(socks[0].name, p->name);
  }
  EXPECT_EQ(handler_.deregistered.size(), 9u);
  EXPECT_EQ(handler_.registered.size(), 10u);
}

// B5.4: sockets there before the watcher starts are registered.
TEST_F(PluginTest, SocketsPresentAtStartAreRegistered) {
  StartRegistry();
  for (int i = 0; i < 10; ++i) Serve("pre" + std::to_string(i) + ".sock", "pre" + std::to_string(i));
  Start();
  ASSERT_TRUE(WaitFor([&] { return Instances() == 10; }));
}

// B5.5: dot names and other files are ignored; sockets in nested
// directories are found, also in directories made later.
TEST_F(PluginTest, DotNamesAndFilesIgnoredNestedDirsFound) {
  ASSERT_EQ(::mkdir((dir_ + "/a").c_str(), 0700), 0);
  Serve("a/early.sock", "early");
  Serve(".hidden.sock", "hidden");
  ASSERT_EQ(::mkdir((dir_ + "/.dotdir").c_str(), 0700), 0);
  Serve(".dotdir/x.sock", "in-dotdir");
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/file.sock", "not a socket", 0600).ok());
  Start();
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1; }));
  ASSERT_EQ(::mkdir((dir_ + "/b").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((dir_ + "/b/c").c_str(), 0700), 0);
  Serve("b/c/late.sock", "late");
  ASSERT_TRUE(WaitFor([&] { return Instances() == 2; }));
  // Give the hidden ones every chance to be (wrongly) picked up.
  watcher_->Rescan();
  RunFor(200 * kNanosPerMilli);
  EXPECT_EQ(Instances(), 2u);
  EXPECT_NE(registry_->Active(kType, "early"), nullptr);
  EXPECT_NE(registry_->Active(kType, "late"), nullptr);
  EXPECT_EQ(registry_->Active(kType, "hidden"), nullptr);
  EXPECT_EQ(registry_->Active(kType, "in-dotdir"), nullptr);
  for (const auto& p : plugins_) {
    if (p->name == "hidden" || p->name == "in-dotdir") {
      EXPECT_TRUE(p->getinfo_mono.empty()) << p->name;
    }
  }
}

// B5.7: the plugin is told why it was refused, or that it is registered.
TEST_F(PluginTest, RegistrationStatusTellsThePluginWhy) {
  handler_.refuse_names = {"bad"};
  Start();
  FakePlugin* unknown = Serve("u.sock", "u");
  unknown->type = "NoSuchType";
  FakePlugin* bad = Serve("bad.sock", "bad");
  FakePlugin* old = Serve("old.sock", "old");
  old->versions = {"v0", "v9"};
  FakePlugin* good = Serve("good.sock", "good");
  ASSERT_TRUE(WaitFor([&] {
    return Settled() && !unknown->notified.empty() && !bad->notified.empty() && !old->notified.empty() &&
           !good->notified.empty();
  }));
  EXPECT_EQ(unknown->notified[0], std::make_pair(false, std::string("no handler registered for plugin type NoSuchType")));
  EXPECT_EQ(bad->notified[0], std::make_pair(false, std::string("name bad is refused")));
  EXPECT_FALSE(old->notified[0].first);
  EXPECT_EQ(good->notified[0], std::make_pair(true, std::string()));
  EXPECT_EQ(Instances(), 1u);
  auto socks = watcher_->Sockets();
  ASSERT_EQ(socks.size(), 4u);
  for (const auto& s : socks) {
    if (s.path == dir_ + "/good.sock") {
      EXPECT_EQ(s.state, "registered");
    } else {
      EXPECT_EQ(s.state, "waiting") << s.path;
      EXPECT_EQ(s.failures, 1) << s.path;
      EXPECT_FALSE(s.last_error.empty()) << s.path;
    }
  }
}

// B5.8: failures are retried after 0.5 s, 1 s, 2 s..., one attempt at a
// time. Lower bounds only: a loaded machine may be later, never earlier.
TEST_F(PluginTest, FailedAttemptsBackOffAndNeverOverlap) {
  handler_.refuse_names = {"slow"};
  Start();
  FakePlugin* p = Serve("slow.sock", "slow");
  ASSERT_TRUE(WaitFor([&] { return p->getinfo_mono.size() >= 4; }, 30 * kNanosPerSecond));
  const int64_t want[] = {500, 1000, 2000};
  for (int i = 0; i < 3; ++i) {
    int64_t gap = p->getinfo_mono[i + 1] - p->getinfo_mono[i];
    EXPECT_GE(gap, want[i] * kNanosPerMilli) << "attempt " << i + 2;
  }
  // One at a time: every attempt was answered before the next began.
  EXPECT_GE(p->notified.size() + 1, p->getinfo_mono.size());
}

// The backoff doubles up to its cap, and a socket that appears again starts
// over (kubelet keeps backing off: node-driver-registrar#206).
TEST_F(PluginTest, BackoffIsCappedAndResetByANewAppearance) {
  handler_.refuse_names = {"x"};
  WatcherOptions wo;
  wo.backoff_initial_nanos = 10 * kNanosPerMilli;
  wo.backoff_max_nanos = 40 * kNanosPerMilli;
  Start(wo);
  FakePlugin* p = Serve("x.sock", "x");
  std::vector<int64_t> seen;  // the delay before each next attempt
  ASSERT_TRUE(WaitFor([&] {
    auto s = watcher_->Sockets();
    if (!s.empty() && s[0].state == "waiting" && (seen.empty() || static_cast<int>(seen.size()) < s[0].failures)) {
      seen.push_back(s[0].retry_in_nanos);
    }
    return seen.size() >= 5;
  }));
  EXPECT_EQ(seen[0], 10 * kNanosPerMilli);
  EXPECT_EQ(seen[1], 20 * kNanosPerMilli);
  EXPECT_EQ(seen[2], 40 * kNanosPerMilli);
  EXPECT_EQ(seen[4], 40 * kNanosPerMilli);
  p->Exit(true);
  handler_.refuse_names.clear();
  FakePlugin* again = Serve("x.sock", "x");
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1; }));
  EXPECT_EQ(again->getinfo_mono.size(), 1u);  // at once, not after a backoff
}

// kubernetes#118317: a Register that failed is retried while the socket
// is there (kubelet records it as registered first and never retries).
TEST_F(PluginTest, FailedRegisterIsRetriedWithoutRecreatingTheSocket) {
  handler_.fail_registers = 2;
  Start();
  FakePlugin* p = Serve("r.sock", "r");
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1 && Settled(); }));
  ASSERT_EQ(p->notified.size(), 3u);
  EXPECT_EQ(p->notified[0], std::make_pair(false, std::string("handler says no")));
  EXPECT_EQ(p->notified[2], std::make_pair(true, std::string()));
  EXPECT_EQ(handler_.registered, std::vector<std::string>{"r"});
}

// Renaming a socket away deregisters it (kubelet ignores renames), whether
// out of the dir or to a dot name; renamed back in, it registers again.
TEST_F(PluginTest, RenameAwayDeregisters) {
  std::string outside = outpost::testing::MakeTempDir("/tmp", "plugins-out");
  Start();
  Serve("m.sock", "m");
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1; }));
  ASSERT_EQ(::rename((dir_ + "/m.sock").c_str(), (outside + "/m.sock").c_str()), 0);
  ASSERT_TRUE(WaitFor([&] { return Instances() == 0; }));
  EXPECT_EQ(handler_.deregistered, std::vector<std::string>{"m"});
  ASSERT_EQ(::rename((outside + "/m.sock").c_str(), (dir_ + "/m.sock").c_str()), 0);
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1; }));
  ASSERT_EQ(::rename((dir_ + "/m.sock").c_str(), (dir_ + "/.m.sock").c_str()), 0);
  ASSERT_TRUE(WaitFor([&] { return Instances() == 0; }));
  EXPECT_EQ(handler_.deregistered.size(), 2u);
  (void)sys::RemoveTree(outside);
}

// Only root and the agent's uid may serve a plugin socket.
TEST_F(PluginTest, PeerWithAnotherUidIsRefused) {
  WatcherOptions wo;
  wo.allowed_uids = {::geteuid() + 4242};
  Start(wo);
  FakePlugin* p = Serve("o.sock", "o");
  ASSERT_TRUE(WaitFor([&] { return Count("refused") >= 1; }));
  EXPECT_TRUE(p->getinfo_mono.empty());
  EXPECT_EQ(Instances(), 0u);
  auto socks = watcher_->Sockets();
  ASSERT_EQ(socks.size(), 1u);
  EXPECT_NE(socks[0].last_error.find("is served by uid " + std::to_string(::geteuid())), std::string::npos)
      << socks[0].last_error;
}

TEST_F(PluginTest, HundredPluginsAtOnce) {
  Start();
  for (int i = 0; i < 100; ++i) Serve("h" + std::to_string(i) + ".sock", "h" + std::to_string(i));
  ASSERT_TRUE(WaitFor([&] { return Instances() == 100 && Settled(); }, 30 * kNanosPerSecond));
  for (const auto& p : plugins_) {
    ASSERT_EQ(p->notified.size(), 1u) << p->name;
    EXPECT_TRUE(p->notified[0].first);
  }
}

// B4 and B5.9: a dropped connection is not a deregistration: the instance
// is reconnected, and the plugin is cleaned up only when no instance is
// connected for the whole grace period.
TEST_F(PluginTest, DroppedConnectionReconnectsWithinGrace) {
  RegistryOptions ro;
  ro.grace_nanos = 60 * kNanosPerSecond;
  Start({}, ro);
  FakePlugin* p = Serve("g.sock", "g");
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1 && Settled() && p->open_connections() == 1; }));
  p->Drop();
  ASSERT_TRUE(WaitFor([&] { return Count("reconnected") == 1; }));
  EXPECT_EQ(Count("disconnected"), 1);
  EXPECT_EQ(Instances(), 1u);
  ASSERT_NE(registry_->Active(kType, "g"), nullptr);
  EXPECT_EQ(registry_->List()[0].expires_unix_nanos, 0);
  EXPECT_TRUE(handler_.deregistered.empty());
  EXPECT_TRUE(handler_.expired.empty());
}

TEST_F(PluginTest, NoConnectedInstanceForTheGracePeriodExpires) {
  RegistryOptions ro;
  ro.grace_nanos = 300 * kNanosPerMilli;
  Start({}, ro);
  FakePlugin* p = Serve("e.sock", "e");
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1; }));
  int64_t lost = MonotonicNanos();
  p->Exit(false);  // the process died; its socket file stays
  ASSERT_TRUE(WaitFor([&] { return Count("disconnected") == 1; }));
  ASSERT_NE(registry_->List()[0].expires_unix_nanos, 0);
  ASSERT_TRUE(WaitFor([&] { return handler_.expired.size() == 1; }));
  EXPECT_GE(MonotonicNanos() - lost, ro.grace_nanos);
  EXPECT_EQ(Instances(), 1u);  // still there, still reconnecting: only the socket going ends it
  EXPECT_TRUE(handler_.deregistered.empty());
}

// A plugin restarted by its supervisor: its socket goes, a new one comes
// within the grace period: nothing expires.
TEST_F(PluginTest, PluginRestartedWithinGraceDoesNotExpire) {
  RegistryOptions ro;
  ro.grace_nanos = 500 * kNanosPerMilli;
  Start({}, ro);
  FakePlugin* p = Serve("s.sock", "s");
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1; }));
  p->Exit(true);
  ASSERT_TRUE(WaitFor([&] { return Instances() == 0; }));
  ASSERT_EQ(registry_->List().size(), 1u);  // kept through the grace period
  Serve("s.sock", "s");
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1; }));
  RunFor(ro.grace_nanos + 100 * kNanosPerMilli);
  EXPECT_TRUE(handler_.expired.empty());
  // Once gone for good, it expires and leaves the list.
  plugins_.back()->Exit(true);
  ASSERT_TRUE(WaitFor([&] { return handler_.expired.size() == 1; }));
  EXPECT_TRUE(registry_->List().empty());
}

// One endpoint registers once per plugin; the plugin is told so.
TEST_F(PluginTest, SameEndpointTwiceIsRefused) {
  Start();
  FakePlugin* a = Serve("a.sock", "dup");
  ASSERT_TRUE(WaitFor([&] { return Instances() == 1; }));
  FakePlugin* b = Serve("b.sock", "dup");
  b->endpoint = dir_ + "/a.sock";
  ASSERT_TRUE(WaitFor([&] { return !b->notified.empty(); }));
  EXPECT_FALSE(b->notified[0].first);
  EXPECT_NE(b->notified[0].second.find("already registered"), std::string::npos) << b->notified[0].second;
  EXPECT_EQ(Instances(), 1u);
  EXPECT_EQ(a->notified.size(), 1u);
}

// An endpoint other than the registration socket: the instance's
// connection goes there, and it is reconnected there.
TEST_F(PluginTest, SeparateEndpointIsWhereTheConnectionGoes) {
  Start();
  std::string ep_dir = outpost::testing::MakeTempDir("/tmp", "plugins-ep");
  auto service = FakePlugin::Serve(loop_.get(), ep_dir + "/svc.sock", "svc");
  FakePlugin* reg = Serve("reg.sock", "svc");
  reg->endpoint = ep_dir + "/svc.sock";
  // The registration connection is closed after the sequence.
  ASSERT_TRUE(WaitFor(
      [&] { return Instances() == 1 && Settled() && service->open_connections() == 1 && reg->open_connections() == 0; }));
  EXPECT_EQ(registry_->Active(kType, "svc")->endpoint, ep_dir + "/svc.sock");
  service->Drop();
  ASSERT_TRUE(WaitFor([&] { return Count("reconnected") == 1 && service->open_connections() == 1; }));
  service.reset();
  (void)sys::RemoveTree(ep_dir);
}

TEST_F(PluginTest, MalformedInfoIsRefusedWithTheField) {
  Start();
  FakePlugin* p = Serve("m.sock", "bad\x01name");  // a name may hold '/' (resource names), not control bytes
  ASSERT_TRUE(WaitFor([&] { return !p->notified.empty(); }));
  EXPECT_FALSE(p->notified[0].first);
  EXPECT_NE(p->notified[0].second.find("PluginInfo.name"), std::string::npos) << p->notified[0].second;
  FakePlugin* q = Serve("q.sock", "q");
  q->endpoint = "relative.sock";
  ASSERT_TRUE(WaitFor([&] { return !q->notified.empty(); }));
  EXPECT_NE(q->notified[0].second.find("PluginInfo.endpoint"), std::string::npos) << q->notified[0].second;
}

}  // namespace
}  // namespace outpost::plugin
