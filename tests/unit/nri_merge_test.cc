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

namespace outpost::nri {
namespace {

constexpr char kA[] = "10-a";
constexpr char kB[] = "20-b";
constexpr char kC[] = "30-c";

Container MakeContainer() {
  Container c;
  c.id = "ctr0";
  c.pod_sandbox_id = "pod0";
  c.name = "web";
  c.annotations = {{"keep", "1"}, {"old", "x"}};
  c.args = {"sh", "-c", "true"};
  c.env = {"PATH=/bin", "OLD=1"};
  c.mounts = {Mount{"/data", "bind", "/srv", {"rbind"}}};
  c.devices = {Device{"/dev/null", "c", 1, 3, {}, {}, {}}};
  c.namespaces = {Namespace{"network", "/proc/1/ns/net"}, Namespace{"ipc", ""}};
  c.sysctl = {{"net.old", "1"}};
  return c;
}

PodSandbox MakePod() {
  PodSandbox p;
  p.id = "pod0";
  p.name = "pod";
  return p;
}

CreateContainerResponse Resp(const ContainerAdjustment& a) {
  CreateContainerResponse r;
  r.adjust = a;
  return r;
}

LinuxAdjustment& L(ContainerAdjustment* a) {
  if (!a->linux) a->linux.emplace();
  return *a->linux;
}
Resources& R(ContainerAdjustment* a) {
  LinuxAdjustment& l = L(a);
  if (!l.resources) l.resources.emplace();
  return *l.resources;
}
Memory& Mem(Resources* r) {
  if (!r->memory) r->memory.emplace();
  return *r->memory;
}
Cpu& CpuOf(Resources* r) {
  if (!r->cpu) r->cpu.emplace();
  return *r->cpu;
}

std::string Msg(const Status& st) { return st.ok() ? "<ok>" : st.error().message(); }

std::string ConflictMsg(const char* plugin, const char* other, const std::string& subject) {
  return std::string("plugins \"") + plugin + "\" and \"" + other + "\" both tried to set " + subject;
}

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
  out.push_back({Field::kRdtClosID, raw(&LinuxAdjustment::rdt_raw), nullptr});
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

// ---- removal markers and the request later plugins see ------------------------

bool HasEnv(const Container& c, const std::string& kv) {
  for (const std::string& e : c.env) {
    if (e == kv) return true;
  }
  return false;
}
size_t CountEnvName(const Container& c, const std::string& name) {
  size_t n = 0;
  for (const std::string& e : c.env) n += e.compare(0, name.size() + 1, name + "=") == 0;
  return n;
}

TEST(NriMergeCreate, NextPluginSeesTheMutatedRequest) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a;
  a.annotations["foo"] = "a";
  a.env.push_back(KeyValue{"FOO", "1"});
  a.mounts.push_back(Mount{"/cache", "tmpfs", "tmpfs", {"nosuid"}});
  Mem(&R(&a)).limit = 1 << 20;
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  const Container& seen = r.request();
  EXPECT_EQ(seen.annotations.at("foo"), "a");
  EXPECT_TRUE(HasEnv(seen, "FOO=1"));
  ASSERT_EQ(seen.mounts.size(), 2u);
  EXPECT_EQ(seen.mounts[1].destination, "/cache");
  ASSERT_TRUE(seen.resources && seen.resources->memory && seen.resources->memory->limit);
  EXPECT_EQ(*seen.resources->memory->limit, 1 << 20);
  // Validators get the container as the runtime asked for it.
  const Container& p = r.pristine();
  EXPECT_EQ(p.annotations.count("foo"), 0u);
  EXPECT_FALSE(HasEnv(p, "FOO=1"));
  EXPECT_EQ(p.mounts.size(), 1u);
  EXPECT_FALSE(p.resources.has_value());
}

TEST(NriMergeCreate, AnnotationRemovalLetsTheRemoverReclaim) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b, c;
  a.annotations["foo"] = "a";
  b.annotations["-foo"] = "";
  b.annotations["foo"] = "b";
  c.annotations["foo"] = "c";
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  Status st = r.Apply(kB, Resp(b));
  ASSERT_TRUE(st.ok()) << Msg(st);
  EXPECT_EQ(r.request().annotations.at("foo"), "b");
  EXPECT_EQ(r.adjustment().annotations.at("foo"), "b");
  EXPECT_EQ(r.adjustment().annotations.count("-foo"), 1u);
  EXPECT_EQ(r.owners().at("ctr0").compound.at(1).at("foo"), kB);
  // The remover now owns it: a third plugin conflicts with the remover.
  EXPECT_EQ(Msg(r.Apply(kC, Resp(c))), ConflictMsg(kC, kB, "Annotations foo"));
  // claims(): set, removed, set again.
  ASSERT_EQ(r.claims().size(), 3u);
  EXPECT_FALSE(r.claims()[0].removed);
  EXPECT_TRUE(r.claims()[1].removed);
  EXPECT_EQ(r.claims()[1].plugin, kB);
  EXPECT_EQ(r.claims()[2].plugin, kB);
  EXPECT_EQ(r.claims()[2].key, "foo");
}

