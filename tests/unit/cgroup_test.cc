// Cgroups against a fake cgroupfs: a temp dir of plain files laid out like
// cgroup2. Plain files differ from the kernel's in two ways the tests keep in
// mind: a write replaces the content (so a file shows the last value
// written), and mkdir does not create the interface files (so each test
// makes the ones the kernel would show).
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/sys.h"
#include "cgroup/cgroup.h"
#include "unit/test_util.h"

namespace outpost::cgroup {
namespace {

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outpost_cgroup_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    mount_ = dir_ + "/cgroup";
    root_ = mount_ + "/outpost.slice";
    ASSERT_EQ(::mkdir(mount_.c_str(), 0755), 0);
  }
  void TearDown() override { (void)sys::RemoveTree(dir_); }

  // Writes a file below the fake mount, making its directories.
  void Put(const std::string& rel, const std::string& content) {
    std::string path = mount_ + "/" + rel;
    ASSERT_TRUE(sys::MkdirAll(sys::Dirname(path), 0755).ok());
    auto fd = sys::Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd.ok()) << fd.error().message();
    ASSERT_TRUE(sys::WriteAll(fd->get(), content.data(), content.size(), path).ok());
  }
  std::string Get(const std::string& rel) {
    auto text = sys::ReadFile(mount_ + "/" + rel);
    return text.ok() ? *text : "<" + text.error().message() + ">";
  }
  bool IsDir(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  void Mkdir(const std::string& rel) { ASSERT_TRUE(sys::MkdirAll(mount_ + "/" + rel, 0755).ok()); }

  // A host with every controller, the root cgroup's and outpost.slice's
  // files in place.
  std::unique_ptr<Cgroups> SetupFull(const std::string& controllers = "cpuset cpu io memory hugetlb pids rdma misc") {
    Put("cgroup.controllers", controllers + "\n");
    Put("cgroup.subtree_control", "");
    Put("cpuset.cpus.effective", "0-3\n");
    Put("cpuset.mems.effective", "0\n");
    Put("outpost.slice/cgroup.subtree_control", "");
    Put("outpost.slice/cpuset.cpus.effective", "0-1\n");
    Put("outpost.slice/cpuset.mems.effective", "0\n");
    return Cgroups::Setup({root_, mount_});
  }

  // A task cgroup with the files a limit write needs.
  std::string MakeTaskDir(const std::string& job, const std::string& task) {
    std::string rel = "outpost.slice/" + job + "/" + task;
    for (const char* f : {"cpu.weight", "cpu.max", "cpuset.cpus", "cpuset.mems", "memory.max", "memory.high",
                          "memory.low", "memory.swap.max", "pids.max", "io.weight", "io.max", "cgroup.procs"}) {
      Put(rel + "/" + f, "");
    }
    return mount_ + "/" + rel;
  }

  std::string dir_, mount_, root_;
};

TEST_F(CgroupTest, FindCgroup2Mount) {
  const std::string v1 =
      "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
      "32 25 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
      "33 32 0:28 / /sys/fs/cgroup/memory rw,nosuid shared:10 - cgroup cgroup rw,memory\n";
  EXPECT_EQ(FindCgroup2Mount(v1), "");
  EXPECT_EQ(FindCgroup2Mount(v1 + "34 32 0:29 / /sys/fs/cgroup/unified rw,nosuid shared:11 - cgroup2 cgroup2 rw\n"),
            "/sys/fs/cgroup/unified");
  // Optional fields before " - ", an escaped space, /sys/fs/cgroup preferred.
  EXPECT_EQ(FindCgroup2Mount("40 1 0:40 / /mnt/my\\040cg rw master:3 shared:4 - cgroup2 none rw\n"),
            "/mnt/my cg");
  EXPECT_EQ(FindCgroup2Mount("40 1 0:40 / /mnt/cg rw - cgroup2 none rw\n"
                             "36 25 0:30 / /sys/fs/cgroup rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n"),
            "/sys/fs/cgroup");
}

TEST_F(CgroupTest, SetupWithoutControllersFile) {
  auto cg = Cgroups::Setup({root_, mount_});
  EXPECT_FALSE(cg->available());
  EXPECT_EQ(cg->reason(), "cgroup2 at " + mount_ + " is not usable: open '" + mount_ +
                              "/cgroup.controllers': No such file or directory");
  EXPECT_FALSE(IsDir(root_));
}

