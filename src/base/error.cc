#include "base/error.h"

#include <cerrno>
#include <cstring>

namespace outpost {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kCanceled: return "Canceled";
    case Code::kUnknown: return "Unknown";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kDeadlineExceeded: return "DeadlineExceeded";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kResourceExhausted: return "ResourceExhausted";
    case Code::kFailedPrecondition: return "FailedPrecondition";
    case Code::kAborted: return "Aborted";
    case Code::kOutOfRange: return "OutOfRange";
    case Code::kUnimplemented: return "Unimplemented";
    case Code::kInternal: return "Internal";
    case Code::kUnavailable: return "Unavailable";
    case Code::kDataLoss: return "DataLoss";
    case Code::kUnauthenticated: return "Unauthenticated";
  }
  return "Unknown";
}

static Code CodeFromErrno(int err) {
  switch (err) {
    case ENOENT: case ESRCH: return Code::kNotFound;
    case EEXIST: return Code::kAlreadyExists;
    case EACCES: case EPERM: return Code::kPermissionDenied;
    case EINVAL: case ENAMETOOLONG: return Code::kInvalidArgument;
    case ENOMEM: case ENOSPC: case EMFILE: case ENFILE: case EDQUOT: return Code::kResourceExhausted;
    case ETIMEDOUT: return Code::kDeadlineExceeded;
    case ECONNREFUSED: case ECONNRESET: case EPIPE: case EAGAIN: return Code::kUnavailable;
    case ENOSYS: case EOPNOTSUPP: return Code::kUnimplemented;
    default: return Code::kInternal;
  }
}

Error ErrnoError(const std::string& what, int err) {
  return Error(CodeFromErrno(err), what + ": " + std::strerror(err), err);
}

Error ErrnoError(const std::string& what) { return ErrnoError(what, errno); }

Error PathError(const char* what, const std::string& path) {
  int err = errno;
  // c_str(): a caller may pass a path cut short by a NUL (sys::MkdirAll).
  return ErrnoError(std::string(what) + " '" + path.c_str() + "'", err);
}

}  // namespace outpost
