// nri/merge: ContainerUpdate merging — other containers' updates during
// CreateContainer, UpdateContainer's merged target resources (requested +
// plugins' changes, what the next plugin sees), StopContainer-style
// updates without a target, ignore_failure AND-ing and the dropping of an
// ignored failed update together with its ownership claims.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nri/merge.h"
#include "nri_merge_test_util.h"

namespace outpost::nri {
namespace {

using namespace merge_test;  // NOLINT

ContainerUpdate CpuUpdate(const std::string& id, uint64_t shares, bool ignore) {
  ContainerUpdate u{id, Resources{}, ignore};
  CpuOf(&*u.resources).shares = shares;
  return u;
}
ContainerUpdate MemUpdate(const std::string& id, int64_t limit, bool ignore) {
  ContainerUpdate u{id, Resources{}, ignore};
  Mem(&*u.resources).limit = limit;
  return u;
}

TEST(NriMergeUpdate, CreateUpdatesOfOtherContainersMergePerId) {
  CreateResult r(MakePod(), MakeContainer());
  CreateContainerResponse a, b;
  a.update = {CpuUpdate("ctr2", 256, true), CpuUpdate("ctr1", 128, true)};
  b.update = {MemUpdate("ctr2", 4096, false), MemUpdate("ctr1", 2048, true)};
  ASSERT_TRUE(r.Apply(kA, a).ok());
  ASSERT_TRUE(r.Apply(kB, b).ok());
  const auto& u = r.updates();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].container_id, "ctr2");
  EXPECT_FALSE(u[0].ignore_failure);  // AND-ed
  EXPECT_EQ(*u[0].resources->cpu->shares, 256u);
  EXPECT_EQ(*u[0].resources->memory->limit, 4096);
  EXPECT_EQ(u[1].container_id, "ctr1");
  EXPECT_TRUE(u[1].ignore_failure);
  EXPECT_EQ(r.owners().at("ctr2").simple.at(16), kA);
  EXPECT_EQ(r.owners().at("ctr2").simple.at(8), kB);
}

TEST(NriMergeUpdate, CreateIgnoredConflictingUpdateIsDroppedWhole) {
  CreateResult r(MakePod(), MakeContainer());
  CreateContainerResponse a, b, c;
  a.update = {CpuUpdate("ctr1", 256, false)};
  ContainerUpdate bad = CpuUpdate("ctr1", 512, true);
  Mem(&*bad.resources).limit = 1024;
  b.update = {bad};
  c.update = {MemUpdate("ctr1", 4096, false)};
  ASSERT_TRUE(r.Apply(kA, a).ok());
  ASSERT_TRUE(r.Apply(kB, b).ok());
  Status st = r.Apply(kC, c);
  ASSERT_TRUE(st.ok()) << Msg(st);  // kB's memory claim did not stay
  const ContainerUpdate& u = r.updates().at(0);
  EXPECT_EQ(*u.resources->cpu->shares, 256u);
  EXPECT_EQ(*u.resources->memory->limit, 4096);
  EXPECT_FALSE(u.ignore_failure);
  // Not ignored: the conflict fails the creation.
  CreateContainerResponse d;
  d.update = {CpuUpdate("ctr1", 1, false)};
  EXPECT_EQ(Msg(r.Apply("40-d", d)), ConflictMsg("40-d", kA, "CPUShares "));
}

ContainerUpdate PidsUpdate(const std::string& id, int64_t limit, bool ignore) {
  ContainerUpdate u{id, Resources{}, ignore};
  u.resources->pids_limit = limit;
  return u;
}

Resources Requested() {
  Resources r;
  Mem(&r).limit = 100;
  r.pids_limit = 64;
  return r;
}