TEST(NriMergeCreate, PureAnnotationRemovalIsForwardedOnly) {
  // Upstream forwards the marker but keeps the owner and the request entry.
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  a.annotations["-old"] = "";
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  EXPECT_EQ(r.adjustment().annotations.count("-old"), 1u);
  EXPECT_EQ(r.request().annotations.count("old"), 1u);
  b.annotations["foo"] = "b";
  ASSERT_TRUE(r.Apply(kB, Resp(b)).ok());
  ContainerAdjustment c;
  c.annotations["-foo"] = "";  // not re-added: kB still owns it
  c.annotations["bar"] = "c";
  ASSERT_TRUE(r.Apply(kC, Resp(c)).ok());
  EXPECT_EQ(r.owners().at("ctr0").compound.at(1).at("foo"), kB);
}

TEST(NriMergeCreate, MountRemovalAndOverride) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  a.mounts.push_back(Mount{"/x", "tmpfs", "a", {}});
  a.mounts.push_back(Mount{"-/data", "", "", {}});  // from the pristine spec
  b.mounts.push_back(Mount{"-/x", "", "", {}});
  b.mounts.push_back(Mount{"/x", "tmpfs", "b", {}});
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  ASSERT_EQ(r.request().mounts.size(), 1u);
  EXPECT_EQ(r.request().mounts[0].destination, "/x");
  Status st = r.Apply(kB, Resp(b));
  ASSERT_TRUE(st.ok()) << Msg(st);
  const auto& m = r.adjustment().mounts;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].destination, "-/data");
  EXPECT_EQ(m[1].destination, "/x");
  EXPECT_EQ(m[1].source, "b");
  ASSERT_EQ(r.request().mounts.size(), 1u);
  EXPECT_EQ(r.request().mounts[0].source, "b");
  EXPECT_EQ(r.owners().at("ctr0").compound.at(2).at("/x"), kB);
}

TEST(NriMergeCreate, EnvRemovalAndOverride) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b, c;
  a.env.push_back(KeyValue{"FOO", "1"});
  b.env.push_back(KeyValue{"-FOO", ""});
  b.env.push_back(KeyValue{"FOO", "2"});
  b.env.push_back(KeyValue{"-OLD", ""});
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  Status st = r.Apply(kB, Resp(b));
  ASSERT_TRUE(st.ok()) << Msg(st);
  EXPECT_TRUE(HasEnv(r.request(), "FOO=2"));
  EXPECT_EQ(CountEnvName(r.request(), "FOO"), 1u);
  EXPECT_EQ(CountEnvName(r.request(), "OLD"), 0u);  // removed from the request
  ASSERT_EQ(r.adjustment().env.size(), 1u);         // upstream forwards no env marker
  EXPECT_EQ(r.adjustment().env[0].key, "FOO");
  EXPECT_EQ(r.adjustment().env[0].value, "2");
  c.env.push_back(KeyValue{"FOO", "3"});
  EXPECT_EQ(Msg(r.Apply(kC, Resp(c))), ConflictMsg(kC, kB, "Env FOO"));
}

