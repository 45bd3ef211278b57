// Deadline: a point in time after which a wait gives up. Every blocking call of braid takes one
// (or derives one from BRAID_TIMEOUT_MS), and so does Store::get.
#pragma once

#include <chrono>
#include <cstdint>

namespace braid {

/// A point on the monotonic clock (CLOCK_MONOTONIC, which std::chrono::steady_clock reads).
/// Deadline::never() is only for tests.
class Deadline {
 public:
  static Deadline afterMs(int64_t ms) {
    return Deadline(monotonicNs() + static_cast<uint64_t>(ms) * 1000000ull);
  }
  static Deadline never() { return Deadline(UINT64_MAX); }
  bool expired() const { return monotonicNs() >= at_; }
  int64_t remainingMs() const {
    const uint64_t n = monotonicNs();
    return n >= at_ ? 0 : static_cast<int64_t>((at_ - n) / 1000000ull);
  }
  /// The deadline in monotonic nanoseconds.
  uint64_t atNs() const { return at_; }

 private:
  explicit Deadline(uint64_t at) : at_(at) {}
  static uint64_t monotonicNs() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
  uint64_t at_;
};

}  // namespace braid
