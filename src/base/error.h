// Errors as values. Owns: the Error type, Result<T>, and the status-code
// vocabulary (gRPC numbering, so an Error crosses the ttRPC wire unchanged).
// Does not own: logging of errors (base/log) or their wire encoding (wire/).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace outpost {

// gRPC status codes (google.rpc.Code), all of them: gRPC peers send any.
enum class Code : int32_t {
  kOk = 0,
  kCanceled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

const char* CodeName(Code code);

class Error {
 public:
  Error(Code code, std::string message, int sys_errno = 0)
      : code_(code), message_(std::move(message)), errno_(sys_errno) {}

  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // The errno behind an error from a system call (0 otherwise), so callers
  // can tell ENOENT from ESRCH where both map to kNotFound.
  int sys_errno() const { return errno_; }

  // Adds context on the way up: Wrap("start task web") turns
  // "open x: No such file" into "start task web: open x: No such file".
  Error Wrap(const std::string& context) const { return Error(code_, context + ": " + message_, errno_); }

 private:
  Code code_;
  std::string message_;
  int errno_;
};

// Error from errno: "<what>: <strerror(err)>", code mapped from errno.
Error ErrnoError(const std::string& what, int err);
// Same, using the current errno.
Error ErrnoError(const std::string& what);
// "<what> '<path>': <strerror(errno)>", the usual shape of a failed call on a
// path (one out-of-line call instead of a string built at each call site).
Error PathError(const char* what, const std::string& path);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(implicit)
  Result(Error error) : v_(std::move(error)) {}     // NOLINT(implicit)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: ok, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT(implicit)

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_{Code::kOk, ""};
  bool ok_ = true;
};

inline Status OkStatus() { return Status(); }

}  // namespace outpost

// Early return of the error held by a Status or Result expression.
#define OUTPOST_RETURN_IF_ERROR(expr)          \
  do {                                         \
    auto _st = (expr);                         \
    if (!_st.ok()) return _st.error();         \
  } while (0)

// The same for functions that report through a callback: calls cb with the
// error and returns.
#define OUTPOST_RETURN_IF_ERROR_CB(expr, cb) \
  do {                                      \
    auto _st = (expr);                      \
    if (!_st.ok()) return cb(_st.error());  \
  } while (0)