TEST(NriMergeUpdate, TargetStartsFromTheRequestedResources) {
  UpdateResult r("ctr0", Requested());
  EXPECT_FALSE(r.target_update().has_value());
  ASSERT_TRUE(r.Apply(kA, {CpuUpdate("ctr0", 256, true)}).ok());
  const Resources& seen = r.target_resources();  // what kB is asked with
  EXPECT_EQ(*seen.memory->limit, 100);
  EXPECT_EQ(*seen.pids_limit, 64);
  EXPECT_EQ(*seen.cpu->shares, 256u);
  // The requested values are nobody's: a plugin may change them.
  ASSERT_TRUE(r.Apply(kB, {MemUpdate("ctr0", 200, false), PidsUpdate("ctr0", 128, false)}).ok());
  ASSERT_TRUE(r.target_update().has_value());
  const ContainerUpdate& u = *r.target_update();
  EXPECT_EQ(u.container_id, "ctr0");
  EXPECT_FALSE(u.ignore_failure);  // true AND false
  EXPECT_EQ(*u.resources->memory->limit, 200);
  EXPECT_EQ(*u.resources->cpu->shares, 256u);
  EXPECT_EQ(*u.resources->pids_limit, 128);
  EXPECT_EQ(*r.target_resources().memory->limit, 200);
  EXPECT_TRUE(r.others().empty());
  EXPECT_EQ(Msg(r.Apply(kC, {CpuUpdate("ctr0", 512, false)})), ConflictMsg(kC, kA, "CPUShares "));
}

TEST(NriMergeUpdate, RequestedPidsAreNotAClaim) {
  UpdateResult r("ctr0", Requested());
  ASSERT_TRUE(r.Apply(kA, {CpuUpdate("ctr0", 256, false)}).ok());
  ASSERT_TRUE(r.Apply(kB, {CpuUpdate("ctr1", 1, false)}).ok());
  Status st = r.Apply(kC, {PidsUpdate("ctr0", 32, false)});
  ASSERT_TRUE(st.ok()) << Msg(st);
  EXPECT_EQ(*r.target_update()->resources->pids_limit, 32);
}

TEST(NriMergeUpdate, NoPluginTouchesTheTarget) {
  UpdateResult r("ctr0", Requested());
  ASSERT_TRUE(r.Apply(kA, {}).ok());
  ASSERT_TRUE(r.Apply(kB, {CpuUpdate("ctr1", 2, false)}).ok());
  EXPECT_FALSE(r.target_update().has_value());
  EXPECT_EQ(*r.target_resources().memory->limit, 100);
  EXPECT_FALSE(r.target_resources().cpu.has_value());
  ASSERT_EQ(r.others().size(), 1u);
  EXPECT_EQ(r.others()[0].container_id, "ctr1");
}

TEST(NriMergeUpdate, IgnoredUpdateOfTheTargetLeavesNoClaim) {
  for (bool with_memory : {false, true}) {
    UpdateResult r("ctr0", Resources{});
    ASSERT_TRUE(r.Apply(kA, {CpuUpdate("ctr0", 256, false)}).ok());
    ContainerUpdate ignored = CpuUpdate("ctr0", 512, true);
    if (with_memory) Mem(&*ignored.resources).limit = 1024;
    ASSERT_TRUE(r.Apply(kB, {ignored}).ok());
    EXPECT_FALSE(r.target_resources().memory.has_value()) << with_memory;
    Status st = r.Apply(kC, {MemUpdate("ctr0", 4096, false)});
    ASSERT_TRUE(st.ok()) << Msg(st);
    EXPECT_EQ(*r.target_update()->resources->cpu->shares, 256u);
    EXPECT_EQ(*r.target_update()->resources->memory->limit, 4096);
    EXPECT_EQ(r.owners().at("ctr0").simple.count(8), 1u);
    EXPECT_EQ(r.owners().at("ctr0").simple.at(8), kC);
  }
}

