#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/config.h"
#include "base/strings.h"
#include "base/sys.h"
#include "test_util.h"

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
    "api_frame_timeout": "2s", "api_max_write_queue": "2MiB", "api_max_read_buffers": "64MiB"})", "x.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->log_level, log::Level::kWarn);
  EXPECT_EQ(c->api_allowed_uids, (std::vector<int64_t>{1000, 1001}));
  EXPECT_EQ(c->api_max_connections, 8);
  EXPECT_EQ(c->api_max_connections_per_uid, 3);
  EXPECT_EQ(c->api_idle_timeout_nanos, 60LL * 1000000000);
  EXPECT_EQ(c->api_frame_timeout_nanos, 2LL * 1000000000);
  EXPECT_EQ(c->api_max_write_queue, 2u << 20);
  EXPECT_EQ(c->api_max_read_buffers, 64u << 20);
}

TEST(Config, ApiLimitDefaults) {
  auto c = ParseConfig("{}", "x.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->api_max_connections, 256);
  EXPECT_EQ(c->api_max_connections_per_uid, 128);
  EXPECT_EQ(c->api_idle_timeout_nanos, 60LL * 1000000000);
  EXPECT_EQ(c->api_max_write_queue, 1u << 20);
  EXPECT_EQ(c->api_max_read_buffers, 16u << 20);
}

TEST(Config, EveryErrorIsReportedAtOnceWithFileAndKey) {
  auto c = ParseConfig(R"({"state_dir": "rel", "log_level": "loud", "api_max_connections": 0,
    "api_max_connections_per_uid": -1, "api_allowed_uids": [-1], "api_max_write_queue": "1KiB",
    "api_idle_timeout": "10ms", "api_max_read_buffers": "1MiB",
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
            "config /etc/o.json: api_max_write_queue: must be between 64KiB and 256MiB\n"
            "config /etc/o.json: api_max_read_buffers: must be between 8MiB and 1GiB (a request frame may be 4 MiB)");
}

TEST(Config, AKeyGivenTwiceIsTakenWithItsLastValueAndWarnedAbout) {
  auto c = ParseConfig("{\"log_level\": \"debug\",\n \"nri\": {\"enable\": true,\n  \"socket\": \"/a.sock\",\n"
                       "  \"socket\": \"/b.sock\"},\n \"log_level\": \"warn\"}",
                       "/etc/o.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->log_level, log::Level::kWarn);
  EXPECT_EQ(c->nri.socket, "/b.sock");
  // The first one found, with its path and both lines.
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_EQ(c->warnings[0], "config /etc/o.json: nri.socket: given twice (lines 3 and 4); the last is used");
  auto clean = ParseConfig(R"({"log_level": "warn", "nri": {"socket": "/a.sock"}})", "/etc/o.json");
  ASSERT_TRUE(clean.ok());
  EXPECT_TRUE(clean->warnings.empty());
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
  Config c, d;
  d.plugins_dir = "/p";
  EXPECT_TRUE(ReloadChangesRestartOnlyKeys(c, d, &which));
  EXPECT_EQ(which, "plugins_dir");
  d.plugin_grace_period_nanos = 5 * kNanosPerSecond;
  EXPECT_TRUE(ReloadChangesRestartOnlyKeys(c, d, &which));
  EXPECT_EQ(which, "plugins_dir, plugin_grace_period");
}


// Parses doc and returns its error ("" if it is valid).
std::string ErrorOf(const std::string& doc) {
  auto c = ParseConfig(doc, "c.json");
  return c.ok() ? "" : c.error().message();
}

TEST(ConfigPlugins, DirDefaultsIntoTheRuntimeDirAndIsChecked) {
  auto c = ParseConfig(R"({"runtime_dir": "/r", "plugin_grace_period": "45s"})", "c.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->PluginsDir(), "/r/plugins");
  EXPECT_EQ(c->plugin_grace_period_nanos, 45 * kNanosPerSecond);
  c = ParseConfig(R"({"plugins_dir": "/opt/plugins/"})", "c.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->PluginsDir(), "/opt/plugins");
  EXPECT_EQ(ErrorOf(R"({"plugins_dir": "plugins"})"),
            "config c.json: plugins_dir: must be an absolute path, got \"plugins\"");
  EXPECT_NE(ErrorOf(R"({"state_dir": "/s", "plugins_dir": "/s/plugins"})")
                .find("plugins_dir \"/s/plugins\" is inside state_dir \"/s\""),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"runtime_dir": "/r", "plugins_dir": "/r/fifo/p"})")
                .find("plugins_dir \"/r/fifo/p\" is inside runtime_dir \"/r\""),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"runtime_dir": "/r", "plugins_dir": "/r"})").find("plugins_dir \"/r\" is the same path as"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"plugins_dir": "/)" + std::string(100, 'p') + R"("})").find("longer than 90 bytes"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"plugin_grace_period": "25h"})").find("plugin_grace_period: must be at most 24h"),
            std::string::npos);
}

