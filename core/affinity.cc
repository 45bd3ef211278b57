#include "core/affinity.h"

#include <pthread.h>
#include <sched.h>

#include <mutex>
#include <vector>

#include "core/log.h"
#include "core/params.h"
#include "core/text.h"

namespace braid {
namespace {

// The share chosen for this process's own threads (chooseOwnThreadCpus).
std::mutex gMu;
bool gChosen = false;
cpu_set_t gShare;  // empty: braid's threads stay unbound

}  // namespace

void chooseOwnThreadCpus(int machineIndex, int machineRanks) {
  std::lock_guard<std::mutex> lock(gMu);
  if (gChosen) return;
  gChosen = true;
  CPU_ZERO(&gShare);
  if (paramString("BRAID_BIND_THREADS") == "off" || machineRanks <= 1 || machineIndex < 0 ||
      machineIndex >= machineRanks) {
    return;
  }
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  }
  const size_t n = cpus.size(), l = static_cast<size_t>(machineRanks);
  if (n < l) return;
  // Group i holds cpus[i*n/l, (i+1)*n/l): contiguous, sizes n/l or n/l + 1.
  const size_t i = static_cast<size_t>(machineIndex);
  const std::vector<int> group(cpus.begin() + static_cast<long>(i * n / l),
                               cpus.begin() + static_cast<long>((i + 1) * n / l));
  for (int c : group) CPU_SET(c, &gShare);
  BRAID_INFO(
      "rank %d of %d on this machine: braid's own threads run on CPUs %s of %s "
      "(BRAID_BIND_THREADS=off leaves them unbound)",
      machineIndex, machineRanks, formatCpuList(group).c_str(), formatCpuList(cpus).c_str());
}

void placeOwnThread(const char* name) {
  pthread_setname_np(pthread_self(), name);
  cpu_set_t share;
  {
    std::lock_guard<std::mutex> lock(gMu);
    if (CPU_COUNT(&gShare) == 0) return;
    share = gShare;
  }
  const int err = pthread_setaffinity_np(pthread_self(), sizeof(share), &share);
  if (err != 0) {
    BRAID_WARN("%s thread: cannot restrict it to its CPUs (error %d); left unbound", name, err);
  }
}

}  // namespace braid
