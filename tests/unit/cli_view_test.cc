// The CLI's formatting and filters: ages, job-name globs, ps's filter, the
// counts of `outpost status`, run's progress lines, update's errors.
#include <fnmatch.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/job_view.h"
#include "cli/util.h"
#include "job.pb.h"

namespace outpost::cli {
namespace {

TEST(CliAge, LikeDocker) {
  EXPECT_EQ(FormatAge(0), "0s");
  EXPECT_EQ(FormatAge(-5), "0s");
  EXPECT_EQ(FormatAge(45), "45s");
  EXPECT_EQ(FormatAge(59), "59s");
  EXPECT_EQ(FormatAge(60), "1m");
  EXPECT_EQ(FormatAge(150), "2m");
  EXPECT_EQ(FormatAge(3599), "59m");
  EXPECT_EQ(FormatAge(3600), "1h");
  EXPECT_EQ(FormatAge(3 * 3600 + 59 * 60), "3h");
  EXPECT_EQ(FormatAge(86399), "23h");
  EXPECT_EQ(FormatAge(86400), "1d");
  EXPECT_EQ(FormatAge(5 * 86400 + 7 * 3600), "5d");
  EXPECT_EQ(FormatAge(400 * 86400), "400d");
  EXPECT_EQ(Age(0), "-");
}

TEST(CliGlob, ShellPatterns) {
  EXPECT_TRUE(GlobMatch("web*", "web"));
  EXPECT_TRUE(GlobMatch("web*", "web-2"));
  EXPECT_FALSE(GlobMatch("web*", "myweb"));
  EXPECT_TRUE(GlobMatch("*db*", "mydb1"));
  EXPECT_TRUE(GlobMatch("job-?", "job-3"));
  EXPECT_FALSE(GlobMatch("job-?", "job-10"));
  EXPECT_TRUE(GlobMatch("job-[0-4]", "job-4"));
  EXPECT_FALSE(GlobMatch("job-[0-4]", "job-5"));
  EXPECT_TRUE(GlobMatch("exact", "exact"));
  EXPECT_FALSE(GlobMatch("exact", "exact2"));
}

// GlobMatch is byte-wise and hand-written (fnmatch costs the static binary
// libc's multibyte code): it agrees with fnmatch on every pattern and name
// here, edge cases included.
TEST(CliGlob, AgreesWithFnmatch) {
  const char* patterns[] = {"",      "*",      "**",    "?",      "a*b",    "*a*b*", "a?c",   "[ab]c",  "[!ab]c",
                            "[^a]c", "[a-c]*", "[]a]",  "[!]a]",  "[a-]",   "[z-a]", "[",     "a[",     "[ab",
                            "\\*",   "a\\?",   "*-[0-9]", "web-?*", "*x*y*z", "a*a*a*a*b", "[-a]"};
  const char* names[] = {"",  "a",    "b",      "ab",  "abc",    "acb",  "bc",     "cc",     "ac",  "]",    "-",  "[",
                         "a[", "[ab", "*",      "a?",  "web-1",  "web-", "web-10", "xayaz", "aaaaaaaaab", "aaaa", "z"};
  for (const char* p : patterns) {
    for (const char* n : names) {
      EXPECT_EQ(GlobMatch(p, n), ::fnmatch(p, n, 0) == 0) << "pattern '" << p << "' name '" << n << "'";
    }
  }
}

TEST(CliPsFilter, NamesAndStatuses) {
  EXPECT_TRUE(JobMatches("web", "running", {}, {}));
  EXPECT_TRUE(JobMatches("web", "running", {"db", "w*"}, {}));
  EXPECT_FALSE(JobMatches("web", "running", {"db"}, {}));
  EXPECT_TRUE(JobMatches("web", "failed", {}, {"backoff", "failed"}));
  EXPECT_FALSE(JobMatches("web", "running", {}, {"backoff", "failed"}));
  EXPECT_FALSE(JobMatches("web", "failed", {"db*"}, {"failed"}));  // both must match
  EXPECT_TRUE(JobMatches("db1", "failed", {"db*"}, {"failed"}));
}

TEST(CliPsFilter, StatusWordsAreTheDocumentedOnes) {
  const std::vector<std::string> want = {"pending",  "running",  "degraded", "backoff",    "failed",
                                         "complete", "stopping", "stopped",  "restarting", "removing"};
  EXPECT_EQ(JobStatusWords(), want);
}

TEST(CliCounts, InOrderThenOthers) {
  auto c = CountWords({"stopped", "running", "running", "odd", "failed"}, {"running", "failed", "stopped", "pending"});
  std::vector<std::pair<std::string, int>> want = {{"running", 2}, {"failed", 1}, {"stopped", 1}, {"odd", 1}};
  EXPECT_EQ(c, want);
  EXPECT_EQ(CountsText(c), "2 running, 1 failed, 1 stopped, 1 odd");
  EXPECT_EQ(CountsText(CountWords({}, {"running"})), "none");
}

TEST(CliCommandText, CommandArgsQuotedOrTheDriversConfig) {
  char a0[] = "-c", a1[] = "echo hi";
  char* args[] = {a0, a1};
  EXPECT_EQ(CommandText("/bin/sh", args, 2), "/bin/sh -c \"echo hi\"");
  EXPECT_EQ(CommandText("/bin/true", nullptr, 0), "/bin/true");
  // A Nomad driver's task: what runs is in its config.
  EXPECT_EQ(CommandText(nullptr, nullptr, 0), "(in the driver's config)");
  EXPECT_EQ(CommandText("", nullptr, 0), "(in the driver's config)");
}

outpost_v1_JobTaskInfo Task(const char* name, const char* state) {
  outpost_v1_JobTaskInfo t = outpost_v1_JobTaskInfo_init_zero;
  t.name = const_cast<char*>(name);
  t.state = const_cast<char*>(state);
  return t;
}

TEST(CliProgress, TaskWords) {
  auto t = Task("s", "starting");
  EXPECT_EQ(TaskProgress(t), "starting");
  t = Task("s", "running");
  EXPECT_EQ(TaskProgress(t), "running");
  t.healthy = true;
  EXPECT_EQ(TaskProgress(t), "healthy");
  t.health = const_cast<char*>("unhealthy");
  EXPECT_EQ(TaskProgress(t), "unhealthy");
  t = Task("s", "backoff");
  t.last_exit = const_cast<char*>("exit code 1");
  EXPECT_EQ(TaskProgress(t), "backoff (exit code 1)");
  t = Task("s", "dead");
  t.completed = true;
  EXPECT_EQ(TaskProgress(t), "completed");
  t = Task("s", "dead");
  t.failed = true;
  t.last_exit = const_cast<char*>("exit code 3");
  EXPECT_EQ(TaskProgress(t), "failed (exit code 3)");
}

// A start error names the task once: its row or "JOB/TASK:" already does.
TEST(CliProgress, StartErrorsDropTheTaskPrefix) {
  auto t = Task("server", "backoff");
  t.task_id = const_cast<char*>("web.server");
  t.last_exit = const_cast<char*>("start failed: start task web.server: command \"nope\" not found");
  EXPECT_EQ(TaskProgress(t), "backoff (start failed: command \"nope\" not found)");
  t.reason = const_cast<char*>("start task web.server: user \"x\" unknown");
  EXPECT_EQ(TaskNote(t, 0), "user \"x\" unknown");
  // Another task's prefix, or one in the middle, stays.
  t.reason = const_cast<char*>("start task web.other: boom");
  EXPECT_EQ(TaskNote(t, 0), "start task web.other: boom");
  EXPECT_EQ(WithoutTaskPrefix("hook: start task web.server: x", t), "hook: start task web.server: x");
  t = Task("server", "dead");
  t.task_id = const_cast<char*>("web.server");
  t.failed = true;
  t.last_exit = const_cast<char*>("start failed: start task web.server: exec: Permission denied");
  EXPECT_EQ(TaskProgress(t), "failed (start failed: exec: Permission denied)");
}

TEST(CliProgress, LinesOnlyForChanges) {
  outpost_v1_JobTaskInfo tasks[2] = {Task("a", "pending"), Task("b", "pending")};
  JobInfo j = outpost_v1_JobInfo_init_zero;
  j.id = const_cast<char*>("web");
  j.tasks = tasks;
  j.tasks_count = 2;
  std::vector<std::string> shown;
  EXPECT_EQ(ProgressLines(j, &shown), (std::vector<std::string>{"web/a: pending", "web/b: pending"}));
  EXPECT_TRUE(ProgressLines(j, &shown).empty());
  tasks[1].state = const_cast<char*>("running");
  EXPECT_EQ(ProgressLines(j, &shown), (std::vector<std::string>{"web/b: running"}));
  tasks[1].healthy = true;
  EXPECT_EQ(ProgressLines(j, &shown), (std::vector<std::string>{"web/b: healthy"}));
  EXPECT_TRUE(ProgressLines(j, &shown).empty());
}

TEST(CliUpdate, ErrorNamesTheFlag) {
  std::string agent = "tasks[1].resources.memory.max: invalid size \"lots\"\ntasks[1].resources.pids.max: must be > 0";
  EXPECT_EQ(UpdateErrorText(agent, {{"tasks[1].resources.memory.max", "--memory-max"}}, "web/api"),
            "update web/api: --memory-max: invalid size \"lots\"\ntasks[1].resources.pids.max: must be > 0 "
            "(nothing was changed)");
  EXPECT_EQ(UpdateErrorText("resources.cpu.max: bad", {{"resources.cpu.max", "--cpu-max"}}, "web"),
            "update web: --cpu-max: bad (nothing was changed)");
}

}  // namespace
}  // namespace outpost::cli
