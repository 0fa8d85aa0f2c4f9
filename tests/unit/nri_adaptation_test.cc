// nri/adaptation against fake plugins in the test's own loop
// (nri_adaptation_test_util.h). Registration rules, Configure, Synchronize
// (split), event order, merging across plugins, validators, the
// StateChange fallback, unsolicited updates during an event. Fail policies
// and required plugins at a start's events: nri_start_test.cc.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "nri_adaptation_test_util.h"

namespace outpost::nri {
namespace {

using adaptation_test::FakeHost;
using adaptation_test::FakePlugin;
using adaptation_test::NriAdaptation;

TEST_F(NriAdaptation, RegistrationConfiguresAndSynchronizesEveryPlugin) {
  host_.containers = {Ctr("running")};
  host_.pods = {Pod()};
  Make();
  FakePlugin* p = Plugin("logger", "10", 0);
  EXPECT_EQ(p->register_result, "ok");
  EXPECT_EQ(p->configure.runtime_name, "outpost");
  EXPECT_EQ(p->configure.runtime_version, "test");
  EXPECT_EQ(p->configure.registration_timeout_ms, 5000);
  EXPECT_EQ(p->configure.request_timeout_ms, 2000);
  EXPECT_EQ(p->configure.nri_version, kNriVersion);
  ASSERT_EQ(p->sync_chunks.size(), 1u);
  EXPECT_FALSE(p->sync_chunks[0].more);
  ASSERT_EQ(p->sync_chunks[0].containers.size(), 1u);
  EXPECT_EQ(p->sync_chunks[0].containers[0].id, "running");
  PluginInfo i = Info("logger");
  EXPECT_EQ(i.events, kValidEvents) << "events 0 means every event";
  EXPECT_EQ(i.source, "external");
  EXPECT_EQ(p->calls, (std::vector<std::string>{"Configure", "Synchronize"}));
}

TEST_F(NriAdaptation, BadNamesAndIndicesAreRefusedWithUpstreamsMessages) {
  Make();
  FakePlugin* bad_idx = Plugin("", "", 0);
  bad_idx->Register("ok", "1");
  FakePlugin* bad_name = Plugin("", "", 0);
  bad_name->Register("a b", "10");
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] {
    return !bad_idx->register_result.empty() && !bad_name->register_result.empty();
  }));
  EXPECT_NE(bad_idx->register_result.find("invalid plugin index \"1\", must be 2 digits"), std::string::npos)
      << bad_idx->register_result;
  EXPECT_NE(bad_name->register_result.find("invalid plugin name \"a b\": contains invalid character ' '"),
            std::string::npos)
      << bad_name->register_result;
  EXPECT_TRUE(testing::RunUntil(loop_.get(), [&] { return bad_idx->closed && bad_name->closed; }))
      << "refused plugins are disconnected";
}

TEST_F(NriAdaptation, APluginThatNeverRegistersIsClosed) {
  config_.registration_timeout_ms = 30;
  Make();
  FakePlugin* p = Plugin("", "", 0);
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return p->closed; }));
  bool found = false;
  for (const PluginInfo& i : a_->List()) found = found || i.last_error == "plugin registration timed out";
  EXPECT_TRUE(found);
}

TEST_F(NriAdaptation, InvalidEventMaskClosesThePlugin) {
  Make();
  FakePlugin* p = Plugin("", "", 0x10000);
  p->Register("wide", "10");
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return p->closed; }));
  EXPECT_EQ(Info("wide").last_error, "invalid plugin events: 0x10000");
}