TEST(ConfigPlugins, DriverCallTimeoutsHaveDefaultsAndBounds) {
  auto c = ParseConfig(R"({})", "c.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->driver_call_timeout_nanos, 10 * kNanosPerSecond);
  EXPECT_EQ(c->driver_start_timeout_nanos, 60 * kNanosPerSecond);
  c = ParseConfig(R"({"driver_call_timeout": "3s", "driver_start_timeout": "5m"})", "c.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->driver_call_timeout_nanos, 3 * kNanosPerSecond);
  EXPECT_EQ(c->driver_start_timeout_nanos, 300 * kNanosPerSecond);
  EXPECT_NE(ErrorOf(R"({"driver_call_timeout": "500ms"})").find("driver_call_timeout: must be between 1s and 10m"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"driver_start_timeout": "2h"})").find("driver_start_timeout: must be between 1s and 1h"),
            std::string::npos);
}

TEST(ConfigPaths, AreCleanedAndDotDotIsRefused) {
  auto c = ParseConfig(R"({"state_dir": "/var//lib/./outpost/", "runtime_dir": "/run/outpost/",
    "jobs_dir": "/etc/outpost/jobs.d/"})", "c.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->state_dir, "/var/lib/outpost");
  EXPECT_EQ(c->ApiSocket(), "/run/outpost/outpost.sock");
  EXPECT_EQ(c->jobs_dir, "/etc/outpost/jobs.d");
  EXPECT_EQ(ErrorOf(R"({"state_dir": "/var/lib/../outpost"})"),
            "config c.json: state_dir: must not contain \"..\", got \"/var/lib/../outpost\"");
  EXPECT_EQ(ErrorOf(R"({"cgroup_root": "/sys/fs/cgroup/.."})"),
            "config c.json: cgroup_root: must not contain \"..\", got \"/sys/fs/cgroup/..\"");
  // "..x" is a name like any other.
  EXPECT_EQ(ErrorOf(R"({"state_dir": "/var/..x"})"), "");
}

TEST(ConfigPaths, StateAndRuntimeDirsMustBeApart) {
  EXPECT_EQ(ErrorOf(R"({"state_dir": "/o", "runtime_dir": "/o/", "api_socket": "/s/a.sock"})"),
            "config c.json: state_dir \"/o\" is the same directory as runtime_dir \"/o\": the state dir must stay "
            "searchable by tasks' users (0711) and the runtime dir private (0700); give each a directory of its own");
  EXPECT_EQ(ErrorOf(R"({"state_dir": "/o", "runtime_dir": "/o/task-data/x", "api_socket": "/s/a.sock"})"),
            "config c.json: runtime_dir \"/o/task-data/x\" is inside state_dir \"/o\": tasks' users can search the "
            "state dir and own their task dirs in it; the runtime dir (log FIFOs, API socket) must be outside it");
  EXPECT_EQ(ErrorOf(R"({"state_dir": "/run/outpost/state"})"),
            "config c.json: state_dir \"/run/outpost/state\" is inside runtime_dir \"/run/outpost\": the runtime dir "
            "is private (0700), so tasks running as other users could not reach their task dirs");
  // Siblings and names that only share a prefix are fine.
  EXPECT_EQ(ErrorOf(R"({"state_dir": "/o/state", "runtime_dir": "/o/run"})"), "");
  EXPECT_EQ(ErrorOf(R"({"state_dir": "/o/run2", "runtime_dir": "/o/run"})"), "");
}

