// driver/nomad/plugin_process: go-plugin's handshake line, the plugin's
// stderr as the agent logs it, and launching a plugin (a shell script
// playing one) through to a connected gRPC client, its exit and its stop.
#include "driver/nomad/plugin_process.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <string>

#include "base/log.h"
#include "base/sys.h"
#include "test_util.h"
#include "wire/grpc_server.h"

namespace outpost::driver::nomad {
namespace {

using outpost::testing::RunUntil;

TEST(NomadHandshake, ParsesWhatNomadDriversPrint) {
  auto h = ParseHandshake("1|2|unix|/tmp/plugin3261512409|grpc|\n");
  ASSERT_TRUE(h.ok()) << h.error().message();
  EXPECT_EQ(h->core_version, 1);
  EXPECT_EQ(h->app_version, 2);
  EXPECT_EQ(h->network, "unix");
  EXPECT_EQ(h->address, "/tmp/plugin3261512409");
  EXPECT_EQ(h->protocol, "grpc");
  // A 7th (mux) field and a short certificate field are tolerated.
  EXPECT_TRUE(ParseHandshake("1|2|unix|/tmp/p|grpc||true").ok());
  EXPECT_TRUE(ParseHandshake("1|2|unix|/tmp/p|grpc|short").ok());
}

TEST(NomadHandshake, RefusesWhatOutpostDoesNotHostWithAReason) {
  struct {
    const char* line;
    const char* says;
  } cases[] = {
      {"hello world", "at least 4 fields"},
      {"2|2|unix|/tmp/p|grpc|", "core protocol version 2"},
      {"1|1|unix|/tmp/p|grpc|", "plugin protocol version 1"},
      {"1|2|unix|/tmp/p", "netrpc protocol"},
      {"1|2|unix|/tmp/p|netrpc|", "netrpc protocol"},
      {"1|2|tcp|127.0.0.1:10000|grpc|", "unix sockets"},
      {"1|2|unix|/tmp/p|grpc|MIIBkTCB+wIJAKHBfpegPjMCMA0GCSqGSIb3DQEBCwUAMBQxEjAQBgNVBAMMCWxvY2FsaG9zdDAe", "TLS"},
      {"1|2|unix|relative|grpc|", "not absolute"},
  };
  for (const auto& c : cases) {
    auto h = ParseHandshake(c.line);
    ASSERT_FALSE(h.ok()) << c.line;
    EXPECT_NE(h.error().message().find(c.says), std::string::npos) << h.error().message();
  }
}

TEST(NomadStderr, HclogJsonAndPlainLines) {
  StderrLine l = ParseStderrLine(
      R"({"@level":"warn","@message":"shell not found","@module":"hello","@timestamp":"2026-12-07T01:02:03Z","shell":"fish","n":3})");
  EXPECT_EQ(l.level, static_cast<int>(log::Level::kWarn));
  EXPECT_EQ(l.message, "shell not found");
  ASSERT_EQ(l.fields.size(), 3u);
  EXPECT_EQ(l.fields[0].first, "module");
  EXPECT_EQ(l.fields[1].first, "n");
  EXPECT_EQ(l.fields[1].second, "3");
  EXPECT_EQ(ParseStderrLine(R"({"@level":"trace","@message":"x"})").level, static_cast<int>(log::Level::kDebug));
  EXPECT_EQ(ParseStderrLine("2026/12/07 [ERROR] plugin: broke").level, static_cast<int>(log::Level::kError));
  EXPECT_EQ(ParseStderrLine("panic: runtime error").level, static_cast<int>(log::Level::kError));
  StderrLine plain = ParseStderrLine("just text");
  EXPECT_EQ(plain.level, static_cast<int>(log::Level::kDebug));
  EXPECT_EQ(plain.message, "just text");
  EXPECT_EQ(ParseStderrLine("{not json").message, "{not json");
}

class NomadPluginProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetLevel(log::Level::kError);
    loop_ = outpost::testing::MakeLoop();
    ASSERT_NE(loop_, nullptr);
    dir_ = outpost::testing::MakeTempDir("/tmp", "nomadpp");
  }
  void TearDown() override {
    proc_.reset();
    server_.reset();
    (void)sys::RemoveTree(dir_);
    log::SetLevel(log::Level::kInfo);
  }
  std::string Script(const std::string& body) {
    std::string path = dir_ + "/plugin.sh";
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
    return path;
  }
  void Launch(const std::string& path, int64_t timeout = 5 * kNanosPerSecond) {
    PluginProcessOptions o;
    o.path = path;
    o.name = "test";
    o.socket_dir = dir_;
    o.start_timeout_nanos = timeout;
    auto p = PluginProcess::Launch(
        loop_.get(), o,
        [this](Result<std::unique_ptr<wire::GrpcClient>> r) {
          ready_ = true;
          if (r.ok()) {
            client_ = std::move(*r);
          } else {
            error_ = r.error().message();
          }
        },
        [this](int status) {
          exited_ = true;
          status_ = status;
        });
    ASSERT_TRUE(p.ok()) << p.error().message();
    proc_ = std::move(*p);
  }