TEST_F(NriAdaptation, FiveThousandContainersAreSynchronizedInSplitMessages) {
  for (int i = 0; i < 5000; ++i) {
    Container c = Ctr("c" + std::to_string(i));
    c.annotations["big"] = std::string(1000, 'x');
    host_.containers.push_back(std::move(c));
  }
  host_.pods = {Pod()};
  // Bounds, not paces: the fake plugin answers each chunk in this loop, and
  // 5 MB under ASan on a loaded 2-core machine took more than the default
  // 2 s per request (a fresh-machine run).
  config_.request_timeout_ms = 120000;
  Make();
  FakePlugin* p = Plugin("sync", "10", 0, 120 * kNanosPerSecond);
  ASSERT_GT(p->sync_chunks.size(), 1u) << "5 MB of state must be split";
  size_t total = 0;
  for (size_t i = 0; i < p->sync_chunks.size(); ++i) {
    total += p->sync_chunks[i].containers.size();
    EXPECT_EQ(p->sync_chunks[i].more, i + 1 < p->sync_chunks.size()) << "chunk " << i;
  }
  EXPECT_EQ(total, 5000u);
}

TEST_F(NriAdaptation, APluginThatCannotSplitSyncIsClosed) {
  for (int i = 0; i < 5000; ++i) {
    Container c = Ctr("c" + std::to_string(i));
    c.annotations["big"] = std::string(1000, 'x');
    host_.containers.push_back(std::move(c));
  }
  Make();
  FakePlugin* p = Plugin("", "", 0);
  p->Handle("Synchronize", [](std::string_view, wire::Responder r) { r.Reply(""); });  // more=false always
  p->Register("old", "10");
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return p->closed; }));
  EXPECT_EQ(Info("old").last_error, "plugin does not handle split sync requests");
}

TEST_F(NriAdaptation, PluginsAreCalledInIndexOrderAndSeeEachOthersChanges) {
  Make();
  FakePlugin* late = Plugin("b", "20", EventMask(Event::kCreateContainer));
  FakePlugin* early = Plugin("a", "10", EventMask(Event::kCreateContainer));
  FakePlugin* other = Plugin("c", "30", EventMask(Event::kStartContainer));
  std::vector<std::string> order;
  Adjust(early, [&](ContainerAdjustment* adj) {
    order.push_back("a");
    adj->env.push_back({"FROM_A", "1"});
  });
  std::vector<std::string> seen_env;
  late->Handle("CreateContainer", [&](std::string_view p, wire::Responder r) {
    order.push_back("b");
    PodContainerRequest req;
    EXPECT_TRUE(nriproto::Decode(p, &req).ok());
    seen_env = req.container->env;
    r.Reply("");
  });
  auto out = Create("ctr");
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(seen_env, (std::vector<std::string>{"A=1", "FROM_A=1"})) << "plugin 20 sees plugin 10's change";
  ASSERT_TRUE(out->adjust);
  ASSERT_EQ(out->adjust->env.size(), 1u);
  EXPECT_EQ(out->adjust->env[0].key, "FROM_A");
  ASSERT_EQ(out->plugins.size(), 2u);
  EXPECT_EQ(out->plugins[0].plugin, "10-a");
  EXPECT_EQ(out->plugins[0].result, "adjusted Env FROM_A");
  EXPECT_EQ(out->plugins[1].result, "no change");
  EXPECT_TRUE(std::find(other->calls.begin(), other->calls.end(), "CreateContainer") == other->calls.end())
      << "an unsubscribed plugin is not called";
}

TEST_F(NriAdaptation, ConflictingPluginsFailTheCreation) {
  Make();
  Adjust(Plugin("a", "10", EventMask(Event::kCreateContainer)), [](ContainerAdjustment* adj) {
    adj->annotations["k"] = "a";
  });
  Adjust(Plugin("b", "20", EventMask(Event::kCreateContainer)), [](ContainerAdjustment* adj) {
    adj->annotations["k"] = "b";
  });
  auto out = Create("ctr");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message().find("plugins \"20-b\" and \"10-a\" both tried to set Annotations k"),
            std::string::npos)
      << out.error().message();
}

TEST_F(NriAdaptation, AnErrorFromAPluginFailsTheCreation) {
  Make();
  Plugin("bad", "10", EventMask(Event::kCreateContainer))->Handle("CreateContainer", [](std::string_view,
                                                                                         wire::Responder r) {
    r.Fail(Error(Code::kUnknown, "not today"));
  });
  auto out = Create("ctr");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message().find("NRI plugin 10-bad failed CreateContainer: not today"), std::string::npos)
      << out.error().message();
}