TEST(ConfigPaths, SocketLogFileAndJobsDirStayOutOfTheAgentsDirs) {
  EXPECT_EQ(ErrorOf(R"({"state_dir": "/o/state", "api_socket": "/o/state/outpost.sock"})"),
            "config c.json: api_socket \"/o/state/outpost.sock\" is inside state_dir \"/o/state\": the state dir is "
            "the agent's alone: it names entries there after tasks, and tasks' users own their task dirs in it; keep "
            "api_socket outside it");
  EXPECT_NE(ErrorOf(R"({"state_dir": "/o/state", "jobs_dir": "/o/state/task-data/x"})")
                .find("jobs_dir \"/o/state/task-data/x\" is inside state_dir \"/o/state\""),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"state_dir": "/o/state", "log_file": "/o/state"})")
                .find("log_file \"/o/state\" is the same path as state_dir \"/o/state\""),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"runtime_dir": "/r", "log_file": "/r/agent.log"})"),
            "config c.json: log_file \"/r/agent.log\" is inside runtime_dir \"/r\": the runtime dir is the agent's "
            "alone: it names the log FIFOs there after tasks; keep log_file outside it");
  EXPECT_EQ(ErrorOf(R"({"runtime_dir": "/r", "api_socket": "/r/fifo/a.sock"})"),
            "config c.json: api_socket \"/r/fifo/a.sock\" is inside runtime_dir \"/r\": the runtime dir is the "
            "agent's alone: it names the log FIFOs there after tasks; keep api_socket out of its fifo/ dir");
  EXPECT_NE(ErrorOf(R"({"runtime_dir": "/r", "api_socket": "/r"})").find("api_socket \"/r\" is the same path as runtime_dir"),
            std::string::npos);
  // The socket's usual places: in the runtime dir (also below it), or in
  // the state dir's parent, a directory the agent does not own.
  EXPECT_EQ(ErrorOf(R"({"runtime_dir": "/r", "api_socket": "/r/api/outpost.sock"})"), "");
  EXPECT_EQ(ErrorOf(R"({"state_dir": "/o/state", "runtime_dir": "/r", "api_socket": "/o/outpost.sock"})"), "");
}

TEST(ConfigPaths, TwoKeysOnOnePathAreRefused) {
  EXPECT_EQ(ErrorOf(R"({"api_socket": "/x/a", "log_file": "/x/a", "jobs_dir": "/x/a"})"),
            "config c.json: api_socket \"/x/a\" is the same path as log_file \"/x/a\": each needs a path of its own\n"
            "config c.json: api_socket \"/x/a\" is the same path as jobs_dir \"/x/a\": each needs a path of its own\n"
            "config c.json: log_file \"/x/a\" is the same path as jobs_dir \"/x/a\": each needs a path of its own");
}

TEST(ConfigPaths, EveryConflictIsReportedAndNoneForUnusablePaths) {
  std::string e = ErrorOf(R"({"state_dir": "/o", "runtime_dir": "/o", "log_file": "/o/l"})");
  EXPECT_NE(e.find("state_dir \"/o\" is the same directory as runtime_dir"), std::string::npos) << e;
  EXPECT_NE(e.find("log_file \"/o/l\" is inside state_dir"), std::string::npos) << e;
  // A relative path is reported as such, without conflicts computed from it.
  EXPECT_EQ(ErrorOf(R"({"state_dir": "o", "runtime_dir": "o"})"),
            "config c.json: state_dir: must be an absolute path, got \"o\"\n"
            "config c.json: runtime_dir: must be an absolute path, got \"o\"");
}

TEST(ConfigPaths, ApiUidsMustNotBeDynamicUsers) {
  EXPECT_EQ(ErrorOf(R"({"dynamic_users": "1000-1999", "api_allowed_uids": [999, 1500]})"),
            "config c.json: api_allowed_uids: uid 1500 is in dynamic_users 1000-1999: a task running as that dynamic "
            "user could drive the agent's API");
  EXPECT_NE(ErrorOf(R"({"api_allowed_uids": [80000]})").find("uid 80000 is in dynamic_users 80000-89999"),
            std::string::npos);
}

// Existing directories: used as they are unless others could replace what
// the agent keeps in them.
class ExistingDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("/tmp", "config");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { (void)sys::RemoveTree(dir_); }
  std::string dir_;
};

