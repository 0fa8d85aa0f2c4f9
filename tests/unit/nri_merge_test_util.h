// Shared helpers of the nri/merge tests: a container and pod to create,
// adjustment builders, encoded LinuxRdt parts and upstream's conflict text.
#pragma once

#include <string>

#include "nri/merge.h"

namespace outpost::nri::merge_test {

constexpr char kA[] = "10-a";
constexpr char kB[] = "20-b";
constexpr char kC[] = "30-c";

inline Container MakeContainer() {
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

inline PodSandbox MakePod() {
  PodSandbox p;
  p.id = "pod0";
  p.name = "pod";
  return p;
}

inline CreateContainerResponse Resp(const ContainerAdjustment& a) {
  CreateContainerResponse r;
  r.adjust = a;
  return r;
}

inline LinuxAdjustment& L(ContainerAdjustment* a) {
  if (!a->linux) a->linux.emplace();
  return *a->linux;
}
inline Resources& R(ContainerAdjustment* a) {
  LinuxAdjustment& l = L(a);
  if (!l.resources) l.resources.emplace();
  return *l.resources;
}
inline Memory& Mem(Resources* r) {
  if (!r->memory) r->memory.emplace();
  return *r->memory;
}
inline Cpu& CpuOf(Resources* r) {
  if (!r->cpu) r->cpu.emplace();
  return *r->cpu;
}

inline std::string Msg(const Status& st) { return st.ok() ? "<ok>" : st.error().message(); }

inline std::string ConflictMsg(const char* plugin, const char* other, const std::string& subject) {
  return std::string("plugins \"") + plugin + "\" and \"" + other + "\" both tried to set " + subject;
}

// Encoded LinuxRdt parts: clos_id=1 OptionalString, schemata=2
// OptionalRepeatedString, enable_monitoring=3 OptionalBool, remove=4.
inline std::string Wrap(char tag, const std::string& body) {
  return std::string(1, tag) + std::string(1, static_cast<char>(body.size())) + body;
}
inline std::string RdtClos(int v) { return Wrap('\x0a', Wrap('\x0a', "c" + std::to_string(v))); }
inline std::string RdtSchemata(int v) { return Wrap('\x12', Wrap('\x0a', "L3:0=" + std::to_string(v))); }
inline std::string RdtMonitoring(int v) { return Wrap('\x1a', std::string("\x08", 1) + static_cast<char>(v % 2)); }
inline const std::string kRdtRemove("\x20\x01", 2);

}  // namespace outpost::nri::merge_test
