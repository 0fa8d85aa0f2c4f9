// Encode/Decode of the NRI requests and responses (codec.h), over the model
// converters of codec_model.cc.
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "nriproto/codec.h"
#include "nriproto/model.h"

namespace outpost::nriproto {

namespace {

// A ttRPC message is at most 4 MiB, and so is any payload in it; refusing
// more before decoding bounds what a decode can allocate.
constexpr size_t kMaxMessage = 4u << 20;

// nanopb fails to encode only on a broken invariant (a size that changes
// between its two passes); there is no untrusted input here.
std::string EncodeOrDie(const void* msg, const pb_msgdesc_t* fields, const char* what) {
  Result<std::string> r = PbEncode(fields, msg, what);
  if (!r.ok()) {
    std::fprintf(stderr, "nriproto: %s\n", r.error().message().c_str());
    std::abort();
  }
  return std::move(r).value();
}

// Decodes bytes as P (what names it in errors) and hands the struct to read,
// which fills a fresh value and moves it to the caller's.
template <typename P, typename Read>
Status DecodeWith(std::string_view bytes, const pb_msgdesc_t* fields, const char* what, Read read) {
  if (bytes.size() > kMaxMessage) {
    return Error(Code::kInvalidArgument, std::string("decode ") + what + ": " + std::to_string(bytes.size()) +
                                             " bytes, over the 4 MiB limit");
  }
  PbOwned<P> m(fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, what));
  read(*m);
  return OkStatus();
}

}  // namespace

// The generated descriptor of T and the name decode errors give it.
#define OUTPOST_NRI_DESC(T) nri_pkg_api_v1alpha1_##T##_fields, "nri " #T

// ---- registration, configuration, synchronisation -------------------------

std::string Encode(const nri::RegisterPluginRequest& v) {
  Arena a;
  pb::RegisterPluginRequest m{};
  m.plugin_name = a.S(v.plugin_name);
  m.plugin_idx = a.S(v.plugin_idx);
  m.NRI_version = a.S(v.nri_version);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(RegisterPluginRequest));
}

Status Decode(std::string_view bytes, nri::RegisterPluginRequest* out) {
  return DecodeWith<pb::RegisterPluginRequest>(bytes, OUTPOST_NRI_DESC(RegisterPluginRequest), [&](const auto& m) {
    *out = nri::RegisterPluginRequest{PbString(m.plugin_name), PbString(m.plugin_idx), PbString(m.NRI_version)};
  });
}

std::string Encode(const nri::ConfigureRequest& v) {
  Arena a;
  pb::ConfigureRequest m{};
  m.config = a.S(v.config);
  m.runtime_name = a.S(v.runtime_name);
  m.runtime_version = a.S(v.runtime_version);
  m.registration_timeout = v.registration_timeout_ms;
  m.request_timeout = v.request_timeout_ms;
  m.NRI_version = a.S(v.nri_version);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(ConfigureRequest));
}

Status Decode(std::string_view bytes, nri::ConfigureRequest* out) {
  return DecodeWith<pb::ConfigureRequest>(bytes, OUTPOST_NRI_DESC(ConfigureRequest), [&](const auto& m) {
    nri::ConfigureRequest v;
    v.config = PbString(m.config);
    v.runtime_name = PbString(m.runtime_name);
    v.runtime_version = PbString(m.runtime_version);
    v.registration_timeout_ms = m.registration_timeout;
    v.request_timeout_ms = m.request_timeout;
    v.nri_version = PbString(m.NRI_version);
    *out = std::move(v);
  });
}

std::string Encode(const nri::ConfigureResponse& v) {
  pb::ConfigureResponse m{};
  m.events = v.events;
  m.request_timeout = v.request_timeout_ms;
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(ConfigureResponse));
}

Status Decode(std::string_view bytes, nri::ConfigureResponse* out) {
  return DecodeWith<pb::ConfigureResponse>(bytes, OUTPOST_NRI_DESC(ConfigureResponse), [&](const auto& m) {
    *out = nri::ConfigureResponse{m.events, m.request_timeout};
  });
}