  std::unique_ptr<Loop> loop_;
  std::string dir_;
  std::unique_ptr<wire::GrpcServer> server_;
  std::unique_ptr<PluginProcess> proc_;
  std::unique_ptr<wire::GrpcClient> client_;
  bool ready_ = false, exited_ = false;
  int status_ = 0;
  std::string error_;
};

TEST_F(NomadPluginProcessTest, HandshakesConnectsAndIsStopped) {
  std::string sock = dir_ + "/p.sock";
  auto fd = sys::UnixListen(sock, 8);
  ASSERT_TRUE(fd.ok());
  auto s = wire::GrpcServer::Create(loop_.get(), std::move(*fd), {});
  ASSERT_TRUE(s.ok());
  server_ = std::move(*s);
  std::string cookie;
  server_->Register("t.S", "Cookie", [&](const wire::GrpcCallContext&, std::string_view, wire::GrpcResponder r) {
    r.Reply(cookie);
  });
  // The script checks the environment go-plugin's host sets, prints the
  // handshake, keeps printing to stdout (drained) and then waits.
  std::string path = Script(
      "[ \"$NOMAD_PLUGIN_MAGIC_COOKIE\" = e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255 ] || exit 9\n"
      "[ \"$PLUGIN_PROTOCOL_VERSIONS\" = 2 ] || exit 8\n"
      "[ \"$PLUGIN_UNIX_SOCKET_DIR\" = " + dir_ + " ] || exit 7\n"
      "echo '1|2|unix|" + sock + "|grpc|'\n"
      "echo '{\"@level\":\"info\",\"@message\":\"started\"}' >&2\n"
      "i=0; while [ $i -lt 2000 ]; do echo noise; i=$((i+1)); done\n"
      "exec sleep 1000\n");
  Launch(path);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ready_; }));
  ASSERT_NE(client_, nullptr) << error_;
  bool called = false;
  client_->Call("t.S", "Cookie", "", 0, [&](Result<std::string> r) {
    EXPECT_TRUE(r.ok());
    called = true;
  });
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return called; }));
  EXPECT_TRUE(proc_->running());
  proc_->Stop();
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return exited_; }));
  EXPECT_TRUE(WIFSIGNALED(status_));
  EXPECT_FALSE(proc_->running());
}

TEST_F(NomadPluginProcessTest, APluginThatExitsBeforeItsHandshakeIsReported) {
  Launch(Script("echo 'This binary is a plugin.' >&2\nexit 1\n"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ready_ && exited_; }));
  EXPECT_EQ(client_, nullptr);
  EXPECT_NE(error_.find("plugin exited before we could connect"), std::string::npos) << error_;
}

TEST_F(NomadPluginProcessTest, ANetRpcPluginIsRefusedAndKilled) {
  Launch(Script("echo '1|2|unix|/tmp/x|netrpc|'\nexec sleep 1000\n"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ready_ && exited_; }));
  EXPECT_NE(error_.find("gRPC plugins only"), std::string::npos) << error_;
}

TEST_F(NomadPluginProcessTest, APluginThatNeverHandshakesTimesOut) {
  Launch(Script("exec sleep 1000\n"), 200 * kNanosPerMilli);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ready_ && exited_; }));
  EXPECT_NE(error_.find("timeout while waiting for plugin to start"), std::string::npos) << error_;
}

}  // namespace
}  // namespace outpost::driver::nomad
