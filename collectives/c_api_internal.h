// Shared by every C API file (collectives/c_api.cc, bucketing/c_api.cc): what braidComm_t points
// to (exactly one definition), the thread's last error message, and the noexcept edge that turns
// Status and exceptions into braidResult_t.
#pragma once

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "braid/braid.h"
#include "braid/comm.hpp"

struct braidComm {
  std::unique_ptr<braid::Communicator> comm;
};

namespace braid::capi {

/// The message of the last failed C API call on this thread (braidGetLastError).
inline std::string& lastError() {
  thread_local std::string message;
  return message;
}

inline braidResult_t toResult(const Status& s) {
  if (!s.isOk()) lastError() = s.toString();
  return static_cast<braidResult_t>(s.code());
}

inline braidResult_t badArg(const char* what) {
  lastError() = std::string("invalid argument: ") + what;
  return braidInvalidArgument;
}

/// Runs f, turning any exception into a result code: nothing crosses the C boundary.
template <typename F>
braidResult_t guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    lastError() = "out of memory";
    return braidSystemError;
  } catch (const std::exception& e) {
    lastError() = std::string("internal error: ") + e.what();
    return braidInternalError;
  } catch (...) {
    lastError() = "internal error: unknown exception";
    return braidInternalError;
  }
}

/// A C caller may pass any int as an enum; reading it through its enum type would be undefined
/// behaviour in C++ for values outside the enumerators, so read the bits.
template <typename E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}
inline DataType toType(const braidDataType_t& t) { return static_cast<DataType>(rawEnum(t)); }
inline ReduceOp toOp(const braidRedOp_t& o) { return static_cast<ReduceOp>(rawEnum(o)); }

}  // namespace braid::capi