std::string Encode(const nri::SynchronizeRequest& v) {
  Arena a;
  pb::SynchronizeRequest m{};
  m.pods = Array<pb::PodSandbox>(v.pods, a, &m.pods_count);
  m.containers = Array<pb::Container>(v.containers, a, &m.containers_count);
  m.more = v.more;
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(SynchronizeRequest));
}

Status Decode(std::string_view bytes, nri::SynchronizeRequest* out) {
  return DecodeWith<pb::SynchronizeRequest>(bytes, OUTPOST_NRI_DESC(SynchronizeRequest), [&](const auto& m) {
    nri::SynchronizeRequest v;
    v.pods = VecOf<nri::PodSandbox>(m.pods, m.pods_count);
    v.containers = VecOf<nri::Container>(m.containers, m.containers_count);
    v.more = m.more;
    *out = std::move(v);
  });
}

std::string Encode(const nri::SynchronizeResponse& v) {
  Arena a;
  pb::SynchronizeResponse m{};
  m.update = Array<pb::ContainerUpdate>(v.update, a, &m.update_count);
  m.more = v.more;
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(SynchronizeResponse));
}

Status Decode(std::string_view bytes, nri::SynchronizeResponse* out) {
  return DecodeWith<pb::SynchronizeResponse>(bytes, OUTPOST_NRI_DESC(SynchronizeResponse), [&](const auto& m) {
    *out = nri::SynchronizeResponse{VecOf<nri::ContainerUpdate>(m.update, m.update_count), m.more};
  });
}

std::string Encode(const nri::UpdateContainersRequest& v) {
  Arena a;
  pb::UpdateContainersRequest m{};
  m.update = Array<pb::ContainerUpdate>(v.update, a, &m.update_count);
  m.evict = Array<pb::ContainerEviction>(v.evict, a, &m.evict_count);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(UpdateContainersRequest));
}

Status Decode(std::string_view bytes, nri::UpdateContainersRequest* out) {
  return DecodeWith<pb::UpdateContainersRequest>(
      bytes, OUTPOST_NRI_DESC(UpdateContainersRequest), [&](const auto& m) {
        *out = nri::UpdateContainersRequest{VecOf<nri::ContainerUpdate>(m.update, m.update_count),
                                            VecOf<nri::ContainerEviction>(m.evict, m.evict_count)};
      });
}

std::string Encode(const nri::UpdateContainersResponse& v) {
  Arena a;
  pb::UpdateContainersResponse m{};
  m.failed = Array<pb::ContainerUpdate>(v.failed, a, &m.failed_count);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(UpdateContainersResponse));
}

Status Decode(std::string_view bytes, nri::UpdateContainersResponse* out) {
  return DecodeWith<pb::UpdateContainersResponse>(
      bytes, OUTPOST_NRI_DESC(UpdateContainersResponse),
      [&](const auto& m) { *out = nri::UpdateContainersResponse{VecOf<nri::ContainerUpdate>(m.failed, m.failed_count)}; });
}

// ---- events ----------------------------------------------------------------

std::string Encode(const nri::PodContainerRequest& v) {
  Arena a;
  pb::PodContainerRequest m{};
  m.pod = Ptr<pb::PodSandbox>(v.pod, a);
  m.container = Ptr<pb::Container>(v.container, a);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(PodContainerRequest));
}

Status Decode(std::string_view bytes, nri::PodContainerRequest* out) {
  return DecodeWith<pb::PodContainerRequest>(bytes, OUTPOST_NRI_DESC(PodContainerRequest), [&](const auto& m) {
    *out = nri::PodContainerRequest{OptOf<nri::PodSandbox>(m.pod), OptOf<nri::Container>(m.container)};
  });
}

std::string Encode(const nri::UpdatePodSandboxRequest& v) {
  Arena a;
  pb::UpdatePodSandboxRequest m{};
  m.pod = Ptr<pb::PodSandbox>(v.pod, a);
  m.overhead_linux_resources = Ptr<pb::LinuxResources>(v.overhead_linux_resources, a);
  m.linux_resources = Ptr<pb::LinuxResources>(v.linux_resources, a);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(UpdatePodSandboxRequest));
}

