#include "braid/status.h"

#include <cstring>

namespace braid {

const char* codeName(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kUnhandledCuda: return "unhandled cuda error";
    case Code::kSystem: return "system error";
    case Code::kInternal: return "internal error";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kInvalidUsage: return "invalid usage";
    case Code::kRemote: return "remote error";
    case Code::kInProgress: return "in progress";
    case Code::kTimeout: return "timeout";
  }
  return "unknown error";
}

Status::Status(Code code, std::string message) {
  if (code != Code::kOk) rep_ = std::make_shared<const Rep>(Rep{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::toString() const {
  if (isOk()) return "ok";
  return std::string(codeName(code())) + ": " + message();
}

Status Status::withContext(const std::string& context) const {
  if (isOk()) return *this;
  return Status(code(), context + ": " + message());
}

Status systemError(std::string message) { return Status(Code::kSystem, std::move(message)); }
Status internalError(std::string message) { return Status(Code::kInternal, std::move(message)); }
Status invalidArgument(std::string message) {
  return Status(Code::kInvalidArgument, std::move(message));
}
Status invalidUsage(std::string message) { return Status(Code::kInvalidUsage, std::move(message)); }
Status remoteError(std::string message) { return Status(Code::kRemote, std::move(message)); }
Status timeoutError(std::string message) { return Status(Code::kTimeout, std::move(message)); }

Status errnoError(const std::string& what, int err) {
  char buf[128];
  const char* text = strerror_r(err, buf, sizeof(buf));
  return Status(Code::kSystem, what + ": " + text);
}

}  // namespace braid
