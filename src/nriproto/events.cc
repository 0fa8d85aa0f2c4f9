// nri::EventMethod (include/outpost/nri_api.h): the Plugin service method
// that carries each event.
#include "outpost/nri_api.h"

namespace outpost::nri {

const char* EventMethod(Event e) {
  switch (e) {
    case Event::kRunPodSandbox: return "RunPodSandbox";
    case Event::kStopPodSandbox: return "StopPodSandbox";
    case Event::kRemovePodSandbox: return "RemovePodSandbox";
    case Event::kCreateContainer: return "CreateContainer";
    case Event::kPostCreateContainer: return "PostCreateContainer";
    case Event::kStartContainer: return "StartContainer";
    case Event::kPostStartContainer: return "PostStartContainer";
    case Event::kUpdateContainer: return "UpdateContainer";
    case Event::kPostUpdateContainer: return "PostUpdateContainer";
    case Event::kStopContainer: return "StopContainer";
    case Event::kRemoveContainer: return "RemoveContainer";
    case Event::kUpdatePodSandbox: return "UpdatePodSandbox";
    case Event::kPostUpdatePodSandbox: return "PostUpdatePodSandbox";
    case Event::kValidateContainerAdjustment: return "ValidateContainerAdjustment";
    case Event::kUnknown:
    case Event::kLast: break;
  }
  return "";
}

}  // namespace outpost::nri