Status Decode(std::string_view bytes, nri::UpdatePodSandboxRequest* out) {
  return DecodeWith<pb::UpdatePodSandboxRequest>(
      bytes, OUTPOST_NRI_DESC(UpdatePodSandboxRequest), [&](const auto& m) {
        *out = nri::UpdatePodSandboxRequest{OptOf<nri::PodSandbox>(m.pod),
                                            OptOf<nri::Resources>(m.overhead_linux_resources),
                                            OptOf<nri::Resources>(m.linux_resources)};
      });
}

std::string Encode(const nri::CreateContainerResponse& v) {
  Arena a;
  pb::CreateContainerResponse m{};
  m.adjust = Ptr<pb::ContainerAdjustment>(v.adjust, a);
  m.update = Array<pb::ContainerUpdate>(v.update, a, &m.update_count);
  m.evict = Array<pb::ContainerEviction>(v.evict, a, &m.evict_count);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(CreateContainerResponse));
}

Status Decode(std::string_view bytes, nri::CreateContainerResponse* out) {
  return DecodeWith<pb::CreateContainerResponse>(
      bytes, OUTPOST_NRI_DESC(CreateContainerResponse), [&](const auto& m) {
        *out = nri::CreateContainerResponse{OptOf<nri::ContainerAdjustment>(m.adjust),
                                            VecOf<nri::ContainerUpdate>(m.update, m.update_count),
                                            VecOf<nri::ContainerEviction>(m.evict, m.evict_count)};
      });
}

std::string Encode(const nri::UpdateContainerRequest& v) {
  Arena a;
  pb::UpdateContainerRequest m{};
  m.pod = Ptr<pb::PodSandbox>(v.pod, a);
  m.container = Ptr<pb::Container>(v.container, a);
  m.linux_resources = Ptr<pb::LinuxResources>(v.linux_resources, a);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(UpdateContainerRequest));
}

Status Decode(std::string_view bytes, nri::UpdateContainerRequest* out) {
  return DecodeWith<pb::UpdateContainerRequest>(bytes, OUTPOST_NRI_DESC(UpdateContainerRequest), [&](const auto& m) {
    *out = nri::UpdateContainerRequest{OptOf<nri::PodSandbox>(m.pod), OptOf<nri::Container>(m.container),
                                       OptOf<nri::Resources>(m.linux_resources)};
  });
}

std::string Encode(const nri::UpdateContainerResponse& v) {
  Arena a;
  pb::UpdateContainerResponse m{};
  m.update = Array<pb::ContainerUpdate>(v.update, a, &m.update_count);
  m.evict = Array<pb::ContainerEviction>(v.evict, a, &m.evict_count);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(UpdateContainerResponse));
}

Status Decode(std::string_view bytes, nri::UpdateContainerResponse* out) {
  return DecodeWith<pb::UpdateContainerResponse>(
      bytes, OUTPOST_NRI_DESC(UpdateContainerResponse), [&](const auto& m) {
        *out = nri::UpdateContainerResponse{VecOf<nri::ContainerUpdate>(m.update, m.update_count),
                                            VecOf<nri::ContainerEviction>(m.evict, m.evict_count)};
      });
}

std::string Encode(const nri::StopContainerResponse& v) {
  Arena a;
  pb::StopContainerResponse m{};
  m.update = Array<pb::ContainerUpdate>(v.update, a, &m.update_count);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(StopContainerResponse));
}

Status Decode(std::string_view bytes, nri::StopContainerResponse* out) {
  return DecodeWith<pb::StopContainerResponse>(bytes, OUTPOST_NRI_DESC(StopContainerResponse), [&](const auto& m) {
    *out = nri::StopContainerResponse{VecOf<nri::ContainerUpdate>(m.update, m.update_count)};
  });
}

std::string Encode(const nri::StateChangeEvent& v) {
  Arena a;
  pb::StateChangeEvent m{};
  m.event = static_cast<nri_pkg_api_v1alpha1_Event>(v.event);
  m.pod = Ptr<pb::PodSandbox>(v.pod, a);
  m.container = Ptr<pb::Container>(v.container, a);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(StateChangeEvent));
}