TEST_F(CgroupTest, SetupWithNoControllers) {
  for (const char* content : {"", "\n", "hugetlb rdma misc\n"}) {
    Put("cgroup.controllers", content);
    auto cg = Cgroups::Setup({root_, mount_});
    EXPECT_FALSE(cg->available()) << content;
    EXPECT_EQ(cg->reason(), "cgroup2 at " + mount_ + " has no controllers") << content;
    EXPECT_TRUE(cg->controllers().empty());
  }
  EXPECT_FALSE(IsDir(root_));
}

TEST_F(CgroupTest, SetupRootMustBeBelowMount) {
  Put("cgroup.controllers", "cpu memory pids\n");
  for (const std::string& root : {mount_, dir_ + "/elsewhere", mount_ + "/../x", std::string("relative")}) {
    auto cg = Cgroups::Setup({root, mount_});
    EXPECT_FALSE(cg->available()) << root;
    EXPECT_NE(cg->reason().find("is not a directory below the cgroup2 mount " + mount_), std::string::npos)
        << cg->reason();
  }
}

TEST_F(CgroupTest, SetupEnablesControllers) {
  auto cg = SetupFull();
  ASSERT_TRUE(cg->available()) << cg->reason();
  EXPECT_EQ(cg->reason(), "");
  EXPECT_EQ(cg->controllers(), (std::set<std::string>{"cpu", "cpuset", "io", "memory", "pids"}));
  EXPECT_EQ(cg->mount_point(), mount_);
  // One write per controller, in the kernel's order: the file shows the last.
  EXPECT_EQ(Get("cgroup.subtree_control"), "+pids");
  EXPECT_EQ(Get("outpost.slice/cgroup.subtree_control"), "+pids");
  EXPECT_EQ(cg->effective_cpus(), "0-1");
  EXPECT_EQ(cg->effective_mems(), "0");
  EXPECT_EQ(cg->JobPath("web"), root_ + "/web");
  EXPECT_EQ(cg->TaskPath("web", "web.api"), root_ + "/web/web.api");
  EXPECT_EQ(cg->TaskPath("", "solo"), root_ + "/_tasks/solo");
}

TEST_F(CgroupTest, SetupCreatesRootAndIntermediateLevels) {
  Put("cgroup.controllers", "cpu memory\n");
  Put("cgroup.subtree_control", "");
  Put("a/cgroup.subtree_control", "");
  // mkdir of the root works; its (fake) subtree_control does not exist, so
  // enabling there fails and is reported, but the cgroups stay usable.
  auto cg = Cgroups::Setup({mount_ + "/a/outpost.slice/", mount_ + "/"});
  ASSERT_TRUE(cg->available());
  EXPECT_EQ(cg->root(), mount_ + "/a/outpost.slice");
  EXPECT_TRUE(IsDir(mount_ + "/a/outpost.slice"));
  EXPECT_EQ(Get("cgroup.subtree_control"), "+memory");
  EXPECT_EQ(Get("a/cgroup.subtree_control"), "+memory");
  EXPECT_TRUE(cg->controllers().empty());
  std::string file = mount_ + "/a/outpost.slice/cgroup.subtree_control";
  EXPECT_EQ(cg->reason(), "cannot enable cpu in " + file + ": No such file or directory; cannot enable memory in " +
                              file + ": No such file or directory");
  EXPECT_EQ(cg->effective_cpus(), "");
}

TEST_F(CgroupTest, SetupLeavesCgroupsWithProcessesAlone) {
  Put("cgroup.controllers", "cpu memory\n");
  Put("cgroup.subtree_control", "");
  Put("a/cgroup.subtree_control", "");
  Put("a/cgroup.procs", "4242\n");
  Put("a/outpost.slice/cgroup.subtree_control", "");
  auto cg = Cgroups::Setup({mount_ + "/a/outpost.slice", mount_});
  ASSERT_TRUE(cg->available());
  EXPECT_TRUE(cg->controllers().empty());
  EXPECT_EQ(Get("a/cgroup.subtree_control"), "");  // not even the threaded controllers
  EXPECT_EQ(Get("a/outpost.slice/cgroup.subtree_control"), "");
  EXPECT_EQ(cg->reason(), "cannot enable cpu memory in " + mount_ +
                              "/a: it holds processes (4242), and cgroup v2 lets only a cgroup without processes of "
                              "its own enable controllers for its children");
}

