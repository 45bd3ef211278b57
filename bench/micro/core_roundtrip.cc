// core_roundtrip: how long a cache line takes to go from one CPU to another and back, for every
// pair of the CPUs this process may use: two threads, each pinned to one CPU, pass a counter back
// and forth (each waits, spinning, for the other's increment). It says where the hypervisor put
// the vCPUs right now: on the 2-core EPYC test VM the round trip is 90-140 ns while the two
// vCPUs share a last-level cache and 450-530 ns while they do not, and that changes for seconds
// to minutes at a time, under a running job. Every same-host hand-off and every cross-core copy
// pays it: an 8 MiB 2-rank all-reduce took 1.3 ms in the one placement and 1.2-2.5 ms in the
// other (collectives/shared_stores.h), so benchmark figures taken minutes apart compare only
// with this printed beside them.
//
//   core_roundtrip [--ops N] [--watch SECONDS]
// --watch samples the first pair every half second for that long and prints a line per sample.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"

namespace {

constexpr uint64_t kDeadlineNs = 10ull * 1000 * 1000 * 1000;  // a descheduled thread ends it
constexpr uint64_t kStop = ~uint64_t{0};                      // either side gives up

struct alignas(64) Line {
  std::atomic<uint64_t> v{0};
};

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Waits until line holds `want`; false when the other side stopped, or past the deadline.
bool waitFor(const Line& line, uint64_t want, uint64_t deadline) {
  for (uint32_t spins = 0;; ++spins) {
    const uint64_t v = line.v.load(std::memory_order_acquire);
    if (v == want) return true;
    if (v == kStop) return false;
    if ((spins & 0xfffff) == 0xfffff && braid::nowNs() > deadline) return false;
  }
}

// ns per round trip between cpus a and b over `ops` round trips; negative on failure.
double roundTripNs(int a, int b, uint64_t ops) {
  Line line;
  std::atomic<bool> pinned{true};
  const uint64_t deadline = braid::nowNs() + kDeadlineNs;
  std::thread echo([&] {
    if (!pin(b)) {
      pinned.store(false);
      line.v.store(kStop, std::memory_order_release);
      return;
    }
    for (uint64_t i = 0; i < ops; ++i) {
      if (!waitFor(line, 2 * i + 1, deadline)) return;
      line.v.store(2 * i + 2, std::memory_order_release);
    }
  });
  double ns = -1;
  if (pin(a)) {
    const uint64_t t0 = braid::nowNs();
    uint64_t i = 0;
    for (; i < ops; ++i) {
      line.v.store(2 * i + 1, std::memory_order_release);
      if (!waitFor(line, 2 * i + 2, deadline)) break;
    }
    if (i == ops) ns = static_cast<double>(braid::nowNs() - t0) / static_cast<double>(ops);
  }
  line.v.store(kStop, std::memory_order_release);  // releases an echo still waiting
  echo.join();
  return pinned.load() ? ns : -1;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t ops = 100000;
  double watchS = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ops" && i + 1 < argc) {
      ops = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--watch" && i + 1 < argc) {
      watchS = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--ops N] [--watch SECONDS]\n"
                   "  The cache-line round trip between every pair of usable CPUs (N round trips\n"
                   "  each, default 100000); --watch samples the first pair every 0.5 s.\n",
                   argv[0]);
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (ops == 0) ops = 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    std::perror("sched_getaffinity");
    return 1;
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.size() < 2) {
    std::fprintf(stderr, "core_roundtrip: this process may use %zu CPU(s); it needs two\n",
                 cpus.size());
    return 1;
  }
  std::printf("# core_roundtrip: cache-line round trip between two pinned threads, %llu round "
              "trips per figure\n# cpu_a cpu_b  ns\n",
              static_cast<unsigned long long>(ops));
  int rc = 0;
  for (size_t i = 0; i < cpus.size(); ++i) {
    for (size_t j = i + 1; j < cpus.size(); ++j) {
      const double ns = roundTripNs(cpus[i], cpus[j], ops);
      if (ns < 0) {
        std::printf("%7d %5d  failed (not pinned, or a thread stalled for %llu s)\n", cpus[i],
                    cpus[j], static_cast<unsigned long long>(kDeadlineNs / 1000000000ull));
        rc = 1;
      } else {
        std::printf("%7d %5d  %.0f\n", cpus[i], cpus[j], ns);
      }
    }
  }
  if (watchS > 0) {
    std::printf("# watch: cpus %d-%d every 0.5 s\n# seconds  ns\n", cpus[0], cpus[1]);
    const uint64_t t0 = braid::nowNs();
    while (static_cast<double>(braid::nowNs() - t0) * 1e-9 < watchS) {
      const double ns = roundTripNs(cpus[0], cpus[1], ops);
      std::printf("%9.1f  %.0f\n", static_cast<double>(braid::nowNs() - t0) * 1e-9, ns);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  return rc;
}
