// Status and Result<T>: braid's error values. No exception crosses a braid boundary; every
// fallible call returns one of these. Codes map one-to-one onto ncclResult_t (plus kTimeout).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>

namespace braid {

/// Error codes. Values 0..7 equal ncclResult_t's; kTimeout has no NCCL counterpart.
enum class Code : int {
  kOk = 0,
  kUnhandledCuda = 1,
  kSystem = 2,
  kInternal = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemote = 6,
  kInProgress = 7,
  kTimeout = 8,
};

/// Short name of a code ("ok", "system error", ...).
const char* codeName(Code code);

/// An outcome: ok, or a code with a message that says what failed, where, and what to do.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message);

  static Status ok() { return Status(); }

  bool isOk() const { return rep_ == nullptr; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  const std::string& message() const;
  /// "invalid usage: <message>", or "ok".
  std::string toString() const;

  /// Returns a copy whose message is prefixed with `context` and ": ".
  Status withContext(const std::string& context) const;

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

Status systemError(std::string message);
Status internalError(std::string message);
Status invalidArgument(std::string message);
Status invalidUsage(std::string message);
Status remoteError(std::string message);
Status timeoutError(std::string message);
/// A system error whose message ends with strerror(err).
Status errnoError(const std::string& what, int err);

/// A value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool isOk() const { return v_.index() == 0; }
  explicit operator bool() const { return isOk(); }
  Status status() const { return isOk() ? Status::ok() : std::get<1>(v_); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace braid

#define BRAID_CONCAT_INNER_(a, b) a##b
#define BRAID_CONCAT_(a, b) BRAID_CONCAT_INNER_(a, b)

/// Returns the Status of `expr` from the enclosing function when it is not ok.
#define BRAID_RETURN_IF_ERROR(expr)          \
  do {                                       \
    ::braid::Status braid_s_ = (expr);       \
    if (!braid_s_.isOk()) return braid_s_;   \
  } while (0)

/// `lhs = value of expr`, or returns its Status from the enclosing function.
#define BRAID_ASSIGN_OR_RETURN(lhs, expr) \
  BRAID_ASSIGN_OR_RETURN_IMPL_(BRAID_CONCAT_(braid_r_, __LINE__), lhs, expr)
#define BRAID_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.isOk()) return tmp.status();              \
  lhs = std::move(tmp).value()