TEST_F(CgroupTest, SetupKeepsWhatIsAlreadyEnabled) {
  Put("cgroup.controllers", "cpu memory pids\n");
  Put("cgroup.subtree_control", "cpu memory pids\n");
  Put("outpost.slice/cgroup.subtree_control", "cpu memory pids\n");
  auto cg = Cgroups::Setup({root_, mount_});
  ASSERT_TRUE(cg->available());
  EXPECT_EQ(cg->controllers(), (std::set<std::string>{"cpu", "memory", "pids"}));
  EXPECT_EQ(Get("cgroup.subtree_control"), "cpu memory pids\n");  // nothing written
  EXPECT_EQ(Get("outpost.slice/cgroup.subtree_control"), "cpu memory pids\n");
}

TEST_F(CgroupTest, ApplyWritesEachSetLimit) {
  auto cg = SetupFull();
  std::string task = MakeTaskDir("web", "web.api");
  Resources r;
  r.cpu_weight = 250;
  r.cpu_max_quota_us = 150000;
  r.cpuset_cpus = "0-1";
  r.cpuset_mems = "0";
  r.memory_max = 268435456;
  r.memory_high = 201326592;
  r.memory_low = 67108864;
  r.memory_swap_max = 0;
  r.pids_max = 64;
  r.io_weight = 200;
  r.io_max.push_back({"/dev/sda", 8, 0, 1048576, 0, 0, 100});
  ASSERT_TRUE(cg->Apply(task, r).ok());
  std::string rel = "outpost.slice/web/web.api/";
  EXPECT_EQ(Get(rel + "cpu.weight"), "250");
  EXPECT_EQ(Get(rel + "cpu.max"), "150000 100000");
  EXPECT_EQ(Get(rel + "cpuset.cpus"), "0-1");
  EXPECT_EQ(Get(rel + "cpuset.mems"), "0");
  EXPECT_EQ(Get(rel + "memory.max"), "268435456");
  EXPECT_EQ(Get(rel + "memory.high"), "201326592");
  EXPECT_EQ(Get(rel + "memory.low"), "67108864");
  EXPECT_EQ(Get(rel + "memory.swap.max"), "0");
  EXPECT_EQ(Get(rel + "pids.max"), "64");
  EXPECT_EQ(Get(rel + "io.weight"), "default 200");
  EXPECT_EQ(Get(rel + "io.max"), "8:0 rbps=1048576 wbps=max riops=max wiops=100");
}

TEST_F(CgroupTest, ApplyWritesOnlyWhatIsSet) {
  auto cg = SetupFull();
  std::string task = MakeTaskDir("web", "web.api");
  Put("outpost.slice/web/web.api/cpu.max", "untouched");
  Resources r;
  r.pids_max = 0;  // 0 is a limit (no forks), not "unset"
  ASSERT_TRUE(cg->Apply(task, r).ok());
  EXPECT_EQ(Get("outpost.slice/web/web.api/pids.max"), "0");
  EXPECT_EQ(Get("outpost.slice/web/web.api/cpu.max"), "untouched");
  EXPECT_EQ(Get("outpost.slice/web/web.api/memory.max"), "");
  EXPECT_EQ(Get("outpost.slice/web/web.api/cpu.weight"), "");
}

TEST_F(CgroupTest, ApplyCpuMaxFormats) {
  auto cg = SetupFull();
  std::string task = MakeTaskDir("j", "j.t");
  Resources r;
  r.cpu_max_quota_us = 50000;
  r.cpu_max_period_us = 250000;
  ASSERT_TRUE(cg->Apply(task, r).ok());
  EXPECT_EQ(Get("outpost.slice/j/j.t/cpu.max"), "50000 250000");
  r.cpu_max_quota_us = -1;  // no quota, only a period
  ASSERT_TRUE(cg->Apply(task, r).ok());
  EXPECT_EQ(Get("outpost.slice/j/j.t/cpu.max"), "max 250000");
}

TEST_F(CgroupTest, ApplyErrorNamesFileAndValue) {
  auto cg = SetupFull();
  Mkdir("outpost.slice/web/web.api");
  Resources r;
  r.memory_max = 268435456;
  Status st = cg->Apply(root_ + "/web/web.api", r);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(),
            "write \"268435456\" to " + root_ + "/web/web.api/memory.max: No such file or directory");
}

TEST_F(CgroupTest, CheckMissingController) {
  auto cg = SetupFull("cpu pids");
  ASSERT_TRUE(cg->available());
  Resources r;
  r.memory_max = 64 << 20;
  r.cpu_weight = 100;
  r.pids_max = 10;
  r.io_weight = 100;
  EXPECT_EQ(cg->Check(r), (std::vector<std::string>{
                              "memory.max needs the memory controller, which is not available here (enabled: cpu pids)",
                              "io.weight needs the io controller, which is not available here (enabled: cpu pids)",
                          }));
  EXPECT_TRUE(cg->Check(Resources{}).empty());
}

