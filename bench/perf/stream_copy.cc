// braid-stream: a STREAM-like Copy (c[i] = a[i]) so that collective bandwidths can be set against
// what this machine's memory moves. Arrays are at least 4 × the last-level cache (as STREAM
// requires) and first-touched by the threads that later copy them; each thread count runs the
// copy several times and reports the best, counting read + write bytes (2 × array bytes) as
// STREAM's Copy does. Two kernels: memcpy (what braid's shm paths use; glibc may use
// non-temporal stores for large blocks) and a plain element loop (STREAM's kernel).
#include <getopt.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "topology/sysfs.h"

#ifndef BRAID_PERF_BUILD_TYPE
#define BRAID_PERF_BUILD_TYPE "unknown"
#endif

namespace {

constexpr size_t kMinArrayBytes = size_t{64} << 20;
constexpr size_t kAlignment = size_t{2} << 20;

struct Options {
  size_t arrayBytes = 0;  // 0 = max(4 × L3, 64 MiB)
  std::vector<int> threads = {1, 2};
  int runs = 10;
  std::string jsonPath;
};

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string hostName() {
  char host[256] = {};
  return gethostname(host, sizeof(host) - 1) == 0 ? host : "unknown";
}

// STREAM's kernel, kept a loop (GCC would otherwise turn it into a memcpy call).
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
void loopCopy(double* __restrict c, const double* __restrict a, size_t n) {
  for (size_t i = 0; i < n; ++i) c[i] = a[i];
}

void memcpyCopy(double* c, const double* a, size_t n) { std::memcpy(c, a, n * sizeof(double)); }

using Kernel = void (*)(double*, const double*, size_t);

// Runs kernel on `threads` threads, each on its contiguous slice; returns seconds, wall time from
// release to the last thread finishing (thread start-up is outside the timing).
double timedCopy(Kernel kernel, double* c, const double* a, size_t n, int threads) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const size_t lo = n * t / threads;
      const size_t hi = n * (t + 1) / threads;
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      kernel(c + lo, a + lo, hi - lo);
    });
  }
  while (ready.load() != threads) {
  }
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& th : pool) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// First touch by slice, as the copy threads will use them.
void firstTouch(double* a, double* c, size_t n, int threads) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      const size_t lo = n * t / threads;
      const size_t hi = n * (t + 1) / threads;
      for (size_t i = lo; i < hi; ++i) {
        a[i] = static_cast<double>(i % 1000);
        c[i] = 0;
      }
    });
  }
  for (std::thread& th : pool) th.join();
}

void usage(const char* prog, FILE* out) {
  std::fprintf(out,
               "Usage: %s [-s SIZE] [-t 1,2] [-r RUNS] [-J FILE]\n"
               "  -s SIZE   bytes per array (default max(4 x L3, 64M)); suffixes K, M, G\n"
               "  -t LIST   thread counts (default 1,2)\n"
               "  -r RUNS   runs per thread count; the best is reported (default 10)\n"
               "  -J FILE   one JSON object per line per thread count and kernel\n",
               prog);
}

