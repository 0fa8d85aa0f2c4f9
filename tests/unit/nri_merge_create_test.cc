// nri/merge: CreateContainer cases beyond the field matrix — removal
// markers and overrides per field, the request later plugins see versus
// the pristine one for validators, args, hooks, CDI devices, RDT parts,
// refusing an update of the container being created, owners() contents.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nri/merge.h"
#include "nri_merge_test_util.h"

namespace outpost::nri {
namespace {

using namespace merge_test;  // NOLINT

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

TEST(NriMergeCreate, RdtPartsAndRemoval) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b, c, d;
  L(&a).rdt_raw = RdtClos(1) + RdtMonitoring(1);
  L(&b).rdt_raw = RdtSchemata(2);  // another part: no conflict
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  ASSERT_TRUE(r.Apply(kB, Resp(b)).ok());
  EXPECT_EQ(*r.adjustment().linux->rdt_raw, RdtClos(1) + RdtSchemata(2) + RdtMonitoring(1));
  // remove=true clears every part; the remover may set them again.
  L(&c).rdt_raw = kRdtRemove + RdtClos(3);
  Status st = r.Apply(kC, Resp(c));
  ASSERT_TRUE(st.ok()) << Msg(st);
  EXPECT_EQ(*r.adjustment().linux->rdt_raw, RdtClos(3));
  const auto& simple = r.owners().at("ctr0").simple;
  EXPECT_EQ(simple.at(37), kC);
  EXPECT_EQ(simple.at(38), std::string("-") + kC);
  L(&d).rdt_raw = RdtSchemata(4);
  EXPECT_EQ(Msg(r.Apply("40-d", Resp(d))), ConflictMsg("40-d", kC, "RdtSchemata "));
}

TEST(NriMergeCreate, RdtRemoveAloneIsForwarded) {
  CreateResult r(MakePod(), MakeContainer());
  ContainerAdjustment a, b, bad;
  L(&a).rdt_raw = RdtClos(1);
  L(&b).rdt_raw = kRdtRemove;
  ASSERT_TRUE(r.Apply(kA, Resp(a)).ok());
  ASSERT_TRUE(r.Apply(kB, Resp(b)).ok());
  EXPECT_EQ(*r.adjustment().linux->rdt_raw, kRdtRemove);
  L(&bad).rdt_raw = std::string("\x0a\x09x", 3);  // length past the end
  EXPECT_EQ(Msg(r.Apply(kC, Resp(bad))), "plugin \"30-c\" sent a malformed LinuxRdt adjustment");
}

}  // namespace
}  // namespace outpost::nri