TEST_F(CgroupTest, CheckWithoutCgroupV2) {
  Put("cgroup.controllers", "");
  auto cg = Cgroups::Setup({root_, mount_});
  Resources r;
  EXPECT_TRUE(cg->Check(r).empty());  // no limits: fine anywhere
  r.pids_max = 10;
  EXPECT_EQ(cg->Check(r), (std::vector<std::string>{"resource limits need cgroup v2, which is not usable on this node "
                                                    "(cgroup2 at " + mount_ + " has no controllers); set "
                                                    "cgroup_allow_without_limits in the agent config to run such "
                                                    "jobs without limits"}));
  EXPECT_TRUE(cg->Check(r, /*allow_without_limits=*/true).empty());
}

// cpu and pids but no memory controller: with cgroup_allow_without_limits
// a memory limit is let through, left out of the writes and reported as
// not enforced, naming the controller; the others are enforced.
TEST_F(CgroupTest, MissingControllerAllowedIsNotEnforcedPerLimit) {
  auto cg = SetupFull("cpu pids");
  std::string task = MakeTaskDir("web", "web.api");
  Resources r;
  r.memory_max = 64 << 20;
  r.cpu_weight = 100;
  r.pids_max = 10;
  r.unified["memory.oom.group"] = "1";
  EXPECT_EQ(cg->Check(r).size(), 2u);  // memory.max and memory.oom.group refused
  EXPECT_TRUE(cg->Check(r, /*allow_without_limits=*/true).empty());
  ASSERT_TRUE(cg->Apply(task, r).ok());
  std::string rel = "outpost.slice/web/web.api/";
  EXPECT_EQ(Get(rel + "cpu.weight"), "100");
  EXPECT_EQ(Get(rel + "pids.max"), "10");
  EXPECT_EQ(Get(rel + "memory.max"), "");  // not written
  std::vector<LimitState> got = cg->Enforcement(r, task);
  ASSERT_EQ(got.size(), 4u);
  const std::string why = "the memory controller is not enabled here (enabled: cpu pids)";
  EXPECT_EQ(got[0].file, "cpu.weight");
  EXPECT_EQ(got[0].value, "100");
  EXPECT_EQ(got[0].not_enforced, "");
  EXPECT_EQ(got[1].file, "memory.max");
  EXPECT_EQ(got[1].value, "67108864");
  EXPECT_EQ(got[1].not_enforced, why);
  EXPECT_EQ(got[2].file, "pids.max");
  EXPECT_EQ(got[2].not_enforced, "");
  EXPECT_EQ(got[3].file, "memory.oom.group");
  EXPECT_EQ(got[3].not_enforced, why);
  EXPECT_EQ(NotEnforcedSummary(got), "memory.max, memory.oom.group not enforced: " + why);
  // A value the node cannot take is still refused.
  r.cpu_weight = 20000;
  EXPECT_EQ(cg->Check(r, true), (std::vector<std::string>{"cpu.weight must be between 1 and 10000 (got 20000)"}));
}

TEST_F(CgroupTest, EnforcementWithoutCgroupV2OrOutsideACgroup) {
  Put("cgroup.controllers", "");
  auto none = Cgroups::Setup({root_, mount_});
  Resources r;
  r.pids_max = 10;
  r.memory_max = 1 << 30;
  std::vector<LimitState> got = none->Enforcement(r, "");
  ASSERT_EQ(got.size(), 2u);
  const std::string why = "cgroup v2 is not usable on this node (cgroup2 at " + mount_ + " has no controllers)";
  EXPECT_EQ(got[0].not_enforced, why);
  EXPECT_EQ(got[1].not_enforced, why);
  EXPECT_EQ(NotEnforcedSummary(got), "memory.max, pids.max not enforced: " + why);
  EXPECT_TRUE(none->Enforcement(Resources{}, "").empty());
  // With cgroup v2, a task that runs in no cgroup (started before it was
  // usable) has none of its limits enforced; in its cgroup, all of them.
  Put("cgroup.controllers", "cpuset cpu io memory pids\n");
  auto cg = SetupFull();
  for (const LimitState& l : cg->Enforcement(r, "")) EXPECT_NE(l.not_enforced.find("outside a cgroup"), std::string::npos);
  for (const LimitState& l : cg->Enforcement(r, root_ + "/web/web.api")) EXPECT_EQ(l.not_enforced, "") << l.file;
  EXPECT_EQ(NotEnforcedSummary(cg->Enforcement(r, root_ + "/web/web.api")), "");
}

