// handoff_floor: the least time P processes on this machine need to pass one barrier, the
// floor under any small all-reduce between them. Each process stores its round number in its own
// cache line of a shared page and waits until every other process has stored it too; nothing
// else. When the processes outnumber the cores it yields while waiting, as braid's shared-memory
// collectives do, so the figure prices the scheduler's hand-offs; otherwise it spins.
//
// Read braid-perf's 8-byte times against it (issue #2: "4 ranks on 2 cores within 10x of the
// 2-rank latency"): a collective can not beat this, so the ratio braid/floor is what braid can
// still win, and the floor's own 4-vs-2 ratio is what the machine allows.
//
//   handoff_floor [--ranks 2,4] [--ops N] [--rounds R]
// Rounds alternate the process counts, so a slow spell of the machine touches each alike; each
// row is the median round.
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/futex.h"

namespace {

constexpr uint64_t kDeadlineNs = 20ull * 1000 * 1000 * 1000;  // a lost process ends the run

struct alignas(64) Slot {
  std::atomic<uint64_t> round{0};
};

struct Shared {
  std::atomic<uint64_t> nsPerRun{0};  // rank 0's timed span
  std::atomic<uint64_t> yields{0};    // summed over ranks
  Slot slots[64];
};

// One process's part: `ops` barriers after `ops / 10` untimed ones. Returns 0, or 1 when the
// deadline passed (a peer died).
int runRank(Shared* sh, int me, int p, uint64_t ops, bool yield) {
  const uint64_t warm = ops / 10;
  const uint64_t start = braid::nowNs();
  uint64_t t0 = 0, yields = 0;
  for (uint64_t g = 1; g <= warm + ops; ++g) {
    if (g == warm + 1) t0 = braid::nowNs();
    sh->slots[me].round.store(g, std::memory_order_release);
    for (int i = 0; i < p; ++i) {
      uint32_t spins = 0;
      while (sh->slots[i].round.load(std::memory_order_acquire) < g) {
        if (yield) {
          sched_yield();
          ++yields;
        } else {
#if defined(__x86_64__)
          __builtin_ia32_pause();
#endif
        }
        if ((++spins & 1023) == 0 && braid::nowNs() - start > kDeadlineNs) return 1;
      }
    }
  }
  if (me == 0) sh->nsPerRun.store(braid::nowNs() - t0);
  sh->yields.fetch_add(yields);
  return 0;
}

struct Result {
  double usPerOp = 0;
  double yieldsPerOp = 0;  // per process
};

bool runOnce(int p, uint64_t ops, Result* out) {
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return false;
  Shared* sh = new (mem) Shared();
  const bool yield = p > braid::usableCores();
  std::vector<pid_t> pids;
  for (int r = 0; r < p; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(runRank(sh, r, p, ops, yield));
    if (pid < 0) break;
    pids.push_back(pid);
  }
  bool ok = static_cast<int>(pids.size()) == p;
  if (!ok) {
    for (pid_t pid : pids) kill(pid, SIGKILL);
  }
  for (pid_t pid : pids) {
    int status = 0;
    // The children bound their own waits (kDeadlineNs), so this returns.
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      ok = false;
  }
  if (ok) {
    out->usPerOp = static_cast<double>(sh->nsPerRun.load()) / 1000.0 / static_cast<double>(ops);
    out->yieldsPerOp = static_cast<double>(sh->yields.load()) / static_cast<double>(ops) / p;
  }
  munmap(mem, sizeof(Shared));
  return ok;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void usage(const char* argv0) {
  std::printf(
      "usage: %s [--ranks 2,4] [--ops N] [--rounds R]\n"
      "  The least time P processes need to pass one barrier on this machine (a stored round\n"
      "  number per process, every process waiting for all): the floor under braid's small\n"
      "  all-reduce. With more processes than cores the waits yield, as braid's do.\n"
      "  --ranks LIST  process counts, comma-separated, 1-64 (default 2,4)\n"
      "  --ops N       timed barriers per run (default 200000; a tenth more untimed first)\n"
      "  --rounds R    runs per count, alternating counts; each row is the median (default 3)\n",
      argv0);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts = {2, 4};
  uint64_t ops = 200000;
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if ((a == "--ranks" || a == "--ops" || a == "--rounds") && v == nullptr) {
      std::fprintf(stderr, "handoff_floor: %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--ranks") {
      counts.clear();
      for (const char* s = v; *s != '\0';) {
        char* end = nullptr;
        long n = std::strtol(s, &end, 10);
        if (end == s || n < 1 || n > 64 || (*end != ',' && *end != '\0')) {
          std::fprintf(stderr,
                       "handoff_floor: --ranks wants counts 1-64 separated by commas, got '%s'\n",
                       v);
          return 2;
        }
        counts.push_back(static_cast<int>(n));
        s = *end == ',' ? end + 1 : end;
      }
      ++i;
    } else if (a == "--ops" || a == "--rounds") {
      char* end = nullptr;
      long long n = std::strtoll(v, &end, 10);
      if (*end != '\0' || n < 1) {
        std::fprintf(stderr, "handoff_floor: %s wants a positive integer, got '%s'\n", a.c_str(),
                     v);
        return 2;
      }
      if (a == "--ops")
        ops = static_cast<uint64_t>(n);
      else
        rounds = static_cast<int>(std::min(n, 1000LL));
      ++i;
    } else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      return 0;
    } else {
      std::fprintf(stderr, "handoff_floor: unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }

  std::printf("# handoff_floor: %d usable cores, %llu barriers per run, %d rounds (median shown)\n",
              braid::usableCores(), static_cast<unsigned long long>(ops), rounds);
  std::vector<std::vector<Result>> results(counts.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t c = 0; c < counts.size(); ++c) {
      Result res;
      if (!runOnce(counts[c], ops, &res)) {
        std::fprintf(stderr, "handoff_floor: the run with %d processes failed\n", counts[c]);
        return 1;
      }
      results[c].push_back(res);
    }
  }
  std::printf("%9s %8s %12s %10s\n", "processes", "waits", "time(us)/op", "yields/op");
  for (size_t c = 0; c < counts.size(); ++c) {
    std::vector<double> t, y;
    for (const Result& res : results[c]) {
      t.push_back(res.usPerOp);
      y.push_back(res.yieldsPerOp);
    }
    std::printf("%9d %8s %12.3f %10.2f\n", counts[c],
                counts[c] > braid::usableCores() ? "yield" : "spin", median(t), median(y));
  }
  return 0;
}