TEST_F(NriAdaptation, ValidatorsGetThePristineContainerAndCanReject) {
  Make();
  Adjust(Plugin("a", "10", EventMask(Event::kCreateContainer)), [](ContainerAdjustment* adj) {
    adj->env.push_back({"X", "1"});
  });
  ValidateContainerAdjustmentRequest got;
  Plugin("v", "90", EventMask(Event::kValidateContainerAdjustment))
      ->Handle("ValidateContainerAdjustment", [&](std::string_view p, wire::Responder r) {
        EXPECT_TRUE(nriproto::Decode(p, &got).ok());
        ValidateContainerAdjustmentResponse resp;
        resp.reject = true;
        resp.reason = "no X";
        r.Reply(nriproto::Encode(resp));
      });
  auto out = Create("ctr");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message(), "validator \"90-v\" rejected container adjustment, reason: no X");
  ASSERT_TRUE(got.container);
  EXPECT_EQ(got.container->env, (std::vector<std::string>{"A=1"})) << "the pristine container";
  ASSERT_TRUE(got.adjust);
  EXPECT_EQ(got.adjust->env.size(), 1u);
  ASSERT_EQ(got.plugins.size(), 1u);
  EXPECT_EQ(got.plugins[0].name, "a");
  EXPECT_EQ(got.plugins[0].index, "10");
}

TEST_F(NriAdaptation, OldPluginsGetNotificationsThroughStateChange) {
  Make();
  FakePlugin* p = Plugin("old", "10", 0x7FF);
  std::vector<int> events;
  p->Handle("StateChange", [&](std::string_view payload, wire::Responder r) {
    StateChangeEvent ev;
    EXPECT_TRUE(nriproto::Decode(payload, &ev).ok());
    events.push_back(static_cast<int>(ev.event));
    r.Reply("");
  });
  bool done = false;
  a_->Notify(Event::kStartContainer, Pod(), Ctr("c"), [&] { done = true; });
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return done; }));
  done = false;
  a_->Notify(Event::kRemoveContainer, Pod(), Ctr("c"), [&] { done = true; });
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return done; }));
  EXPECT_EQ(events, (std::vector<int>{6, 11}));
  EXPECT_EQ(p->calls, (std::vector<std::string>{"Configure", "Synchronize", "StateChange", "StateChange"}));
  EXPECT_EQ(Info("old").requests, 5u) << "the dedicated RPC is tried once (answered Unimplemented)";
  EXPECT_TRUE(Info("old").state_change);
  EXPECT_EQ(Info("old").failures, 0u) << "the Unimplemented answer says the plugin is old: no failure";
  EXPECT_EQ(Info("old").last_error, "");
}

TEST_F(NriAdaptation, AnUpdateSentDuringAnEventIsAppliedAfterIt) {
  Make();
  FakePlugin* p = Plugin("upd", "10", EventMask(Event::kCreateContainer));
  p->Handle("CreateContainer", [&](std::string_view, wire::Responder r) {
    // As a plugin that waits for its update's answer before it answers the
    // event: the runtime must answer at once (and apply it after the event)
    // or both wait for each other until the timeout.
    UpdateContainersRequest req;
    req.update.push_back({"other", Resources(), false});
    req.evict.push_back({"victim", "too big"});
    p->UpdateContainers(req, [&host = host_, r] {
      host.log.push_back("update answered");
      r.Reply("");
    });
  });
  bool created = false;
  a_->CreateContainer(Pod(), Ctr("ctr"), [&](Result<CreateOutcome> r) {
    EXPECT_TRUE(r.ok());
    host_.log.push_back("created");
    created = true;
  });
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return created && p->updates_answered; }));
  EXPECT_EQ(host_.log, (std::vector<std::string>{"update answered", "created", "update other by 10-upd",
                                                 "evict victim by 10-upd: too big"}));
}

}  // namespace
}  // namespace outpost::nri