TEST_F(CgroupTest, CheckValues) {
  auto cg = SetupFull();
  Put("outpost.slice/memory.swap.max", "max\n");
  Resources r;
  r.cpuset_cpus = "0-7";
  r.cpuset_mems = "0";
  r.memory_max = 1000;
  r.memory_high = 1 << 20;  // exactly the minimum: fine
  r.memory_swap_max = 0;
  r.io_max.push_back({"4095:4095", 4095, 4095, 1, 0, 0, 0});
  r.io_max.push_back({"/dev/nope", 4095, 4094, 0, 1, 0, 0});
  EXPECT_EQ(cg->Check(r), (std::vector<std::string>{
                              "cpuset.cpus \"0-7\" is outside this node's CPUs 0-1",
                              "memory.max must be at least 1MiB",
                              "io.max device 4095:4095 does not exist",
                              "io.max device /dev/nope (4095:4094) does not exist",
                          }));
  Resources bad;
  bad.cpuset_mems = "0,x";
  bad.cpu_weight = 20000;
  bad.cpu_max_quota_us = 500;
  EXPECT_EQ(cg->Check(bad), (std::vector<std::string>{
                                "cpu.weight must be between 1 and 10000 (got 20000)",
                                "cpu.max quota must be at least 1000 microseconds",
                                "cpuset.mems \"0,x\" is not a list like 0-3,5",
                            }));
  // A kernel without swap accounting has no memory.swap.max.
  ASSERT_EQ(::unlink((root_ + "/memory.swap.max").c_str()), 0);
  Resources swap;
  swap.memory_swap_max = 0;
  EXPECT_EQ(cg->Check(swap),
            (std::vector<std::string>{"memory.swap.max needs swap accounting, which this kernel does not have"}));
}

TEST(CgroupParse, CpuList) {
  std::set<int> s;
  ASSERT_TRUE(ParseCpuList("0-3,5\n", &s));
  EXPECT_EQ(s, (std::set<int>{0, 1, 2, 3, 5}));
  ASSERT_TRUE(ParseCpuList("7", &s));
  EXPECT_EQ(s, (std::set<int>{7}));
  ASSERT_TRUE(ParseCpuList("\n", &s));  // an empty cpuset.cpus.effective
  EXPECT_TRUE(s.empty());
  for (const char* bad : {"a", "3-1", "1-", "-1", "1,,2", ",", "1 2", "0-99999999", "1-2-3"}) {
    EXPECT_FALSE(ParseCpuList(bad, &s)) << bad;
  }
}

TEST(CgroupParse, FlatKeyed) {
  EXPECT_EQ(ParseFlatKeyed("a 1\nb 2\n"), (std::map<std::string, uint64_t>{{"a", 1}, {"b", 2}}));
  EXPECT_EQ(ParseFlatKeyed("x max\ny 18446744073709551615\nz\n\nw 1 2\n"),
            (std::map<std::string, uint64_t>{{"y", 18446744073709551615ull}}));
}

