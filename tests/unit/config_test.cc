#include <gtest/gtest.h>

#include "agent/config.h"

namespace outpost {
namespace {

TEST(Config, DefaultsSuitAnEdgeNode) {
  Config c;
  EXPECT_EQ(c.state_dir, "/var/lib/outpost");
  EXPECT_EQ(c.runtime_dir, "/run/outpost");
  EXPECT_EQ(c.ApiSocket(), "/run/outpost/outpost.sock");
  auto empty = ParseConfig("{}", "x.json");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->ApiSocket(), "/run/outpost/outpost.sock");
  EXPECT_EQ(empty->log_level, log::Level::kInfo);
}

TEST(Config, SocketFollowsRuntimeDirUnlessSet) {
  auto c = ParseConfig(R"({"runtime_dir": "/tmp/r"})", "x.json");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ApiSocket(), "/tmp/r/outpost.sock");
  c = ParseConfig(R"({"runtime_dir": "/tmp/r", "api_socket": "/tmp/s.sock"})", "x.json");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ApiSocket(), "/tmp/s.sock");
}

TEST(Config, AllKeysParse) {
  auto c = ParseConfig(R"({"state_dir": "/s", "runtime_dir": "/r", "api_socket": "/r/a.sock",
    "log_level": "warn", "log_file": "/var/log/outpost.log", "api_allowed_uids": [1000, 1001],
    "api_max_connections": 8, "api_max_connections_per_uid": 3, "api_idle_timeout": "1m",
    "api_frame_timeout": "2s", "api_max_write_queue": "2MiB"})", "x.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->log_level, log::Level::kWarn);
  EXPECT_EQ(c->api_allowed_uids, (std::vector<int64_t>{1000, 1001}));
  EXPECT_EQ(c->api_max_connections, 8);
  EXPECT_EQ(c->api_max_connections_per_uid, 3);
  EXPECT_EQ(c->api_idle_timeout_nanos, 60LL * 1000000000);
  EXPECT_EQ(c->api_frame_timeout_nanos, 2LL * 1000000000);
  EXPECT_EQ(c->api_max_write_queue, 2u << 20);
}

TEST(Config, ApiLimitDefaults) {
  auto c = ParseConfig("{}", "x.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->api_max_connections, 256);
  EXPECT_EQ(c->api_max_connections_per_uid, 128);
  EXPECT_EQ(c->api_idle_timeout_nanos, 60LL * 1000000000);
  EXPECT_EQ(c->api_max_write_queue, 1u << 20);
}

TEST(Config, EveryErrorIsReportedAtOnceWithFileAndKey) {
  auto c = ParseConfig(R"({"state_dir": "rel", "log_level": "loud", "api_max_connections": 0,
    "api_max_connections_per_uid": -1, "api_allowed_uids": [-1], "api_max_write_queue": "1KiB",
    "api_idle_timeout": "10ms",
    "runtime_dirr": "/x", "log_file": 3})", "/etc/o.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "config /etc/o.json: log_level: expected one of debug, info, warn, error, got \"loud\"\n"
            "config /etc/o.json: log_file: expected a string, got number\n"
            "config /etc/o.json: api_allowed_uids[0]: must be between 0 and 4294967294, got -1\n"
            "config /etc/o.json: api_max_connections: must be between 1 and 65536, got 0\n"
            "config /etc/o.json: api_max_connections_per_uid: "
            "must be between 1 and 65536, got -1\n"
            "config /etc/o.json: runtime_dirr: unknown field (did you mean \"runtime_dir\"?)\n"
            "config /etc/o.json: state_dir: must be an absolute path, got \"rel\"\n"
            "config /etc/o.json: api_idle_timeout: must be at least 1s\n"
            "config /etc/o.json: api_max_write_queue: must be between 64KiB and 256MiB");
}

TEST(Config, HeartbeatAndWatchdog) {
  Config d;
  EXPECT_EQ(d.heartbeat_timeout_nanos, 30LL * 1000000000);
  EXPECT_EQ(d.watchdog_device, "");
  auto c = ParseConfig(R"({"heartbeat_timeout": "0s", "watchdog_device": "/dev/watchdog"})", "x.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->heartbeat_timeout_nanos, 0);
  EXPECT_EQ(c->watchdog_device, "/dev/watchdog");
  c = ParseConfig(R"({"heartbeat_timeout": "500ms", "watchdog_device": "dev/watchdog"})", "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "config x.json: watchdog_device: must be an absolute path, got \"dev/watchdog\"\n"
            "config x.json: heartbeat_timeout: must be \"0s\" (off) or at least 1s");
  Config a, b;
  b.watchdog_device = "/dev/watchdog1";
  std::string which;
  EXPECT_TRUE(ReloadChangesRestartOnlyKeys(a, b, &which));
  EXPECT_EQ(which, "watchdog_device");
}

TEST(Config, OverlongSocketPathIsRejected) {
  std::string dir = "/" + std::string(120, 'd');
  auto c = ParseConfig("{\"runtime_dir\": \"" + dir + "\"}", "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("longer than the 107 bytes a unix socket allows"), std::string::npos);
}

TEST(Config, ReloadDetectsRestartOnlyKeys) {
  Config a, b;
  std::string which;
  EXPECT_FALSE(ReloadChangesRestartOnlyKeys(a, b, &which));
  b.log_level = log::Level::kDebug;
  EXPECT_FALSE(ReloadChangesRestartOnlyKeys(a, b, &which));
  b.runtime_dir = "/elsewhere";
  b.state_dir = "/s2";
  EXPECT_TRUE(ReloadChangesRestartOnlyKeys(a, b, &which));
  EXPECT_EQ(which, "state_dir, runtime_dir, api_socket");
}

}  // namespace
}  // namespace outpost
