// task/record: the fields of the task record that tests elsewhere do not
// cover (the rest goes through task_manager_test).
#include "task/record.h"

#include <string>

#include <gtest/gtest.h>

namespace outpost::task {
namespace {

TEST(TaskRecord, NetnsAndHostnameAreKeptAndAbsentMeansNone) {
  TaskRecord r;
  r.handle.config.id = "web";
  r.handle.config.SetJoined("/var/run/netns/outpost-j", "j-web");
  std::string text = EncodeTaskRecord(r);
  auto back = DecodeTaskRecord(text);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->config().Netns(), "/var/run/netns/outpost-j");
  EXPECT_EQ(back->config().Hostname(), "j-web");

  // Not written when empty, and read as "" from records that lack them
  // (every record written before networking).
  r.handle.config.SetJoined("", "");
  text = EncodeTaskRecord(r);
  EXPECT_EQ(text.find("\"netns\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"hostname\""), std::string::npos) << text;
  back = DecodeTaskRecord(text);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->config().Netns(), "");
  EXPECT_EQ(back->config().Hostname(), "");
}

TEST(TaskRecord, RestartMarkRoundTripsAndIsAbsentForAFirstStart) {
  TaskRecord r;
  r.handle.config.id = "web.api";
  std::string text = EncodeTaskRecord(r);
  EXPECT_EQ(text.find("\"restarts\""), std::string::npos) << text;
  auto back = DecodeTaskRecord(text);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->config().restarts, nullptr);
  auto mark = std::make_shared<driver::RestartMark>();
  mark->total = 12;
  mark->window_mono = {9000000000123, 9005000000456};
  mark->last_start_mono = 9005000000456;
  r.handle.config.restarts = mark;
  back = DecodeTaskRecord(EncodeTaskRecord(r));
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_NE(back->config().restarts, nullptr);
  EXPECT_EQ(back->config().restarts->total, 12u);
  EXPECT_EQ(back->config().restarts->window_mono, mark->window_mono);
  EXPECT_EQ(back->config().restarts->last_start_mono, mark->last_start_mono);
}

// A recovered task's NRI events describe it with its annotations; its hooks
// stay in its bundle.
TEST(TaskRecord, AnnotationsAreKeptWithoutHooks) {
  TaskRecord r;
  r.handle.config.id = "web.api";
  auto oci = std::make_shared<driver::TaskHooks>();
  oci->annotations = {{"io.example/team", "edge"}, {"set.by.plugin", "1"}};
  oci->bundle = "/run/outpost/bundles/web.api";
  r.handle.config.oci = oci;
  auto back = DecodeTaskRecord(EncodeTaskRecord(r));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->config().Annotations(), oci->annotations);
  ASSERT_NE(back->config().oci, nullptr);
  EXPECT_EQ(back->config().oci->bundle, "");
  r.handle.config.oci = nullptr;
  std::string text = EncodeTaskRecord(r);
  EXPECT_EQ(text.find("\"annotations\""), std::string::npos) << text;
  back = DecodeTaskRecord(text);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->config().oci, nullptr);
}

// A driver's DriverNetwork (Nomad) is kept for inspect; absent when the
// driver gave none, and what does not read as written is left out without
// losing the record.
TEST(TaskRecord, DriverNetworkRoundTripsAndBadPartsAreLeftOut) {
  TaskRecord r;
  r.handle.config.id = "web.api";
  std::string text = EncodeTaskRecord(r);
  EXPECT_EQ(text.find("\"network\""), std::string::npos) << text;
  r.handle.network.address = "10.0.0.5";
  r.handle.network.ports = {{"http", 8080}, {"db", 5432}};
  text = EncodeTaskRecord(r);
  auto back = DecodeTaskRecord(text);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->handle.network.address, "10.0.0.5");
  EXPECT_EQ(back->handle.network.ports, r.handle.network.ports);

  size_t at = text.find("8080");
  ASSERT_NE(at, std::string::npos) << text;
  std::string bad = text.substr(0, at) + "\"x\"" + text.substr(at + 4);
  back = DecodeTaskRecord(bad);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->handle.network.ports, (std::map<std::string, int32_t>{{"db", 5432}}));
  EXPECT_EQ(back->handle.network.address, "10.0.0.5");
  EXPECT_EQ(back->config().id, "web.api");
}

}  // namespace
}  // namespace outpost::task
