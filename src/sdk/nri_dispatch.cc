// The NRI plugin library's request side (include/outpost/nri.h). Owns: the
// Plugin service (nri.pkg.api.v1alpha1.Plugin) on mux connection 1:
// decoding each request, Configure's subscription check, recombining split
// Synchronize requests, skipping events the plugin did not subscribe to,
// StateChange dispatch to the dedicated handlers, and turning a handler's
// error text into status Unknown. Does not own the connection
// (nri_stub.cc).
#include <cstdio>
#include <cstring>

#include "base/strings.h"
#include "nriproto/codec.h"
#include "sdk/nri_internal.h"

namespace outpost::nri {

namespace {

const PodSandbox& PodOf(const std::optional<PodSandbox>& p) {
  static const PodSandbox kEmpty;
  return p ? *p : kEmpty;
}

const Container& ContainerOf(const std::optional<Container>& c) {
  static const Container kEmpty;
  return c ? *c : kEmpty;
}

Result<std::string> Answer(const std::string& error, std::string encoded) {
  if (!error.empty()) return Error(Code::kUnknown, error);
  return encoded;
}

template <typename T>
Status DecodeInto(std::string_view payload, T* out) {
  Status st = nriproto::Decode(payload, out);
  if (!st.ok()) return Error(Code::kInvalidArgument, st.error().message());
  return OkStatus();
}

}  // namespace

void Stub::Impl::Serve(const char* method, Body fn) {
  if (options.v06_service) {
    static const char* const kV06[] = {"Configure",       "Synchronize",   "Shutdown",   "CreateContainer",
                                       "UpdateContainer", "StopContainer", "StateChange"};
    bool known = false;
    for (const char* m : kV06) known = known || std::strcmp(m, method) == 0;
    if (!known) return;  // answered Unimplemented by the server
  }
  server->Register(kPluginService, method,
                   [this, fn = std::move(fn)](const wire::CallContext&, std::string_view payload, wire::Responder r) {
                     const wire::Responder* outer = current;
                     bool outer_taken = reply_taken;
                     current = &r;
                     reply_taken = false;
                     Result<std::string> result = fn(payload);
                     bool taken = reply_taken;
                     current = outer;
                     reply_taken = outer_taken;
                     if (!taken) r.Finish(result);
                   });
}

void Stub::Impl::RegisterMethods() {
  Stub* s = self;

  Serve("Configure", [this, s](std::string_view payload) -> Result<std::string> {
    ConfigureRequest req;
    OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &req));
    runtime = req;
    uint32_t ev = options.events;
    std::string err = s->Configure(req, &ev);
    // An old stub knows events 1..11 only (ValidEvents was 0x7FF).
    if (options.v06_service) ev = (ev == 0 ? kValidEvents : ev) & 0x7FF;
    if (err.empty() && (ev & ~kValidEvents) != 0) {
      err = Format("plugin subscribed to unknown events 0x%x", ev & ~kValidEvents);
    }
    if (!err.empty()) {
      // Like the Go stub: a plugin that cannot configure itself does not run.
      std::string why = "plugin configuration failed: " + err;
      loop->Defer([this, why] { Finish(1, why); });
      return Error(Code::kUnknown, err);
    }
    events = ev;
    configured = true;
    ConfigureResponse resp;
    resp.events = static_cast<int32_t>(ev);
    return nriproto::Encode(resp);
  });

  Serve("Synchronize", [this, s](std::string_view payload) -> Result<std::string> {
    SynchronizeRequest req;
    OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &req));
    SynchronizeResponse resp;
    if (req.more) {
      // One piece of a split request: kept until the last one.
      for (PodSandbox& p : req.pods) sync_pending.pods.push_back(std::move(p));
      for (Container& c : req.containers) sync_pending.containers.push_back(std::move(c));
      sync_buffered = true;
      resp.more = true;
      return nriproto::Encode(resp);
    }
    if (sync_buffered) {
      for (PodSandbox& p : req.pods) sync_pending.pods.push_back(std::move(p));
      for (Container& c : req.containers) sync_pending.containers.push_back(std::move(c));
      req.pods = std::move(sync_pending.pods);
      req.containers = std::move(sync_pending.containers);
      sync_pending = SynchronizeRequest{};
      sync_buffered = false;
    }
    std::string err = s->Synchronize(req.pods, req.containers, &resp.update);
    return Answer(err, nriproto::Encode(resp));
  });

  Serve("Shutdown", [s](std::string_view) -> Result<std::string> {
    s->Shutdown();
    return std::string();
  });

  // Pod events carrying only a pod.
  struct PodEvent {
    const char* method;
    Event event;
    std::string (Stub::*fn)(const PodSandbox&);
  };
  for (const PodEvent& pe : {PodEvent{"RunPodSandbox", Event::kRunPodSandbox, &Stub::RunPodSandbox},
                             PodEvent{"StopPodSandbox", Event::kStopPodSandbox, &Stub::StopPodSandbox},
                             PodEvent{"RemovePodSandbox", Event::kRemovePodSandbox, &Stub::RemovePodSandbox},
                             PodEvent{"PostUpdatePodSandbox", Event::kPostUpdatePodSandbox,
                                      &Stub::PostUpdatePodSandbox}}) {
    Serve(pe.method, [this, s, pe](std::string_view payload) -> Result<std::string> {
      if (!Subscribed(pe.event)) return std::string();
      PodContainerRequest req;
      OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &req));
      return Answer((s->*pe.fn)(PodOf(req.pod)), std::string());
    });
  }

  Serve("UpdatePodSandbox", [this, s](std::string_view payload) -> Result<std::string> {
    if (!Subscribed(Event::kUpdatePodSandbox)) return std::string();
    UpdatePodSandboxRequest req;
    OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &req));
    return Answer(s->UpdatePodSandbox(req), std::string());
  });

  // Container events with an empty response.
  struct CtrEvent {
    const char* method;
    Event event;
    std::string (Stub::*fn)(const PodSandbox&, const Container&);
  };
  for (const CtrEvent& ce :
       {CtrEvent{"PostCreateContainer", Event::kPostCreateContainer, &Stub::PostCreateContainer},
        CtrEvent{"StartContainer", Event::kStartContainer, &Stub::StartContainer},
        CtrEvent{"PostStartContainer", Event::kPostStartContainer, &Stub::PostStartContainer},
        CtrEvent{"PostUpdateContainer", Event::kPostUpdateContainer, &Stub::PostUpdateContainer},
        CtrEvent{"RemoveContainer", Event::kRemoveContainer, &Stub::RemoveContainer}}) {
    Serve(ce.method, [this, s, ce](std::string_view payload) -> Result<std::string> {
      if (!Subscribed(ce.event)) return std::string();
      PodContainerRequest req;
      OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &req));
      return Answer((s->*ce.fn)(PodOf(req.pod), ContainerOf(req.container)), std::string());
    });
  }

  Serve("CreateContainer", [this, s](std::string_view payload) -> Result<std::string> {
    if (!Subscribed(Event::kCreateContainer)) return std::string();
    PodContainerRequest req;
    OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &req));
    CreateContainerResponse resp;
    std::string err = s->CreateContainer(PodOf(req.pod), ContainerOf(req.container), &resp);
    return Answer(err, nriproto::Encode(resp));
  });

  Serve("UpdateContainer", [this, s](std::string_view payload) -> Result<std::string> {
    if (!Subscribed(Event::kUpdateContainer)) return std::string();
    UpdateContainerRequest req;
    OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &req));
    static const Resources kNoResources;
    UpdateContainerResponse resp;
    std::string err = s->UpdateContainer(PodOf(req.pod), ContainerOf(req.container),
                                         req.linux_resources ? *req.linux_resources : kNoResources, &resp);
    return Answer(err, nriproto::Encode(resp));
  });

  Serve("StopContainer", [this, s](std::string_view payload) -> Result<std::string> {
    if (!Subscribed(Event::kStopContainer)) return std::string();
    PodContainerRequest req;
    OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &req));
    StopContainerResponse resp;
    std::string err = s->StopContainer(PodOf(req.pod), ContainerOf(req.container), &resp);
    return Answer(err, nriproto::Encode(resp));
  });

  // Older runtimes (and a v0.12 runtime talking to an older plugin) send the
  // notification events through StateChange.
  Serve("StateChange", [this, s](std::string_view payload) -> Result<std::string> {
    StateChangeEvent ev;
    OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &ev));
    if (ev.event == Event::kUnknown || ev.event >= Event::kLast || !Subscribed(ev.event)) return std::string();
    const PodSandbox& pod = PodOf(ev.pod);
    const Container& ctr = ContainerOf(ev.container);
    std::string err;
    switch (ev.event) {
      case Event::kRunPodSandbox: err = s->RunPodSandbox(pod); break;
      case Event::kStopPodSandbox: err = s->StopPodSandbox(pod); break;
      case Event::kRemovePodSandbox: err = s->RemovePodSandbox(pod); break;
      case Event::kPostUpdatePodSandbox: err = s->PostUpdatePodSandbox(pod); break;
      case Event::kPostCreateContainer: err = s->PostCreateContainer(pod, ctr); break;
      case Event::kStartContainer: err = s->StartContainer(pod, ctr); break;
      case Event::kPostStartContainer: err = s->PostStartContainer(pod, ctr); break;
      case Event::kPostUpdateContainer: err = s->PostUpdateContainer(pod, ctr); break;
      case Event::kRemoveContainer: err = s->RemoveContainer(pod, ctr); break;
      default: break;  // events with a response of their own never come this way
    }
    return Answer(err, std::string());
  });

  Serve("ValidateContainerAdjustment", [this, s](std::string_view payload) -> Result<std::string> {
    ValidateContainerAdjustmentResponse resp;
    if (!Subscribed(Event::kValidateContainerAdjustment)) return nriproto::Encode(resp);
    ValidateContainerAdjustmentRequest req;
    OUTPOST_RETURN_IF_ERROR(DecodeInto(payload, &req));
    std::string err = s->ValidateContainerAdjustment(req, &resp);
    if (!err.empty()) {
      // As the Go stub: a validator's error is a rejection with that reason.
      resp.reject = true;
      resp.reason = err;
    }
    return nriproto::Encode(resp);
  });
}

}  // namespace outpost::nri
