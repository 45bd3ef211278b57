#include "core/futex.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace braid {

void futexWait(const void* word, uint32_t expected, uint64_t timeoutNs) {
  timespec ts{static_cast<time_t>(timeoutNs / 1000000000ull), static_cast<long>(timeoutNs % 1000000000ull)};
  syscall(SYS_futex, const_cast<void*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futexWakeAll(const void* word) {
  syscall(SYS_futex, const_cast<void*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

int usableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace braid
