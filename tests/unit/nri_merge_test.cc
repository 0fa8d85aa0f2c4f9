// nri/merge: combining NRI plugins' answers the way containerd/nri's
// adaptation does — a matrix over every simple and compound field (one
// plugin, two plugins, one plugin twice), removal markers, the request as
// later plugins see it, hooks, CDI devices, updates of other containers,
// ignore_failure, and UpdateContainer's merged target resources.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "nri/merge.h"
#include "nri_merge_test_util.h"

namespace outpost::nri {
namespace {

using namespace merge_test;  // NOLINT

// ---- simple fields ---------------------------------------------------------------

struct SimpleCase {
  Field field;
  // Sets the field on an adjustment; v distinguishes plugins' values.
  std::function<void(ContainerAdjustment*, int v)> set;
  // Sets the field in a resources update (nullptr: not a resource field).
  std::function<void(Resources*, int v)> set_resources;
};

std::vector<SimpleCase> SimpleCases() {
  auto res = [](std::function<void(Resources*, int)> f) {
    return SimpleCase{Field::kAnnotations, [f](ContainerAdjustment* a, int v) { f(&R(a), v); }, f};
  };
  std::vector<std::pair<Field, std::function<void(Resources*, int)>>> resource_fields = {
      {Field::kMemLimit, [](Resources* r, int v) { Mem(r).limit = v; }},
      {Field::kMemReservation, [](Resources* r, int v) { Mem(r).reservation = v; }},
      {Field::kMemSwapLimit, [](Resources* r, int v) { Mem(r).swap = v; }},
      {Field::kMemKernelLimit, [](Resources* r, int v) { Mem(r).kernel = v; }},
      {Field::kMemTCPLimit, [](Resources* r, int v) { Mem(r).kernel_tcp = v; }},
      {Field::kMemSwappiness, [](Resources* r, int v) { Mem(r).swappiness = v; }},
      {Field::kMemDisableOomKiller, [](Resources* r, int v) { Mem(r).disable_oom_killer = v % 2 == 0; }},
      {Field::kMemUseHierarchy, [](Resources* r, int v) { Mem(r).use_hierarchy = v % 2 == 0; }},
      {Field::kCPUShares, [](Resources* r, int v) { CpuOf(r).shares = v; }},
      {Field::kCPUQuota, [](Resources* r, int v) { CpuOf(r).quota = v; }},
      {Field::kCPUPeriod, [](Resources* r, int v) { CpuOf(r).period = v; }},
      {Field::kCPURealtimeRuntime, [](Resources* r, int v) { CpuOf(r).realtime_runtime = v; }},
      {Field::kCPURealtimePeriod, [](Resources* r, int v) { CpuOf(r).realtime_period = v; }},
      {Field::kCPUSetCPUs, [](Resources* r, int v) { CpuOf(r).cpus = std::to_string(v); }},
      {Field::kCPUSetMems, [](Resources* r, int v) { CpuOf(r).mems = std::to_string(v); }},
      {Field::kPidsLimit, [](Resources* r, int v) { r->pids_limit = v; }},
      {Field::kBlockioClass, [](Resources* r, int v) { r->blockio_class = "io" + std::to_string(v); }},
      {Field::kRdtClass, [](Resources* r, int v) { r->rdt_class = "rdt" + std::to_string(v); }},
  };
  std::vector<SimpleCase> out;
  for (auto& [f, fn] : resource_fields) {
    SimpleCase c = res(fn);
    c.field = f;
    out.push_back(c);
  }
  auto raw = [](std::optional<std::string> LinuxAdjustment::*m) {
    return [m](ContainerAdjustment* a, int v) { L(a).*m = std::string(1, static_cast<char>(8)) + std::to_string(v); };
  };
  out.push_back({Field::kArgs, [](ContainerAdjustment* a, int v) { a->args = {"run", std::to_string(v)}; }, nullptr});
  out.push_back({Field::kCgroupsPath,
                 [](ContainerAdjustment* a, int v) { L(a).cgroups_path = "/cg/" + std::to_string(v); }, nullptr});
  out.push_back({Field::kOomScoreAdj, [](ContainerAdjustment* a, int v) { L(a).oom_score_adj = v; }, nullptr});
  out.push_back({Field::kIoPriority, raw(&LinuxAdjustment::io_priority_raw), nullptr});
  out.push_back({Field::kSeccompPolicy, raw(&LinuxAdjustment::seccomp_policy_raw), nullptr});
  out.push_back({Field::kLinuxSched, raw(&LinuxAdjustment::scheduler_raw), nullptr});
  out.push_back({Field::kRdtClosID, [](ContainerAdjustment* a, int v) { L(a).rdt_raw = RdtClos(v); }, nullptr});
  out.push_back({Field::kRdtSchemata, [](ContainerAdjustment* a, int v) { L(a).rdt_raw = RdtSchemata(v); }, nullptr});
  out.push_back(
      {Field::kRdtEnableMonitoring, [](ContainerAdjustment* a, int v) { L(a).rdt_raw = RdtMonitoring(v); }, nullptr});
  out.push_back({Field::kMemoryPolicy, raw(&LinuxAdjustment::memory_policy_raw), nullptr});
  return out;
}

class NriMergeSimple : public ::testing::TestWithParam<SimpleCase> {};

TEST_P(NriMergeSimple, OnePluginSetsIt) {
  const SimpleCase& c = GetParam();
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a;
  c.set(&a, 7);
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  const auto& simple = r.owners().at("ctr0").simple;
  ASSERT_EQ(simple.count(static_cast<int32_t>(c.field)), 1u);
  EXPECT_EQ(simple.at(static_cast<int32_t>(c.field)), kA);
  ASSERT_EQ(r.claims().size(), 1u);
  EXPECT_EQ(r.claims()[0].field, c.field);
  EXPECT_EQ(r.claims()[0].plugin, kA);
  EXPECT_EQ(r.claims()[0].container, "ctr0");
  // A plugin that leaves the field alone does not conflict.
  ASSERT_TRUE(r.Apply(kB, Resp(ContainerAdjustment{})).ok());
}

TEST_P(NriMergeSimple, TwoPluginsConflict) {
  const SimpleCase& c = GetParam();
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  c.set(&a, 2);
  c.set(&b, 4);
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  Status st = r.Apply(kB, Resp(b));
  ASSERT_FALSE(st.ok());
  // Upstream's subject for a simple field is "<Field> " + "" (trailing space).
  EXPECT_EQ(Msg(st), ConflictMsg(kB, kA, std::string(FieldName(c.field)) + " "));
}

// Resource fields can also come in ContainerUpdates, so one response can
// name them twice.
class NriMergeSimpleResource : public ::testing::TestWithParam<SimpleCase> {};

TEST_P(NriMergeSimpleResource, SamePluginTwiceInOneResponseConflicts) {
  const SimpleCase& c = GetParam();
  CreateResult r(MakePod(), MakeContainer());
  CreateContainerResponse resp;
  for (int v : {2, 4}) {
    ContainerUpdate u;
    u.container_id = "ctr1";
    u.resources.emplace();
    c.set_resources(&*u.resources, v);
    resp.update.push_back(u);
  }
  Status st = r.Apply(kA, resp);
  EXPECT_EQ(Msg(st), ConflictMsg(kA, kA, std::string(FieldName(c.field)) + " "));
}

TEST_P(NriMergeSimpleResource, UpdatesOfTheTargetConflictToo) {
  const SimpleCase& c = GetParam();
  UpdateResult r("ctr0", Resources{});
  ContainerUpdate u1{"ctr0", Resources{}, false}, u2{"ctr0", Resources{}, false};
  c.set_resources(&*u1.resources, 2);
  c.set_resources(&*u2.resources, 4);
  ASSERT_TRUE(r.Apply(kA, {u1}).ok());
  EXPECT_EQ(Msg(r.Apply(kB, {u2})), ConflictMsg(kB, kA, std::string(FieldName(c.field)) + " "));
}

std::string SimpleName(const ::testing::TestParamInfo<SimpleCase>& p) { return FieldName(p.param.field); }

std::vector<SimpleCase> ResourceCases() {
  std::vector<SimpleCase> out;
  for (const SimpleCase& c : SimpleCases()) {
    if (c.set_resources) out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(NriMerge, NriMergeSimple, ::testing::ValuesIn(SimpleCases()), SimpleName);
INSTANTIATE_TEST_SUITE_P(NriMerge, NriMergeSimpleResource, ::testing::ValuesIn(ResourceCases()), SimpleName);

// ---- compound fields -------------------------------------------------------------

struct CompoundCase {
  Field field;
  std::function<void(ContainerAdjustment*, const std::string& key)> add;
  bool repeatable;  // a list: one response can name a key twice
};

std::vector<CompoundCase> CompoundCases() {
  return {
      {Field::kAnnotations, [](ContainerAdjustment* a, const std::string& k) { a->annotations[k] = "v"; }, false},
      {Field::kMounts,
       [](ContainerAdjustment* a, const std::string& k) {
         a->mounts.push_back(Mount{"/m/" + k, "tmpfs", "tmpfs", {}});
       },
       true},
      {Field::kDevices,
       [](ContainerAdjustment* a, const std::string& k) {
         L(a).devices.push_back(Device{"/dev/" + k, "c", 1, 5, {}, {}, {}});
       },
       true},
      {Field::kEnv,
       [](ContainerAdjustment* a, const std::string& k) {
         a->env.push_back(KeyValue{k, "v"});
       },
       true},
      {Field::kCdiDevices,
       [](ContainerAdjustment* a, const std::string& k) { a->cdi_devices.push_back("v.com/gpu=" + k); }, true},
      {Field::kHugepageLimits,
       [](ContainerAdjustment* a, const std::string& k) {
         R(a).hugepage_limits.push_back(HugepageLimit{k, 1 << 20});
       },
       true},
      {Field::kCgroupsUnified, [](ContainerAdjustment* a, const std::string& k) { R(a).unified["u." + k] = "1"; },
       false},
      {Field::kRlimits,
       [](ContainerAdjustment* a, const std::string& k) {
         a->rlimits.push_back(Rlimit{"RLIMIT_" + k, 2, 1});
       },
       true},
      {Field::kNamespace,
       [](ContainerAdjustment* a, const std::string& k) {
         L(a).namespaces.push_back(Namespace{k, "/p"});
       },
       true},
      {Field::kSysctl, [](ContainerAdjustment* a, const std::string& k) { L(a).sysctl["net." + k] = "1"; }, false},
      {Field::kLinuxNetDevices,
       [](ContainerAdjustment* a, const std::string& k) { L(a).net_devices_raw[k] = "\x0a\x01x"; }, false},
  };
}

// The ownership key a case's add() uses for k.
std::string KeyFor(Field f, const std::string& k) {
  switch (f) {
    case Field::kMounts:
      return "/m/" + k;
    case Field::kDevices:
      return "/dev/" + k;
    case Field::kCdiDevices:
      return "v.com/gpu=" + k;
    case Field::kCgroupsUnified:
      return "u." + k;
    case Field::kRlimits:
      return "RLIMIT_" + k;
    case Field::kSysctl:
      return "net." + k;
    default:
      return k;
  }
}

class NriMergeCompound : public ::testing::TestWithParam<CompoundCase> {};

TEST_P(NriMergeCompound, DifferentKeysFromTwoPlugins) {
  const CompoundCase& c = GetParam();
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  c.add(&a, "one");
  c.add(&b, "two");
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  Status st = r.Apply(kB, Resp(b));
  ASSERT_TRUE(st.ok()) << Msg(st);
  const auto& owners = r.owners().at("ctr0").compound.at(static_cast<int32_t>(c.field));
  EXPECT_EQ(owners.at(KeyFor(c.field, "one")), kA);
  EXPECT_EQ(owners.at(KeyFor(c.field, "two")), kB);
}

TEST_P(NriMergeCompound, SameKeyFromTwoPluginsConflicts) {
  const CompoundCase& c = GetParam();
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  c.add(&a, "k");
  c.add(&b, "k");
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  EXPECT_EQ(Msg(r.Apply(kB, Resp(b))),
            ConflictMsg(kB, kA, std::string(FieldName(c.field)) + " " + KeyFor(c.field, "k")));
}

// Lists (not maps) can name a key twice in one response.
class NriMergeCompoundList : public ::testing::TestWithParam<CompoundCase> {};

TEST_P(NriMergeCompoundList, SameKeyTwiceFromOnePluginConflicts) {
  const CompoundCase& c = GetParam();
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a;
  c.add(&a, "k");
  c.add(&a, "k");
  EXPECT_EQ(Msg(r.Apply(kA, Resp(a))),
            ConflictMsg(kA, kA, std::string(FieldName(c.field)) + " " + KeyFor(c.field, "k")));
}

std::string CompoundName(const ::testing::TestParamInfo<CompoundCase>& p) { return FieldName(p.param.field); }

std::vector<CompoundCase> ListCases() {
  std::vector<CompoundCase> out;
  for (const CompoundCase& c : CompoundCases()) {
    if (c.repeatable) out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(NriMerge, NriMergeCompound, ::testing::ValuesIn(CompoundCases()), CompoundName);
INSTANTIATE_TEST_SUITE_P(NriMerge, NriMergeCompoundList, ::testing::ValuesIn(ListCases()), CompoundName);

}  // namespace
}  // namespace outpost::nri