TEST(NriMergeCreate, DeviceRemovalAndOverride) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  L(&a).devices.push_back(Device{"/dev/fuse", "c", 10, 229, {}, {}, {}});
  L(&a).devices.push_back(Device{"-/dev/null", "", 0, 0, {}, {}, {}});
  L(&b).devices.push_back(Device{"-/dev/fuse", "", 0, 0, {}, {}, {}});
  L(&b).devices.push_back(Device{"/dev/fuse", "c", 10, 230, {}, {}, {}});
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  ASSERT_EQ(r.request().devices.size(), 1u);
  EXPECT_EQ(r.request().devices[0].path, "/dev/fuse");
  Status st = r.Apply(kB, Resp(b));
  ASSERT_TRUE(st.ok()) << Msg(st);
  ASSERT_EQ(r.adjustment().linux->devices.size(), 1u);
  EXPECT_EQ(r.adjustment().linux->devices[0].minor, 230);
  ASSERT_EQ(r.request().devices.size(), 1u);
  EXPECT_EQ(r.request().devices[0].minor, 230);
}

TEST(NriMergeCreate, NamespaceAndSysctlRemoval) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  L(&a).namespaces.push_back(Namespace{"-network", ""});
  L(&a).namespaces.push_back(Namespace{"uts", "/proc/9/ns/uts"});
  L(&a).sysctl["net.x"] = "1";
  L(&a).sysctl["-net.old"] = "";
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  ASSERT_EQ(r.request().namespaces.size(), 2u);
  EXPECT_EQ(r.request().namespaces[0].type, "ipc");
  EXPECT_EQ(r.request().namespaces[1].type, "uts");
  ASSERT_EQ(r.adjustment().linux->namespaces.size(), 2u);
  EXPECT_EQ(r.adjustment().linux->namespaces[0].type, "-network");
  EXPECT_EQ(r.adjustment().linux->sysctl.count("-net.old"), 1u);
  EXPECT_EQ(r.adjustment().annotations.count("-net.old"), 0u);
  EXPECT_EQ(r.request().sysctl.at("net.x"), "1");
  // Sysctl override by removal.
  L(&b).sysctl["-net.x"] = "";
  L(&b).sysctl["net.x"] = "2";
  Status st = r.Apply(kB, Resp(b));
  ASSERT_TRUE(st.ok()) << Msg(st);
  EXPECT_EQ(r.request().sysctl.at("net.x"), "2");
  EXPECT_EQ(r.owners().at("ctr0").compound.at(34).at("net.x"), kB);
  // A namespace removal is a claim: removing again conflicts.
  ContainerAdjustment c;
  L(&c).namespaces.push_back(Namespace{"-network", ""});
  EXPECT_EQ(Msg(r.Apply(kC, Resp(c))), ConflictMsg(kC, kA, "Namespace network"));
}

TEST(NriMergeCreate, ArgsReplaceAndClear) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b, c;
  a.args = {"nginx", "-g", "daemon off;"};
  b.args = {"", "nginx", "-T"};
  c.args = {"x"};
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  EXPECT_EQ(r.request().args, a.args);
  Status st = r.Apply(kB, Resp(b));
  ASSERT_TRUE(st.ok()) << Msg(st);
  EXPECT_EQ(r.adjustment().args, (std::vector<std::string>{"nginx", "-T"}));
  EXPECT_EQ(r.request().args, (std::vector<std::string>{"nginx", "-T"}));
  EXPECT_EQ(Msg(r.Apply(kC, Resp(c))), ConflictMsg(kC, kB, "Args "));
}

