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

}  // namespace
}  // namespace outpost::task
