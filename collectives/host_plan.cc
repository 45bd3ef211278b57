#include "collectives/host_plan.h"

#include <algorithm>

#include "collectives/selector/cost_model.h"

namespace braid::detail {

HostPlan makeHostPlan(const CollArgs& a, bool leader) {
  HostPlan plan;
  if (a.hostOf == nullptr || static_cast<int>(a.hostOf->size()) != a.size) {
    // No layout: one host.
    for (int r = 0; r < a.size; ++r) plan.localRanks.push_back(r);
    plan.local = a.rank;
    plan.shards = leader ? 1 : a.size;
    plan.group.push_back(a.rank);
    return plan;
  }
  const std::vector<int>& hostOf = *a.hostOf;
  for (int h : hostOf) plan.numHosts = std::max(plan.numHosts, h + 1);
  std::vector<int> perHost(static_cast<size_t>(plan.numHosts), 0);
  plan.host = hostOf[a.rank];
  for (int r = 0; r < a.size; ++r) {
    if (hostOf[r] == plan.host) {
      if (r == a.rank) plan.local = static_cast<int>(plan.localRanks.size());
      plan.localRanks.push_back(r);
    }
    ++perHost[hostOf[r]];
  }
  const int fewest = *std::min_element(perHost.begin(), perHost.end());
  plan.uniform = fewest == *std::max_element(perHost.begin(), perHost.end());
  plan.shards = std::min(leader ? 1 : fewest, kMaxLocalRanks);
  if (plan.local < plan.shards) {
    std::vector<int> seen(static_cast<size_t>(plan.numHosts), 0);
    plan.group.assign(static_cast<size_t>(plan.numHosts), -1);
    for (int r = 0; r < a.size; ++r) {
      if (seen[hostOf[r]]++ == plan.local) plan.group[hostOf[r]] = r;
    }
  }
  return plan;
}

bool makePacks(const CollArgs& a, Packs* out) {
  out->plan = makeHostPlan(a, false);
  const HostPlan& plan = out->plan;
  if (plan.numHosts <= 1 || !plan.uniform || a.outerScratch == nullptr) return false;
  out->hosts = plan.numHosts;
  out->local = static_cast<int>(plan.localRanks.size());
  return static_cast<int>(plan.group.size()) == out->hosts;
}

std::vector<int> packOrder(const CollArgs& a, int hosts, int local) {
  std::vector<int> g(static_cast<size_t>(hosts) * static_cast<size_t>(local), -1);
  std::vector<int> seen(static_cast<size_t>(hosts), 0);
  for (int r = 0; r < a.size; ++r) {
    const int h = (*a.hostOf)[r];
    g[static_cast<size_t>(seen[h]++) * static_cast<size_t>(hosts) + static_cast<size_t>(h)] = r;
  }
  return g;  // [j][h]
}

CollArgs overGroup(const CollArgs& a, const std::vector<int>& group, int index) {
  CollArgs sub = a;
  sub.group = group.data();
  sub.size = static_cast<int>(group.size());
  sub.rank = index;
  sub.hostOf = nullptr;
  return sub;
}

double packRingsUs(const CostModel& m, size_t bytes, bool reduce) {
  const FabricModel& f = m.model();
  const double S = static_cast<double>(bytes), L = m.maxLocal(), H = m.hosts();
  const double pack = S / L, block = S / (L * H);
  const double miss = m.outOfCache(S);
  const double cpu = m.cpuShare(m.maxLocal());
  const double gamma = reduce ? f.gammaUsPerByte * m.memoryFactor(S) * cpu : 0;
  double t = S * f.copyUsPerByte * m.memoryFactor(S);
  if (L > 1) {
    t += (L - 1) * (m.stepAlpha(f.intra.alphaUs, cpu) +
                    pack * f.intra.beta(true, pack, miss) * cpu + pack * gamma);
  }
  t += (H - 1) * (m.stepAlpha(f.inter.alphaUs, cpu) + block * f.inter.beta(true, block, miss) * L +
                  block * gamma);
  return t;
}

}  // namespace braid::detail
