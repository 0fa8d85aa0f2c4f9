// A job's `network`: defaults, sharing, canonical form, fingerprints and the
// environment a task gets (the errors are rows in job_spec_test.cc).
#include <gtest/gtest.h>

#include "job/spec.h"
#include "job/supervisor.h"
#include "net/spec.h"

namespace outpost::job {
namespace {

const char kTwoTasks[] = R"({"id": "web", "tasks": [{"name": "a", "command": "/bin/sh"},
                                                     {"name": "b", "command": "/bin/sh"}])";

TEST(NetSpec, HostIsTheDefaultAndLeavesTasksAsTheyWere) {
  auto plain = ParseJobSpec(std::string(kTwoTasks) + "}");
  auto host = ParseJobSpec(std::string(kTwoTasks) + R"(, "network": {"mode": "host"}})");
  ASSERT_TRUE(plain.ok() && host.ok());
  EXPECT_EQ(host->network.mode, "host");
  EXPECT_FALSE(host->network.Isolated());
  EXPECT_EQ(host->tasks[0].network, nullptr);
  EXPECT_EQ(TaskConfigFor("j", host->tasks[0]).net, nullptr);  // nothing kept per task
  // Same fingerprint as a job written before networks existed.
  EXPECT_EQ(TaskFingerprint(plain->tasks[0]), TaskFingerprint(host->tasks[0]));
  EXPECT_EQ(JobSpecToJson(*host).get("network").is<picojson::null>(), true);
}

TEST(NetSpec, TasksShareTheJobsNetworkAndRestartWhenItChanges) {
  auto a = ParseJobSpec(std::string(kTwoTasks) +
                        R"(, "network": {"mode": "bridge", "ports": [{"label": "http", "static": 8080}],
                             "cni_args": {"K": "v"}, "hostname": "web-1"}})");
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_NE(a->tasks[0].network, nullptr);
  EXPECT_EQ(a->tasks[0].network.get(), a->tasks[1].network.get());  // one copy per job
  const net::PortMapping& p = a->network.ports.at(0);
  EXPECT_EQ(p.host_port, 8080);
  EXPECT_EQ(p.to, 8080);  // defaults to the host port
  EXPECT_EQ(p.protocol, "tcp");
  // The canonical form reads back to the same spec and fingerprint.
  auto again = JobSpecFromJson(JobSpecToJson(*a));
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(JobSpecToJson(*again).serialize(), JobSpecToJson(*a).serialize());
  EXPECT_EQ(TaskFingerprint(again->tasks[0]), TaskFingerprint(a->tasks[0]));
  auto b = ParseJobSpec(std::string(kTwoTasks) +
                        R"(, "network": {"mode": "bridge", "ports": [{"label": "http", "static": 8081}],
                             "cni_args": {"K": "v"}, "hostname": "web-1"}})");
  ASSERT_TRUE(b.ok());
  EXPECT_NE(TaskFingerprint(a->tasks[0]), TaskFingerprint(b->tasks[0]));
  driver::TaskConfig c = TaskConfigFor("web", a->tasks[1]);
  ASSERT_NE(c.net, nullptr);
  EXPECT_EQ(c.net->spec.get(), a->tasks[1].network.get());
  EXPECT_EQ(c.Netns(), "");  // joined by the start pipeline
}

TEST(NetSpec, TasksSeeTheAddressAndBothPortsOfEachLabel) {
  std::vector<net::PortMapping> ports(2);
  ports[0].label = "http";
  ports[0].host_port = 8080;
  ports[0].to = 80;
  ports[1].label = "Dns_udp";
  ports[1].host_port = 5353;
  ports[1].to = 53;
  std::map<std::string, std::string> env = {{"KEEP", "1"}};
  net::AddNetworkEnv("10.46.0.2", ports, &env);
  std::map<std::string, std::string> want = {{"KEEP", "1"},
                                             {"OUTPOST_IP", "10.46.0.2"},
                                             {"OUTPOST_PORT_HTTP", "80"},
                                             {"OUTPOST_HOST_PORT_HTTP", "8080"},
                                             {"OUTPOST_PORT_DNS_UDP", "53"},
                                             {"OUTPOST_HOST_PORT_DNS_UDP", "5353"}};
  EXPECT_EQ(env, want);
  std::map<std::string, std::string> none;
  net::AddNetworkEnv("", {}, &none);
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace outpost::job