namespace outpost::nri {
namespace {

// Reads whole mux frames from a raw socket until n bytes arrived (or the
// loop's deadline passes).
std::string ReadRaw(Loop* loop, int fd, size_t n) {
  std::string got;
  testing::RunUntil(loop, [&] {
    char buf[4096];
    ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) got.append(buf, static_cast<size_t>(r));
    return got.size() >= n;
  });
  return got;
}

std::string Hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += Format("%02x", c);
  return out;
}

// The first bytes a real v0.12.2 logger sends (captured; its timeout_nano
// varint at the end), and what a Go runtime answers: an empty Response on
// connection 2, stream 1 (no status on success), then Configure on
// connection 1, stream 1, with the fields at upstream's numbers.
TEST(NriAdaptationWire, AnswersACapturedRegistrationAsTheGoRuntimeDoes) {
  auto loop = testing::MakeLoop();
  FakeHost host;
  Config config;
  config.enabled = true;
  config.socket_path = "";
  config.plugin_dir = "";
  config.runtime_version = "v9";
  auto a = Adaptation::Create(loop.get(), config, &host);
  ASSERT_TRUE(a.ok());
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd plugin(sv[1]);
  ASSERT_TRUE((*a)->AddConnection(UniqueFd(sv[0])).ok());
  const unsigned char kLogger[] = {
      0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x5b, 0x00, 0x00, 0x00, 0x51, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00,
      0x0a, 0x1c, 'n',  'r',  'i',  '.',  'p',  'k',  'g',  '.',  'a',  'p',  'i',  '.',  'v',  '1',  'a',  'l',
      'p',  'h',  'a',  '1',  '.',  'R',  'u',  'n',  't',  'i',  'm',  'e',  0x12, 0x0e, 'R',  'e',  'g',  'i',
      's',  't',  'e',  'r',  'P',  'l',  'u',  'g',  'i',  'n',  0x1a, 0x1b, 0x0a, 0x06, 'l',  'o',  'g',  'g',
      'e',  'r',  0x12, 0x02, '1',  '0',  0x1a, 0x0d, '0',  '.',  '0',  '.',  '0',  '-',  'u',  'n',  'k',  'n',
      'o',  'w',  'n',  0x20, 0xa5, 0x91, 0xdf, 0xcf, 0x12};
  static_assert(sizeof kLogger == 99, "the captured frame is 99 bytes");
  ASSERT_EQ(::write(plugin.get(), kLogger, sizeof kLogger), static_cast<ssize_t>(sizeof kLogger));

  std::string configure_payload;
  configure_payload += std::string("\x12\x07", 2) + "outpost";       // runtime_name = 2
  configure_payload += std::string("\x1a\x02", 2) + "v9";            // runtime_version = 3
  configure_payload += std::string("\x20\x88\x27", 3);               // registration_timeout = 4: 5000
  configure_payload += std::string("\x28\xd0\x0f", 3);               // request_timeout = 5: 2000
  configure_payload += std::string("\x32\x07", 2) + kNriVersion;     // NRI_version = 6
  std::string request;
  request += std::string("\x0a\x1b", 2) + "nri.pkg.api.v1alpha1.Plugin";
  request += std::string("\x12\x09", 2) + "Configure";
  request += "\x1a" + std::string(1, static_cast<char>(configure_payload.size())) + configure_payload;
  request += std::string("\x20\x80\xa8\xd6\xb9\x07", 6);  // timeout_nano: 2 s
  std::string ttrpc = std::string("\x00\x00\x00", 3) + static_cast<char>(request.size()) +
                      std::string("\x00\x00\x00\x01\x01\x00", 6) + request;
  std::string want = std::string("\x00\x00\x00\x02\x00\x00\x00\x0a", 8) +                  // mux: conn 2, 10 bytes
                     std::string("\x00\x00\x00\x00\x00\x00\x00\x01\x02\x00", 10) +          // Response, stream 1, empty
                     std::string("\x00\x00\x00\x01\x00\x00\x00", 7) + static_cast<char>(ttrpc.size()) + ttrpc;
  std::string got = ReadRaw(loop.get(), plugin.get(), want.size());
  EXPECT_EQ(Hex(got), Hex(want));
}

}  // namespace
}  // namespace outpost::nri
