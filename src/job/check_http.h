// The response side of an http health check. Owns: an incremental parser of
// an HTTP/1.x response head (status line and header lines) from untrusted
// bytes, and the request the check sends. Only what a check needs: the
// status code and reason; the body is not read. 1xx interim responses are
// skipped. Bounded: a head over kMaxHeadBytes is an error.
#pragma once

#include <cstddef>
#include <string>

namespace outpost::job {

std::string HttpCheckRequest(const std::string& address, int port, const std::string& path);

class HttpResponseParser {
 public:
  enum class State { kNeedMore, kDone, kError };
  static constexpr size_t kMaxHeadBytes = 16 << 10;
  static constexpr size_t kMaxLineBytes = 8 << 10;

  // Feeds the next bytes; returns the state after them. Bytes after the
  // head are ignored. Once done or failed, further input changes nothing.
  State Feed(const char* data, size_t n);
  // The peer closed: a head not complete by now is an error.
  State Finish();

  State state() const { return state_; }
  int status() const { return status_; }          // when done
  const std::string& reason() const { return reason_; }  // when done
  const std::string& error() const { return error_; }    // when failed

 private:
  State Line(const std::string& line);
  State Fail(const std::string& why);

  State state_ = State::kNeedMore;
  std::string line_;
  bool in_headers_ = false;
  size_t head_bytes_ = 0;
  int status_ = 0;
  std::string reason_;
  std::string error_;
};

}  // namespace outpost::job