TEST_F(CgroupTest, Stats) {
  auto cg = SetupFull();
  std::string rel = "outpost.slice/web/web.api/";
  Put(rel + "memory.current", "10698752\n");
  Put(rel + "memory.stat",
      "anon 4096000\nfile 5120000\nkernel 372736\nkernel_stack 16384\npagetables 45056\nsock 0\nshmem 0\n"
      "file_mapped 2433024\nfile_dirty 0\nfile_writeback 0\nswapcached 0\nanon_thp 0\ninactive_anon 4055040\n"
      "active_anon 40960\ninactive_file 3239936\nactive_file 1880064\nunevictable 0\nslab 299504\n"
      "pgfault 4503\npgmajfault 27\nworkingset_refault_anon 0\n");
  Put(rel + "memory.events", "low 0\nhigh 12\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n");
  Put(rel + "cpu.stat",
      "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\ncore_sched.force_idle_usec 0\n"
      "nr_periods 120\nnr_throttled 7\nthrottled_usec 456789\nnr_bursts 0\nburst_usec 0\n");
  Put(rel + "pids.current", "3\n");
  Put(rel + "io.stat",
      "254:0 rbytes=3178496 wbytes=8192 rios=104 wios=2 dbytes=0 dios=0\n"
      "8:16 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n");
  int64_t before = WallNanos();
  auto st = cg->Stats(root_ + "/web/web.api");
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_GE(st->timestamp_unix_nanos, before);
  EXPECT_EQ(st->memory_current, 10698752u);
  EXPECT_EQ(st->memory_swap_current, 0u);
  EXPECT_EQ(st->memory_stat.at("anon"), 4096000u);
  EXPECT_EQ(st->memory_stat.at("file"), 5120000u);
  EXPECT_EQ(st->memory_stat.at("pgmajfault"), 27u);
  EXPECT_EQ(st->memory_events.at("oom_kill"), 1u);
  EXPECT_EQ(st->memory_events.at("high"), 12u);
  EXPECT_EQ(st->cpu_usage_usec, 1234567u);
  EXPECT_EQ(st->cpu_user_usec, 1000000u);
  EXPECT_EQ(st->cpu_system_usec, 234567u);
  EXPECT_EQ(st->cpu_nr_periods, 120u);
  EXPECT_EQ(st->cpu_nr_throttled, 7u);
  EXPECT_EQ(st->cpu_throttled_usec, 456789u);
  EXPECT_EQ(st->pids_current, 3u);
  EXPECT_EQ(st->io_stat.at("254:0").at("rbytes"), 3178496u);
  EXPECT_EQ(st->io_stat.at("254:0").at("wios"), 2u);
  EXPECT_EQ(st->io_stat.at("8:16").at("rios"), 1u);
  // memory.swap.current is missing (no swap accounting): not measured.
  EXPECT_EQ(st->measured, (std::vector<std::string>{"memory.current", "memory.stat", "memory.events", "cpu.stat",
                                                    "pids.current", "io.stat"}));

  auto gone = cg->Stats(root_ + "/web/nope");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), Code::kNotFound);
}

TEST_F(CgroupTest, EnsureJobAndCreateTask) {
  auto cg = SetupFull("cpu memory pids");
  Put("outpost.slice/web/cgroup.subtree_control", "");
  Put("outpost.slice/web/memory.max", "");
  Resources job;
  job.memory_max = 512 << 20;
  ASSERT_TRUE(cg->EnsureJob("web", job).ok());
  EXPECT_EQ(Get("outpost.slice/web/cgroup.subtree_control"), "+pids");
  EXPECT_EQ(Get("outpost.slice/web/memory.max"), "536870912");

  // A fresh task cgroup (no limits: nothing to write into the fake dir).
  auto fd = cg->CreateTask("web", "web.api", Resources{});
  ASSERT_TRUE(fd.ok()) << fd.error().message();
  EXPECT_TRUE(fd->valid());
  EXPECT_TRUE(IsDir(root_ + "/web/web.api"));

  // An existing, empty one is reused and gets the limits.
  MakeTaskDir("web", "web.db");
  Resources r;
  r.memory_max = 128 << 20;
  auto fd2 = cg->CreateTask("web", "web.db", r);
  ASSERT_TRUE(fd2.ok()) << fd2.error().message();
  EXPECT_EQ(Get("outpost.slice/web/web.db/memory.max"), "134217728");

  // One that still holds processes is not.
  Put("outpost.slice/web/web.db/cgroup.procs", "123\n456\n");
  auto busy = cg->CreateTask("web", "web.db", r);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().message(), "cgroup " + root_ + "/web/web.db still has processes: 123 456");
  EXPECT_EQ(cg->Pids(root_ + "/web/web.db"), (std::vector<pid_t>{123, 456}));

  // A failed limit write removes the cgroup it created.
  auto bad = cg->CreateTask("web", "web.new", r);
  ASSERT_FALSE(bad.ok());
  EXPECT_FALSE(IsDir(root_ + "/web/web.new"));

  for (const char* name : {"", "..", "a/b", "cgroup.procs", "memory.max"}) {
    EXPECT_EQ(cg->CreateTask("web", name, r).error().code(), Code::kInvalidArgument) << name;
  }
  EXPECT_EQ(cg->EnsureJob("../x", Resources{}).error().code(), Code::kInvalidArgument);
}

