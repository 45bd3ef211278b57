#include "core/clock.h"

#include <sched.h>
#include <time.h>

namespace braid {

uint64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Backoff::pause() {
  // Spin while a reply is likely within a few hundred ns (peer on another core), then yield so an
  // oversubscribed peer on this core can run, then sleep in growing steps.
  constexpr uint32_t kYieldRounds = 2000;
  ++idle_;
  if (idle_ <= kSpinRounds) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    return;
  }
  if (idle_ <= kSpinRounds + kYieldRounds) {
    sched_yield();
    return;
  }
  uint32_t extra = idle_ - kSpinRounds - kYieldRounds;
  long ns = extra < 100 ? 1000L * (1 + extra / 10) : 100000L;
  timespec ts{0, ns};
  nanosleep(&ts, nullptr);
}

}  // namespace braid
