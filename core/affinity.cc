#include "core/affinity.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <vector>

#include "core/log.h"
#include "core/params.h"

namespace braid {
namespace {

// "0,2-3": CPUs in ascending order, runs collapsed.
std::string cpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string placeOwnThread(const char* name, int localRank, int localSize) {
  pthread_setname_np(pthread_self(), name);
  if (paramString("BRAID_BIND_THREADS") == "off" || localSize <= 1 || localRank < 0 ||
      localRank >= localSize) {
    return "";
  }
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return "";
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  }
  const size_t n = cpus.size(), l = static_cast<size_t>(localSize);
  if (n < l) return "";
  // Group r holds cpus[r*n/l, (r+1)*n/l): contiguous, sizes n/l or n/l + 1.
  const size_t r = static_cast<size_t>(localRank);
  std::vector<int> group(cpus.begin() + static_cast<long>(r * n / l),
                         cpus.begin() + static_cast<long>((r + 1) * n / l));
  cpu_set_t bound;
  CPU_ZERO(&bound);
  for (int c : group) CPU_SET(c, &bound);
  const int err = pthread_setaffinity_np(pthread_self(), sizeof(bound), &bound);
  if (err != 0) {
    BRAID_WARN("%s thread of local rank %d: cannot restrict it to CPUs %s (error %d); left unbound",
               name, localRank, cpuList(group).c_str(), err);
    return "";
  }
  const std::string list = cpuList(group);
  static std::atomic<bool> said{false};  // one line per process
  if (!said.exchange(true)) {
    BRAID_INFO(
        "local rank %d of %d: braid's own threads run on CPUs %s of %s "
        "(BRAID_BIND_THREADS=off leaves them unbound)",
        localRank, localSize, list.c_str(), cpuList(cpus).c_str());
  }
  return list;
}

}  // namespace braid