TEST_F(CgroupTest, UnavailableRefusesToCreate) {
  Put("cgroup.controllers", "");
  auto cg = Cgroups::Setup({root_, mount_});
  Status st = cg->EnsureJob("web", Resources{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "cgroup v2 is not available: cgroup2 at " + mount_ + " has no controllers");
  EXPECT_FALSE(cg->CreateTask("web", "web.api", Resources{}).ok());
  EXPECT_TRUE(cg->CleanLeftovers({}).empty());
}

TEST_F(CgroupTest, KillWritesCgroupKill) {
  auto cg = SetupFull();
  Put("outpost.slice/web/web.api/cgroup.kill", "");
  ASSERT_TRUE(cg->Kill(root_ + "/web/web.api").ok());
  EXPECT_EQ(Get("outpost.slice/web/web.api/cgroup.kill"), "1");
  EXPECT_TRUE(cg->Kill(root_ + "/web/missing").ok());
  EXPECT_EQ(cg->Kill(root_).error().code(), Code::kInvalidArgument);
  EXPECT_EQ(cg->Kill(mount_ + "/other").error().code(), Code::kInvalidArgument);
  EXPECT_EQ(cg->Kill(root_ + "/web/../../x").error().code(), Code::kInvalidArgument);
}

TEST_F(CgroupTest, KillByFreezeWithoutCgroupKill) {
  auto cg = SetupFull();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) ::pause();
  }
  // An older kernel: cgroup.freeze and cgroup.events, no cgroup.kill; the
  // process sits in a child cgroup, which the kill must reach too.
  Put("outpost.slice/web/web.api/cgroup.freeze", "0\n");
  Put("outpost.slice/web/web.api/cgroup.events", "populated 1\nfrozen 1\n");
  Put("outpost.slice/web/web.api/cgroup.procs", "");
  Put("outpost.slice/web/web.api/sub/cgroup.procs", std::to_string(child) + "\n");
  ASSERT_TRUE(cg->Kill(root_ + "/web/web.api").ok());
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_EQ(Get("outpost.slice/web/web.api/cgroup.freeze"), "0");  // thawed again
}

TEST_F(CgroupTest, RemoveOnlyRmdirs) {
  auto cg = SetupFull();
  Mkdir("outpost.slice/web/web.api");
  Put("outpost.slice/web/web.db/cgroup.procs", "");
  EXPECT_TRUE(cg->Remove(root_ + "/web/web.api").ok());
  EXPECT_FALSE(IsDir(root_ + "/web/web.api"));
  EXPECT_TRUE(cg->Remove(root_ + "/web/web.api").ok());  // already gone: fine
  EXPECT_FALSE(cg->Remove(root_ + "/web/web.db").ok());  // never unlinks files
  EXPECT_TRUE(IsDir(root_ + "/web/web.db"));
  EXPECT_EQ(cg->Remove(root_).error().code(), Code::kInvalidArgument);
  EXPECT_EQ(cg->Remove(root_ + "/").error().code(), Code::kInvalidArgument);
  EXPECT_TRUE(IsDir(root_));

  EXPECT_TRUE(cg->RemoveJobIfEmpty("web").ok());  // still has web.db
  EXPECT_TRUE(IsDir(root_ + "/web"));
  Mkdir("outpost.slice/empty");
  EXPECT_TRUE(cg->RemoveJobIfEmpty("empty").ok());
  EXPECT_FALSE(IsDir(root_ + "/empty"));
  EXPECT_TRUE(cg->RemoveJobIfEmpty("never").ok());
}

TEST_F(CgroupTest, CleanLeftoversKeepsKnownTasks) {
  auto cg = SetupFull();
  Mkdir("outpost.slice/web/web.api");
  Mkdir("outpost.slice/web/web.old");
  Mkdir("outpost.slice/gone/gone.x/nested");
  Mkdir("outpost.slice/_tasks");
  auto removed = cg->CleanLeftovers({root_ + "/web/web.api"});
  EXPECT_EQ(removed, (std::vector<std::string>{
                         root_ + "/_tasks",
                         root_ + "/gone/gone.x/nested",
                         root_ + "/gone/gone.x",
                         root_ + "/gone",
                         root_ + "/web/web.old",
                     }));
  EXPECT_TRUE(IsDir(root_ + "/web/web.api"));
  EXPECT_TRUE(IsDir(root_));
}

void RewriteInPlace(const std::string& path, const std::string& content) {
  // In place (not a rename) so the watched inode sees IN_MODIFY, like the
  // kernel's notification on memory.events.
  auto fd = sys::Open(path, O_WRONLY | O_TRUNC);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(sys::WriteAll(fd->get(), content.data(), content.size(), path).ok());
}

