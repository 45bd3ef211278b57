// Clocks, deadlines and the back-off used by every wait loop.
#pragma once

#include <cstdint>

namespace braid {

/// Monotonic nanoseconds.
uint64_t nowNs();
inline double nowUs() { return static_cast<double>(nowNs()) * 1e-3; }

/// A point in time after which a wait gives up. Deadline::never() is only for tests.
class Deadline {
 public:
  static Deadline afterMs(int64_t ms) { return Deadline(nowNs() + static_cast<uint64_t>(ms) * 1000000ull); }
  static Deadline never() { return Deadline(UINT64_MAX); }
  bool expired() const { return nowNs() >= at_; }
  int64_t remainingMs() const {
    uint64_t n = nowNs();
    return n >= at_ ? 0 : static_cast<int64_t>((at_ - n) / 1000000ull);
  }
  uint64_t atNs() const { return at_; }

 private:
  explicit Deadline(uint64_t at) : at_(at) {}
  uint64_t at_;
};

/// Progressive back-off for polling loops: busy-spin briefly, then sched_yield (which lets an
/// oversubscribed peer on the same core run), then short sleeps growing to ~100 us so that a
/// stalled job does not burn a core. reset() after every unit of progress.
class Backoff {
 public:
  void pause();
  void reset() { idle_ = 0; }
  uint32_t idleRounds() const { return idle_; }

 private:
  uint32_t idle_ = 0;
};

}  // namespace braid