size_t parseSize(const char* s) {
  char* end = nullptr;
  size_t v = std::strtoull(s, &end, 10);
  switch (end && *end ? (*end | 0x20) : 0) {
    case 'k':
      v <<= 10;
      break;
    case 'm':
      v <<= 20;
      break;
    case 'g':
      v <<= 30;
      break;
    default:
      break;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int c;
  while ((c = getopt(argc, argv, "s:t:r:J:h")) != -1) {
    switch (c) {
      case 's':
        o.arrayBytes = parseSize(optarg);
        break;
      case 't': {
        o.threads.clear();
        std::string list = optarg;
        size_t pos = 0;
        while (pos <= list.size()) {
          size_t comma = list.find(',', pos);
          if (comma == std::string::npos) comma = list.size();
          const int t = std::atoi(list.substr(pos, comma - pos).c_str());
          if (t > 0) o.threads.push_back(t);
          pos = comma + 1;
        }
        if (o.threads.empty()) {
          std::fprintf(stderr, "%s: -t needs thread counts like 1,2\n", argv[0]);
          return 2;
        }
        break;
      }
      case 'r':
        o.runs = std::max(1, std::atoi(optarg));
        break;
      case 'J':
        o.jsonPath = optarg;
        break;
      case 'h':
        usage(argv[0], stdout);
        return 0;
      default:
        usage(argv[0], stderr);
        return 2;
    }
  }
  const size_t l3 = braid::topo::lastLevelCacheBytes();
  if (o.arrayBytes == 0) o.arrayBytes = std::max(4 * l3, kMinArrayBytes);
  const size_t n = o.arrayBytes / sizeof(double);
  const size_t bytes = n * sizeof(double);
  void* pa = nullptr;
  void* pc = nullptr;
  if (posix_memalign(&pa, kAlignment, bytes) != 0 || posix_memalign(&pc, kAlignment, bytes) != 0) {
    std::fprintf(stderr, "%s: cannot allocate 2 x %zu bytes\n", argv[0], bytes);
    return 1;
  }
  double* a = static_cast<double*>(pa);
  double* cc = static_cast<double*>(pc);
  const int maxThreads = *std::max_element(o.threads.begin(), o.threads.end());
  firstTouch(a, cc, n, maxThreads);

  utsname u{};
  uname(&u);
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  std::printf(
      "# braid-stream: STREAM-like Copy, GB/s = 2 x array bytes / best time (1 GB = 1e9 B)\n");
  std::printf("# machine : %s, %ld CPUs online (%d usable), L3 %zu MiB, host %s, %s %s\n",
              cpuModel().c_str(), sysconf(_SC_NPROCESSORS_ONLN), CPU_COUNT(&set), l3 >> 20,
              hostName().c_str(), u.sysname, u.release);
  std::printf("# build   : %s, -O2, %s %s\n", BRAID_PERF_BUILD_TYPE,
#if defined(__clang__)
              "clang++", __clang_version__
#else
              "g++", __VERSION__
#endif
  );
  std::printf("# arrays  : 2 x %zu MiB (%.1f x L3), %d runs per row, best reported\n", bytes >> 20,
              l3 ? static_cast<double>(bytes) / static_cast<double>(l3) : 0.0, o.runs);
  std::printf("#%7s  %7s  %10s  %10s  %10s\n", "threads", "kernel", "best GB/s", "avg GB/s",
              "best ms");
  FILE* json = o.jsonPath.empty() ? nullptr : std::fopen(o.jsonPath.c_str(), "w");
  struct KernelDef {
    const char* name;
    Kernel fn;
  } kernels[] = {{"memcpy", memcpyCopy}, {"loop", loopCopy}};
  bool ok = true;
  for (int threads : o.threads) {
    for (const KernelDef& k : kernels) {
      timedCopy(k.fn, cc, a, n, threads);  // untimed warm-up
      double best = 1e30;
      double sum = 0;
      for (int r = 0; r < o.runs; ++r) {
        const double t = timedCopy(k.fn, cc, a, n, threads);
        best = std::min(best, t);
        sum += t;
      }
      const double bestGBps = 2.0 * static_cast<double>(bytes) / best / 1e9;
      const double avgGBps = 2.0 * static_cast<double>(bytes) / (sum / o.runs) / 1e9;
      std::printf("%8d  %7s  %10.2f  %10.2f  %10.3f\n", threads, k.name, bestGBps, avgGBps,
                  best * 1e3);
      std::fflush(stdout);
      if (json) {
        std::fprintf(json,
                     "{\"tool\":\"braid-stream\",\"kernel\":\"%s\",\"threads\":%d,"
                     "\"array_bytes\":%zu,\"runs\":%d,\"best_GBps\":%.3f,\"avg_GBps\":%.3f,"
                     "\"host\":\"%s\",\"cpu\":\"%s\"}\n",
                     k.name, threads, bytes, o.runs, bestGBps, avgGBps, hostName().c_str(),
                     cpuModel().c_str());
      }
    }
    for (size_t i = 0; i < n; i += 4099) ok = ok && cc[i] == a[i];
  }
  if (json) std::fclose(json);
  free(pa);
  free(pc);
  if (!ok) {
    std::fprintf(stderr, "%s: copy verification failed\n", argv[0]);
    return 1;
  }
  return 0;
}