TEST_F(CgroupTest, OomWatcherFiresOnOomKillIncrease) {
  auto loop = outpost::testing::MakeLoop();
  ASSERT_TRUE(loop);
  std::string cgroup = mount_ + "/outpost.slice/web/web.api";
  Put("outpost.slice/web/web.api/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 2\noom_group_kill 0\n");
  auto w = OomWatcher::Create(loop.get());
  ASSERT_TRUE(w.ok()) << w.error().message();
  std::vector<uint64_t> fired;
  ASSERT_TRUE((*w)->Watch(cgroup, [&](uint64_t n) { fired.push_back(n); }).ok());

  // Other counters change: no callback.
  RewriteInPlace(cgroup + "/memory.events", "low 0\nhigh 5\nmax 9\noom 1\noom_kill 2\noom_group_kill 0\n");
  outpost::testing::RunUntil(loop.get(), [] { return false; }, 100 * kNanosPerMilli);
  EXPECT_TRUE(fired.empty());

  RewriteInPlace(cgroup + "/memory.events", "low 0\nhigh 5\nmax 9\noom 2\noom_kill 3\noom_group_kill 0\n");
  ASSERT_TRUE(outpost::testing::RunUntil(loop.get(), [&] { return !fired.empty(); }));
  EXPECT_EQ(fired, (std::vector<uint64_t>{3}));

  (*w)->Unwatch(cgroup);
  RewriteInPlace(cgroup + "/memory.events", "low 0\nhigh 5\nmax 9\noom 3\noom_kill 4\noom_group_kill 0\n");
  outpost::testing::RunUntil(loop.get(), [] { return false; }, 100 * kNanosPerMilli);
  EXPECT_EQ(fired, (std::vector<uint64_t>{3}));

  Status missing = (*w)->Watch(mount_ + "/nope", [](uint64_t) {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("memory.events"), std::string::npos);
}

TEST_F(CgroupTest, OomWatcherMayBeDestroyedInItsCallback) {
  auto loop = outpost::testing::MakeLoop();
  ASSERT_TRUE(loop);
  std::string cgroup = mount_ + "/t";
  Put("t/memory.events", "oom_kill 0\n");
  auto w = OomWatcher::Create(loop.get());
  ASSERT_TRUE(w.ok());
  std::unique_ptr<OomWatcher> watcher = std::move(w.value());
  bool fired = false;
  ASSERT_TRUE(watcher->Watch(cgroup, [&](uint64_t) {
    fired = true;
    watcher.reset();
  }).ok());
  RewriteInPlace(cgroup + "/memory.events", "oom_kill 1\n");
  ASSERT_TRUE(outpost::testing::RunUntil(loop.get(), [&] { return fired; }));
  EXPECT_EQ(watcher, nullptr);
}

// The out-of-line Resources a TaskConfig and a TaskSpec keep (cgroup/resources.h).
TEST(ResourcesBoxTest, NoLimitsHoldNothingAndReadAsEmpty) {
  ResourcesBox box;
  EXPECT_FALSE(box.held());
  EXPECT_FALSE(box->Any());
  EXPECT_EQ(box->memory_max, -1);
  Resources none;
  box = none;
  EXPECT_FALSE(box.held());
  const Resources& r = box;
  EXPECT_EQ(r.cpu_max_period_us, 100000u);
}

TEST(ResourcesBoxTest, LimitsAreKeptAndCopiedDeep) {
  Resources r;
  r.memory_max = 64 << 20;
  r.unified["memory.oom.group"] = "1";
  ResourcesBox a = r;
  ASSERT_TRUE(a.held());
  ResourcesBox b = a;
  b.mutable_get().memory_max = 32 << 20;
  EXPECT_EQ(a->memory_max, 64 << 20);
  EXPECT_EQ(b->memory_max, 32 << 20);
  EXPECT_EQ(b->unified.at("memory.oom.group"), "1");
  b = Resources();  // cleared: holds nothing again
  EXPECT_FALSE(b.held());
  ResourcesBox c;
  c.mutable_get().pids_max = 10;
  EXPECT_TRUE(c.held());
  EXPECT_EQ(c->pids_max, 10);
}

TEST(ResourcesBoxTest, APeriodAloneIsKept) {
  // Any() leaves cpu_max_period_us out; the box must not drop it.
  Resources r;
  r.cpu_max_period_us = 50000;
  ResourcesBox box = r;
  EXPECT_TRUE(box.held());
  EXPECT_EQ(box->cpu_max_period_us, 50000u);
}

}  // namespace
}  // namespace outpost::cgroup
