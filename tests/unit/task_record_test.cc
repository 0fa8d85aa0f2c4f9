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
  r.handle.config.netns = "/var/run/netns/outpost-j";
  r.handle.config.hostname = "j-web";
  std::string text = EncodeTaskRecord(r);
  auto back = DecodeTaskRecord(text);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->config().netns, "/var/run/netns/outpost-j");
  EXPECT_EQ(back->config().hostname, "j-web");

  // Not written when empty, and read as "" from records that lack them
  // (every record written before networking).
  r.handle.config.netns.clear();
  r.handle.config.hostname.clear();
  text = EncodeTaskRecord(r);
  EXPECT_EQ(text.find("\"netns\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"hostname\""), std::string::npos) << text;
  back = DecodeTaskRecord(text);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->config().netns, "");
  EXPECT_EQ(back->config().hostname, "");
}

}  // namespace
}  // namespace outpost::task