TEST(NriMergeUpdate, IgnoredHugepageConflictIsRolledBack) {
  UpdateResult r("ctr0", Resources{});
  ContainerUpdate first{"ctr0", Resources{}, false};
  first.resources->hugepage_limits = {HugepageLimit{"2MB", 256}};
  ContainerUpdate bad{"ctr0", Resources{}, true};
  bad.resources->hugepage_limits = {HugepageLimit{"1GB", 512}, HugepageLimit{"2MB", 512}};
  ContainerUpdate last{"ctr0", Resources{}, false};
  last.resources->hugepage_limits = {HugepageLimit{"1GB", 1024}};
  ASSERT_TRUE(r.Apply(kA, {first}).ok());
  ASSERT_TRUE(r.Apply(kB, {bad}).ok());
  Status st = r.Apply(kC, {last});
  ASSERT_TRUE(st.ok()) << Msg(st);
  const auto& h = r.target_update()->resources->hugepage_limits;
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].page_size, "2MB");
  EXPECT_EQ(h[0].limit, 256u);
  EXPECT_EQ(h[1].page_size, "1GB");
  EXPECT_EQ(h[1].limit, 1024u);
  ContainerUpdate again{"ctr0", Resources{}, false};
  again.resources->hugepage_limits = {HugepageLimit{"2MB", 1}};
  EXPECT_EQ(Msg(r.Apply("40-d", {again})), ConflictMsg("40-d", kA, "HugepageLimits 2MB"));
}

TEST(NriMergeUpdate, IgnoredFailureOfANewContainerLeavesNoOwnerEntry) {
  UpdateResult r("", Resources{});
  ContainerUpdate bad{"ctr5", Resources{}, true};
  bad.resources->hugepage_limits = {HugepageLimit{"2MB", 1}, HugepageLimit{"2MB", 2}};
  ASSERT_TRUE(r.Apply(kA, {bad}).ok());
  EXPECT_EQ(r.owners().count("ctr5"), 0u);
  EXPECT_TRUE(r.claims().empty());
  // Upstream keeps the (empty) entry it made before merging.
  ASSERT_EQ(r.others().size(), 1u);
  EXPECT_TRUE(r.others()[0].resources->hugepage_limits.empty());
}

TEST(NriMergeUpdate, WithoutTargetEverythingIsOthersInFirstSeenOrder) {
  UpdateResult r("", Resources{});
  ASSERT_TRUE(r.Apply(kA, {CpuUpdate("ctr2", 1, true), MemUpdate("ctr1", 10, true)}).ok());
  ASSERT_TRUE(r.Apply(kB, {MemUpdate("ctr2", 20, true), CpuUpdate("ctr3", 3, false)}).ok());
  std::vector<ContainerUpdate> o = r.others();
  ASSERT_EQ(o.size(), 3u);
  EXPECT_EQ(o[0].container_id, "ctr2");
  EXPECT_EQ(o[1].container_id, "ctr1");
  EXPECT_EQ(o[2].container_id, "ctr3");
  EXPECT_TRUE(o[0].ignore_failure);
  EXPECT_EQ(*o[0].resources->cpu->shares, 1u);
  EXPECT_EQ(*o[0].resources->memory->limit, 20);
  EXPECT_FALSE(r.target_update().has_value());
  // An update without resources still names the container.
  ASSERT_TRUE(r.Apply(kC, {ContainerUpdate{"ctr9", {}, true}}).ok());
  ASSERT_EQ(r.others().size(), 4u);
  EXPECT_EQ(r.others()[3].container_id, "ctr9");
}

TEST(NriMergeUpdate, UnifiedAndClassesAreOwned) {
  UpdateResult r("ctr0", Resources{});
  ContainerUpdate a{"ctr0", Resources{}, false};
  a.resources->unified = {{"memory.high", "1"}};
  a.resources->blockio_class = "slow";
  ContainerUpdate b{"ctr0", Resources{}, false};
  b.resources->unified = {{"memory.max", "2"}};
  b.resources->rdt_class = "gold";
  ASSERT_TRUE(r.Apply(kA, {a}).ok());
  ASSERT_TRUE(r.Apply(kB, {b}).ok());
  const Resources& res = r.target_resources();
  EXPECT_EQ(res.unified.size(), 2u);
  EXPECT_EQ(*res.blockio_class, "slow");
  EXPECT_EQ(*res.rdt_class, "gold");
  ContainerUpdate c{"ctr0", Resources{}, false};
  c.resources->unified = {{"memory.high", "3"}};
  EXPECT_EQ(Msg(r.Apply(kC, {c})), ConflictMsg(kC, kA, "CgroupsUnified memory.high"));
}

}  // namespace
}  // namespace outpost::nri
