// outpost NRI plugin library: write an NRI plugin (containerd's Node
// Resource Interface) in C++. Works with any NRI runtime: outpost, and
// containerd or CRI-O (the protocol is upstream's, nri.pkg.api.v1alpha1
// over the NRI multiplexer and ttRPC; docs/nri.md says what was verified
// against which). Link build/liboutpost-plugin.a; C++17; single-threaded;
// nothing else is needed at run time.
//
//   class Logger : public outpost::nri::Stub {
//    public:
//     using Stub::Stub;
//     std::string CreateContainer(const outpost::nri::PodSandbox& pod, const outpost::nri::Container& ctr,
//                                 outpost::nri::CreateContainerResponse* out) override {
//       out->adjust.emplace().env.push_back({"SEEN_BY", "logger"});
//       return "";  // "" = success; anything else is the error the runtime gets
//     }
//   };
//   int main(int argc, char** argv) {
//     outpost::nri::StubOptions o;
//     o.argv0 = argv[0];
//     o.events = outpost::nri::EventMask(outpost::nri::Event::kCreateContainer);
//     Logger p(o);
//     return p.Run();
//   }
//
// Connecting, like upstream's Go stub:
//   - name and index: StubOptions, else NRI_PLUGIN_NAME / NRI_PLUGIN_IDX,
//     else argv[0]'s base name in "NN-name" form;
//   - the connection: NRI_PLUGIN_SOCKET=<fd> (a plugin the runtime launched
//     from its plugin dir), else StubOptions::socket_path, else
//     /var/run/nri/nri.sock.
// Then RegisterPlugin, and the runtime's Configure (answered with
// Configure()'s event mask), Synchronize (split requests recombined) and
// the subscribed events, each through a virtual method below. A request
// for an event the plugin did not subscribe to is answered as success.
// A handler's error text reaches the runtime as ttRPC status Unknown (2),
// as a Go handler's error does; ValidateContainerAdjustment's error text is
// a rejection with that reason, as in the Go stub.
//
// Everything runs on one loop in the thread that called Run(): handlers,
// After() callbacks and UpdateContainers() completions. A handler that must
// wait for something (an UpdateContainers reply, a timer) takes its
// request's answer with TakeReply() and answers later.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "outpost/nri_api.h"

namespace outpost::nri {

struct StubOptions {
  std::string name;         // "" = from the environment or argv0
  std::string index;        // two digits; "" = from the environment or argv0
  std::string argv0;        // for "NN-name" (the base name is used)
  std::string socket_path;  // "" = /var/run/nri/nri.sock (NRI_PLUGIN_SOCKET wins)
  // The events to subscribe to (EventMask bits); 0 = every event the
  // runtime knows. Configure() may change it.
  uint32_t events = 0;
  int64_t registration_timeout_ms = 5000;
  // Called when the connection to the runtime is lost (Run then returns 1);
  // reconnecting is the caller's choice (call Run again).
  std::function<void(const std::string& why)> on_close;
  // Called once the runtime accepted the registration (before Configure).
  std::function<void()> on_registered;
  // Serve only the Plugin service of NRI v0.6 and before (Configure,
  // Synchronize, Shutdown, CreateContainer, UpdateContainer, StopContainer,
  // StateChange), as a plugin built with an old Go stub does: a runtime
  // must then send the other events through StateChange. For testing
  // runtimes.
  bool v06_service = false;
};

// The plugin's name and index as Run() resolves them: options, else
// NRI_PLUGIN_NAME / NRI_PLUGIN_IDX, else argv0's base name "NN-name" (with
// only an index given, the base name is the name, as upstream). Returns ""
// or the error, e.g. `invalid plugin name "logger", idx-pluginname expected`.
std::string ResolveIdentity(const StubOptions& options, std::string* name, std::string* index);

class Stub {
 public:
  // The answer to one request, taken over by its handler (TakeReply).
  // Copies refer to the same request; the first answer counts, later ones
  // and answers after the connection closed are dropped.
  class Reply {
   public:
    Reply();
    // payload: the encoded response message (any bytes: a test may send
    // garbage on purpose).
    void Send(const std::string& payload) const;
    // status Unknown (2) with this text.
    void Fail(const std::string& error) const;
    bool pending() const;