TEST_F(ExistingDir, PrivateSharedAndStickyDirsAreAccepted) {
  for (mode_t m : {0700, 0711, 0755, 01777, 01770}) {
    ASSERT_EQ(0, ::chmod(dir_.c_str(), m));
    EXPECT_TRUE(CheckExistingDir("state_dir", dir_).ok()) << std::oct << m;
  }
}

TEST_F(ExistingDir, WritableByOthersWithoutStickyBitIsRefused) {
  for (mode_t m : {0777, 0770, 0722}) {
    ASSERT_EQ(0, ::chmod(dir_.c_str(), m));
    Status st = CheckExistingDir("runtime_dir", dir_);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().message(),
              Format("runtime_dir: '%s' (mode %04o, owner %u) is writable by other users without the sticky bit: "
                     "they could replace what the agent keeps there; remove their write permission (chmod go-w)",
                     dir_.c_str(), m, ::getuid()));
  }
}

TEST_F(ExistingDir, AJobsDirWritableByOthersIsRefusedEvenWithTheStickyBit) {
  ASSERT_EQ(0, ::chmod(dir_.c_str(), 01777));
  Status st = CheckExistingDir("jobs_dir", dir_, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(),
            Format("jobs_dir: '%s' (mode 1777, owner %u) is writable by other users: they could add files the agent "
                   "acts on as its user; remove their write permission (chmod go-w)",
                   dir_.c_str(), ::getuid()));
  Config c;
  c.state_dir = dir_ + "/state";
  c.runtime_dir = dir_ + "/run";
  c.jobs_dir = dir_;
  st = CheckExistingDirs(c);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message().find("jobs_dir: '"), 0u);
  ASSERT_EQ(0, ::chmod(dir_.c_str(), 0755));
  EXPECT_TRUE(CheckExistingDirs(c).ok());
}

TEST_F(ExistingDir, OwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  ASSERT_EQ(0, ::chown(dir_.c_str(), 65534, 65534));
  Status st = CheckExistingDir("api_socket", dir_);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "api_socket: '" + dir_ +
                                      "' (mode 0700, owner 65534) is owned by a user other than root and the "
                                      "agent's: that user could replace what the agent keeps there; chown it or "
                                      "choose another directory");
}

TEST_F(ExistingDir, AFileIsNotADirectory) {
  std::string f = dir_ + "/f";
  ASSERT_TRUE(sys::WriteFileAtomic(f, "", 0600).ok());
  Status st = CheckExistingDir("state_dir", f);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), Format("state_dir: '%s' (mode 0600, owner %u) is not a directory", f.c_str(), ::getuid()));
}

TEST_F(ExistingDir, AllAreCheckedThatExistEachOnce) {
  Config c;
  c.state_dir = dir_ + "/state";  // missing: created at start
  c.runtime_dir = dir_ + "/run";
  c.jobs_dir = dir_ + "/jobs.d";
  ASSERT_EQ(0, ::mkdir(c.runtime_dir.c_str(), 0777));
  ASSERT_EQ(0, ::chmod(c.runtime_dir.c_str(), 0777));
  ASSERT_EQ(0, ::mkdir(c.jobs_dir.c_str(), 0777));
  ASSERT_EQ(0, ::chmod(c.jobs_dir.c_str(), 0775));
  Status st = CheckExistingDirs(c);
  ASSERT_FALSE(st.ok());
  // The runtime dir named once, though the API socket is in it too.
  EXPECT_EQ(st.error().message(),
            Format("runtime_dir: '%s' (mode 0777, owner %u) is writable by other users without the sticky bit: "
                   "they could replace what the agent keeps there; remove their write permission (chmod go-w)\n"
                   "jobs_dir: '%s' (mode 0775, owner %u) is writable by other users: they could add files the agent "
                   "acts on as its user; remove their write permission (chmod go-w)",
                   c.runtime_dir.c_str(), ::getuid(), c.jobs_dir.c_str(), ::getuid()));
  ASSERT_EQ(0, ::chmod(c.runtime_dir.c_str(), 0755));
  ASSERT_EQ(0, ::chmod(c.jobs_dir.c_str(), 0755));
  EXPECT_TRUE(CheckExistingDirs(c).ok());
}

}  // namespace
}  // namespace outpost
