// nriproto's internals: the data model of include/outpost/nri_api.h
// (pods, containers, resources, adjustments, updates, ownership) to and from
// the nanopb structs of proto/nri.proto. Fill() points the struct into an
// Arena (encoding); Read() copies out of a decoded struct, which the caller
// still owns. Owns no message framing (codec_messages.cc does requests and
// responses).
#pragma once

#include <optional>
#include <vector>

#include "nriproto/pb_util.h"
#include "outpost/nri_api.h"

namespace outpost::nriproto {

void Fill(const nri::KeyValue& v, Arena& a, pb::KeyValue* m);
void Fill(const nri::Mount& v, Arena& a, pb::Mount* m);
void Fill(const nri::Hook& v, Arena& a, pb::Hook* m);
void Fill(const nri::Hooks& v, Arena& a, pb::Hooks* m);
void Fill(const nri::Rlimit& v, Arena& a, pb::POSIXRlimit* m);
void Fill(const nri::Namespace& v, Arena& a, pb::LinuxNamespace* m);
void Fill(const nri::Device& v, Arena& a, pb::LinuxDevice* m);
void Fill(const nri::DeviceCgroup& v, Arena& a, pb::LinuxDeviceCgroup* m);
void Fill(const nri::HugepageLimit& v, Arena& a, pb::HugepageLimit* m);
void Fill(const nri::Memory& v, Arena& a, pb::LinuxMemory* m);
void Fill(const nri::Cpu& v, Arena& a, pb::LinuxCPU* m);
void Fill(const nri::Resources& v, Arena& a, pb::LinuxResources* m);
void Fill(const nri::User& v, Arena& a, pb::User* m);
void Fill(const nri::PodSandbox& v, Arena& a, pb::PodSandbox* m);
void Fill(const nri::Container& v, Arena& a, pb::Container* m);
void Fill(const nri::LinuxAdjustment& v, Arena& a, pb::LinuxContainerAdjustment* m);
void Fill(const nri::ContainerAdjustment& v, Arena& a, pb::ContainerAdjustment* m);
void Fill(const nri::ContainerUpdate& v, Arena& a, pb::ContainerUpdate* m);
void Fill(const nri::ContainerEviction& v, Arena& a, pb::ContainerEviction* m);
void Fill(const nri::PluginInstance& v, Arena& a, pb::PluginInstance* m);
void Fill(const nri::OwningPlugins& v, Arena& a, pb::OwningPlugins* m);

void Read(const pb::KeyValue& m, nri::KeyValue* v);
void Read(const pb::Mount& m, nri::Mount* v);
void Read(const pb::Hook& m, nri::Hook* v);
void Read(const pb::Hooks& m, nri::Hooks* v);
void Read(const pb::POSIXRlimit& m, nri::Rlimit* v);
void Read(const pb::LinuxNamespace& m, nri::Namespace* v);
void Read(const pb::LinuxDevice& m, nri::Device* v);
void Read(const pb::LinuxDeviceCgroup& m, nri::DeviceCgroup* v);
void Read(const pb::HugepageLimit& m, nri::HugepageLimit* v);
void Read(const pb::LinuxMemory& m, nri::Memory* v);
void Read(const pb::LinuxCPU& m, nri::Cpu* v);
void Read(const pb::LinuxResources& m, nri::Resources* v);
void Read(const pb::User& m, nri::User* v);
void Read(const pb::PodSandbox& m, nri::PodSandbox* v);
void Read(const pb::Container& m, nri::Container* v);
void Read(const pb::LinuxContainerAdjustment& m, nri::LinuxAdjustment* v);
void Read(const pb::ContainerAdjustment& m, nri::ContainerAdjustment* v);
void Read(const pb::ContainerUpdate& m, nri::ContainerUpdate* v);
void Read(const pb::ContainerEviction& m, nri::ContainerEviction* v);
void Read(const pb::PluginInstance& m, nri::PluginInstance* v);
void Read(const pb::OwningPlugins& m, nri::OwningPlugins* v);

// A message for v, or nullptr when v is unset.
template <typename P, typename V>
P* Ptr(const std::optional<V>& v, Arena& a) {
  if (!v) return nullptr;
  P* m = a.New<P>();
  Fill(*v, a, m);
  return m;
}

// A repeated message field for v (at most PB_SIZE_MAX elements).
template <typename P, typename V>
P* Array(const std::vector<V>& v, Arena& a, pb_size_t* count) {
  P* l = a.Array<P>(v.size(), count);
  for (pb_size_t i = 0; i < *count; ++i) Fill(v[i], a, &l[i]);
  return l;
}

template <typename V, typename P>
std::optional<V> OptOf(const P* m) {
  if (!m) return std::nullopt;
  V v;
  Read(*m, &v);
  return v;
}

template <typename V, typename P>
std::vector<V> VecOf(const P* m, pb_size_t n) {
  std::vector<V> out(n);
  for (pb_size_t i = 0; i < n; ++i) Read(m[i], &out[i]);
  return out;
}

}  // namespace outpost::nriproto
