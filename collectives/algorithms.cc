#include "collectives/algorithms.h"

#include <algorithm>
#include <cstring>

namespace braid::detail {

uint8_t* Scratch::get(size_t bytes) {
  if (buf_.size() < bytes) {
    buf_.clear();
    buf_.shrink_to_fit();
    buf_.resize(bytes);
  }
  return buf_.data();
}

void copyIfDistinct(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

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

const char* allReduceAlgoName(AllReduceAlgo algo) {
  switch (algo) {
    case AllReduceAlgo::kAuto: return "auto";
    case AllReduceAlgo::kRing: return "ring";
    case AllReduceAlgo::kTree: return "tree";
    case AllReduceAlgo::kHalvingDoubling: return "halving_doubling";
    case AllReduceAlgo::kShm: return "shm";
    case AllReduceAlgo::kHierarchical: return "hierarchical";
    case AllReduceAlgo::kHierarchicalLeader: return "hierarchical_leader";
  }
  return "?";
}

Result<AllReduceAlgo> parseAllReduceAlgo(const std::string& name) {
  if (name.empty() || name == "auto") return AllReduceAlgo::kAuto;
  if (name == "ring") return AllReduceAlgo::kRing;
  if (name == "tree") return AllReduceAlgo::kTree;
  if (name == "halving_doubling" || name == "hd" || name == "rabenseifner") {
    return AllReduceAlgo::kHalvingDoubling;
  }
  if (name == "shm") return AllReduceAlgo::kShm;
  if (name == "hierarchical" || name == "hier") return AllReduceAlgo::kHierarchical;
  if (name == "hierarchical_leader" || name == "leader") {
    return AllReduceAlgo::kHierarchicalLeader;
  }
  return invalidArgument("unknown all-reduce algorithm '" + name +
                         "'; valid: auto, ring, tree, halving_doubling (hd), shm, hierarchical "
                         "(hier), hierarchical_leader (leader)");
}

}  // namespace braid::detail