Status Decode(std::string_view bytes, nri::StateChangeEvent* out) {
  return DecodeWith<pb::StateChangeEvent>(bytes, OUTPOST_NRI_DESC(StateChangeEvent), [&](const auto& m) {
    *out = nri::StateChangeEvent{static_cast<nri::Event>(m.event), OptOf<nri::PodSandbox>(m.pod),
                                 OptOf<nri::Container>(m.container)};
  });
}

std::string Encode(const nri::ValidateContainerAdjustmentRequest& v) {
  Arena a;
  pb::ValidateContainerAdjustmentRequest m{};
  m.pod = Ptr<pb::PodSandbox>(v.pod, a);
  m.container = Ptr<pb::Container>(v.container, a);
  m.adjust = Ptr<pb::ContainerAdjustment>(v.adjust, a);
  m.update = Array<pb::ContainerUpdate>(v.update, a, &m.update_count);
  if (!v.owners.empty()) {
    m.owners = a.New<pb::OwningPlugins>();
    Fill(v.owners, a, m.owners);
  }
  m.plugins = Array<pb::PluginInstance>(v.plugins, a, &m.plugins_count);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(ValidateContainerAdjustmentRequest));
}

Status Decode(std::string_view bytes, nri::ValidateContainerAdjustmentRequest* out) {
  return DecodeWith<pb::ValidateContainerAdjustmentRequest>(
      bytes, OUTPOST_NRI_DESC(ValidateContainerAdjustmentRequest), [&](const auto& m) {
        nri::ValidateContainerAdjustmentRequest v;
        v.pod = OptOf<nri::PodSandbox>(m.pod);
        v.container = OptOf<nri::Container>(m.container);
        v.adjust = OptOf<nri::ContainerAdjustment>(m.adjust);
        v.update = VecOf<nri::ContainerUpdate>(m.update, m.update_count);
        if (m.owners) Read(*m.owners, &v.owners);
        v.plugins = VecOf<nri::PluginInstance>(m.plugins, m.plugins_count);
        *out = std::move(v);
      });
}

std::string Encode(const nri::ValidateContainerAdjustmentResponse& v) {
  Arena a;
  pb::ValidateContainerAdjustmentResponse m{};
  m.reject = v.reject;
  m.reason = a.S(v.reason);
  return EncodeOrDie(&m, OUTPOST_NRI_DESC(ValidateContainerAdjustmentResponse));
}

Status Decode(std::string_view bytes, nri::ValidateContainerAdjustmentResponse* out) {
  return DecodeWith<pb::ValidateContainerAdjustmentResponse>(
      bytes, OUTPOST_NRI_DESC(ValidateContainerAdjustmentResponse),
      [&](const auto& m) { *out = nri::ValidateContainerAdjustmentResponse{m.reject, PbString(m.reason)}; });
}

// ---- single values ---------------------------------------------------------

// Encode and Decode of a model type T that is its own message P.
#define OUTPOST_NRI_VALUE(T, P)                                                                  \
  std::string Encode(const nri::T& v) {                                                          \
    Arena a;                                                                                     \
    pb::P m{};                                                                                   \
    Fill(v, a, &m);                                                                              \
    return EncodeOrDie(&m, OUTPOST_NRI_DESC(P));                                                 \
  }                                                                                              \
  Status Decode(std::string_view bytes, nri::T* out) {                                           \
    return DecodeWith<pb::P>(bytes, OUTPOST_NRI_DESC(P), [&](const pb::P& m) {                   \
      nri::T v;                                                                                  \
      Read(m, &v);                                                                               \
      *out = std::move(v);                                                                       \
    });                                                                                          \
  }

OUTPOST_NRI_VALUE(PodSandbox, PodSandbox)
OUTPOST_NRI_VALUE(Container, Container)
OUTPOST_NRI_VALUE(ContainerAdjustment, ContainerAdjustment)
OUTPOST_NRI_VALUE(ContainerUpdate, ContainerUpdate)

#undef OUTPOST_NRI_VALUE
#undef OUTPOST_NRI_DESC

}  // namespace outpost::nriproto
