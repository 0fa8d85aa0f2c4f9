// One attempt of an http or tcp health check, on the loop without blocking
// it. Owns: the socket (made in the job's network namespace when it has one:
// net::SocketInNetns enters it for the one socket() call), the non-blocking
// connect, for http the request and the response head (job/check_http), and
// the attempt's deadline. done runs once, from a loop callback, unless the
// probe is destroyed first (which ends the attempt silently).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "job/check_http.h"
#include "job/spec.h"
#include "loop/loop.h"

namespace outpost::job {

struct ProbeResult {
  bool ok = false;
  std::string output;  // "200 OK", "connected", "connect: Connection refused", "timed out after 2s"
};

class NetProbe {
 public:
  using Done = std::function<void(const ProbeResult&)>;
  // netns: the namespace's path, "" = the agent's own.
  NetProbe(Loop* loop, const CheckSpec& check, const std::string& netns, Done done);
  ~NetProbe();
  NetProbe(const NetProbe&) = delete;
  NetProbe& operator=(const NetProbe&) = delete;

 private:
  void Begin(const CheckSpec& check, const std::string& netns);
  void OnEvents(uint32_t events);
  void Finish(bool ok, std::string output);
  void FailLater(std::string why);  // from the loop, not from the constructor

  Loop* loop_;
  Done done_;
  bool http_ = false;
  bool connected_ = false;
  LoopFd sock_;
  Loop::TimerId timer_ = 0;
  std::string request_;
  size_t sent_ = 0;
  HttpResponseParser parser_;
  int64_t timeout_nanos_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::job