   private:
    friend class Stub;
    struct State;
    std::shared_ptr<State> state_;
  };

  explicit Stub(StubOptions options);
  // Inline, like every virtual method here: the class has no key function,
  // so a plugin built with RTTI links against the library built without.
  virtual ~Stub() = default;
  Stub(const Stub&) = delete;
  Stub& operator=(const Stub&) = delete;

  // Connects, registers and serves until the connection closes or Stop().
  // Returns 0 after Stop(), 1 when it could not connect or register or the
  // connection was lost (the reason on stderr, like the Go stub's
  // "Connection to the runtime lost, exiting...").
  int Run();
  void Stop();

  // An unsolicited update or eviction of containers (Runtime.UpdateContainers).
  // done gets the updates the runtime could not apply, or the error.
  void UpdateContainers(const UpdateContainersRequest& req,
                        std::function<void(const std::string& error, const UpdateContainersResponse& resp)> done);
  // Runs fn after delay_nanos on the plugin's loop (timers set before Run
  // start when it does).
  void After(int64_t delay_nanos, std::function<void()> fn);
  // Only from inside a handler: the request being handled is answered
  // through the returned Reply instead (or never: the runtime's timeout
  // then decides); the handler's return value and output are ignored.
  Reply TakeReply();

  const std::string& name() const;
  const std::string& index() const;
  // What the runtime sent in Configure (valid once Configure arrived).
  const ConfigureRequest& runtime() const;
  // The subscription in force (after Configure: what it answered; 0 = all).
  uint32_t events() const;

  // ---- handlers: return "" for success, else the error text -------------
  // The defaults accept and change nothing.
  // *events starts as StubOptions::events.
  virtual std::string Configure(const ConfigureRequest& /*req*/, uint32_t* /*events*/) { return ""; }
  // The whole state, after any split requests were recombined.
  virtual std::string Synchronize(const std::vector<PodSandbox>& /*pods*/, const std::vector<Container>& /*containers*/,
                                  std::vector<ContainerUpdate>* /*updates*/) {
    return "";
  }
  virtual void Shutdown() {}
  virtual std::string RunPodSandbox(const PodSandbox& /*pod*/) { return ""; }
  virtual std::string UpdatePodSandbox(const UpdatePodSandboxRequest& /*req*/) { return ""; }
  virtual std::string PostUpdatePodSandbox(const PodSandbox& /*pod*/) { return ""; }
  virtual std::string StopPodSandbox(const PodSandbox& /*pod*/) { return ""; }
  virtual std::string RemovePodSandbox(const PodSandbox& /*pod*/) { return ""; }
  virtual std::string CreateContainer(const PodSandbox& /*pod*/, const Container& /*ctr*/,
                                      CreateContainerResponse* /*out*/) {
    return "";
  }
  virtual std::string PostCreateContainer(const PodSandbox& /*pod*/, const Container& /*ctr*/) { return ""; }
  virtual std::string StartContainer(const PodSandbox& /*pod*/, const Container& /*ctr*/) { return ""; }
  virtual std::string PostStartContainer(const PodSandbox& /*pod*/, const Container& /*ctr*/) { return ""; }
  virtual std::string UpdateContainer(const PodSandbox& /*pod*/, const Container& /*ctr*/, const Resources& /*res*/,
                                      UpdateContainerResponse* /*out*/) {
    return "";
  }
  virtual std::string PostUpdateContainer(const PodSandbox& /*pod*/, const Container& /*ctr*/) { return ""; }
  virtual std::string StopContainer(const PodSandbox& /*pod*/, const Container& /*ctr*/,
                                    StopContainerResponse* /*out*/) {
    return "";
  }
  virtual std::string RemoveContainer(const PodSandbox& /*pod*/, const Container& /*ctr*/) { return ""; }
  // An error text is a rejection with that reason (as the Go stub).
  virtual std::string ValidateContainerAdjustment(const ValidateContainerAdjustmentRequest& /*req*/,
                                                  ValidateContainerAdjustmentResponse* /*out*/) {
    return "";
  }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared_ptr: destructible where Impl is incomplete
};

}  // namespace outpost::nri
