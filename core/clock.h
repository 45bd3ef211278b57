// Clocks and the back-off used by every wait loop; Deadline is public (braid/deadline.h).
#pragma once

#include <cstdint>

#include "braid/deadline.h"

namespace braid {

/// Monotonic nanoseconds.
uint64_t nowNs();
inline double nowUs() { return static_cast<double>(nowNs()) * 1e-3; }

/// Progressive back-off for polling loops: busy-spin briefly, then sched_yield (which lets an
/// oversubscribed peer on the same core run), then short sleeps growing to ~100 us so that a
/// stalled job does not burn a core. reset() after every unit of progress.
class Backoff {
 public:
  void pause();
  void reset() { idle_ = 0; }
  uint32_t idleRounds() const { return idle_; }
  /// Still in the first, spinning rounds: past them every pause is a syscall (a yield that can
  /// last a whole time slice of every other runnable process, or a sleep), and a caller's
  /// deadline checks should run after each one.
  bool spinning() const { return idle_ <= kSpinRounds; }

  static constexpr uint32_t kSpinRounds = 64;

 private:
  uint32_t idle_ = 0;
};

}  // namespace braid