TEST(NriMergeCreate, HooksAccumulateInPluginOrder) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  a.hooks.emplace();
  a.hooks->prestart.push_back(Hook{"/bin/a", {"a"}, {}, {}});
  b.hooks.emplace();
  b.hooks->prestart.push_back(Hook{"/bin/b", {}, {}, int64_t{5}});
  b.hooks->poststop.push_back(Hook{"/bin/b-stop", {}, {}, {}});
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  ASSERT_TRUE(r.Apply(kB, Resp(b)).ok());
  const Hooks& h = *r.adjustment().hooks;
  ASSERT_EQ(h.prestart.size(), 2u);
  EXPECT_EQ(h.prestart[0].path, "/bin/a");
  EXPECT_EQ(h.prestart[1].path, "/bin/b");
  ASSERT_EQ(h.poststop.size(), 1u);
  ASSERT_TRUE(r.request().hooks.has_value());
  EXPECT_EQ(r.request().hooks->prestart.size(), 2u);
  EXPECT_EQ(r.owners().at("ctr0").simple.at(3), "10-a,20-b");
}

TEST(NriMergeCreate, SameCdiDeviceTwiceConflicts) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  a.cdi_devices = {"vendor.com/gpu=0"};
  b.cdi_devices = {"vendor.com/gpu=1", "vendor.com/gpu=0"};
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  EXPECT_EQ(Msg(r.Apply(kB, Resp(b))), ConflictMsg(kB, kA, "CdiDevices vendor.com/gpu=0"));
  EXPECT_TRUE(r.request().cdi_devices.empty());  // never part of the request
}

TEST(NriMergeCreate, UpdateOfTheContainerBeingCreatedIsRefused) {
  CreateResult r(MakePod(), MakeContainer());
  CreateContainerResponse resp;
  resp.update.push_back(ContainerUpdate{"ctr0", Resources{}, true});
  EXPECT_EQ(Msg(r.Apply(kA, resp)), "plugin \"10-a\" asked update of \"ctr0\" during creation");
}

TEST(NriMergeCreate, OwnersAndAdjustmentContents) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b;
  a.annotations["foo"] = "1";
  Mem(&R(&a)).limit = 100;
  R(&a).unified["memory.high"] = "90";
  L(&b).cgroups_path = "/cg/x";
  L(&b).io_priority_raw = std::string("\x08\x02", 2);
  R(&b).devices.push_back(DeviceCgroup{true, "c", int64_t{10}, int64_t{200}, "rwm"});
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  ASSERT_TRUE(r.Apply(kB, Resp(b)).ok());
  const FieldOwners& o = r.owners().at("ctr0");
  EXPECT_EQ(o.simple.at(8), kA);
  EXPECT_EQ(o.simple.at(28), kB);
  EXPECT_EQ(o.simple.at(31), kB);
  EXPECT_EQ(o.compound.at(1).at("foo"), kA);
  EXPECT_EQ(o.compound.at(27).at("memory.high"), kA);
  EXPECT_EQ(r.owners().size(), 1u);
  const ContainerAdjustment& m = r.adjustment();
  EXPECT_EQ(m.linux->cgroups_path, "/cg/x");
  EXPECT_EQ(*m.linux->io_priority_raw, std::string("\x08\x02", 2));
  EXPECT_EQ(*m.linux->resources->memory->limit, 100);
  EXPECT_EQ(m.linux->resources->unified.at("memory.high"), "90");
  ASSERT_EQ(m.linux->resources->devices.size(), 1u);  // device rules are unowned
  EXPECT_FALSE(m.hooks.has_value());
  EXPECT_EQ(r.request().cgroups_path, "/cg/x");
  EXPECT_TRUE(r.pristine().cgroups_path.empty());
}

TEST(NriMergeCreate, EmptyAnswersChangeNothing) {
  CreateResult r(MakePod(), MakeContainer());
  ASSERT_TRUE(r.Apply(kA, CreateContainerResponse{}).ok());
  ASSERT_TRUE(r.Apply(kB, Resp(ContainerAdjustment{})).ok());
  EXPECT_FALSE(r.adjustment().linux.has_value());
  EXPECT_TRUE(r.adjustment().annotations.empty());
  EXPECT_TRUE(r.owners().empty());
  EXPECT_TRUE(r.claims().empty());
  EXPECT_EQ(r.request().env, r.pristine().env);
}

}  // namespace
}  // namespace outpost::nri
