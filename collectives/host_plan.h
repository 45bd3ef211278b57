// The host layout that the hierarchical algorithms share: which ranks share a host, which of them
// own a shard, and (for the hierarchical reduce-scatter and all-gather) the "packs" that the
// two-level rings move.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/algorithms.h"

namespace braid::detail {

/// This rank's view of the host layout for one call of a hierarchical algorithm.
struct HostPlan {
  int numHosts = 1;
  int host = 0;                 ///< this rank's host index
  int local = 0;                ///< this rank's index on its host
  int shards = 1;               ///< k: local ranks 0..k−1 of every host own one shard each
  bool uniform = true;          ///< every host holds the same number of ranks
  std::vector<int> localRanks;  ///< global ranks on this host, in order
  std::vector<int> group;       ///< owners only: the rank with this local index on every host
};
/// From CollArgs::hostOf (one host when unset); leader: a single shard (k = 1).
HostPlan makeHostPlan(const CollArgs& a, bool leader);

/// The layout of the hierarchical reduce-scatter and all-gather (H hosts of L ranks each):
/// false where it does not suit (one host, unequal hosts), which then run the flat ring.
struct Packs {
  HostPlan plan;  ///< plan.localRanks: the ranks of this host, by local index
  int hosts = 1, local = 1;
};
bool makePacks(const CollArgs& a, Packs* out);
/// The global rank of (host h, local index j) at [j·H + h]: the packs' order.
std::vector<int> packOrder(const CollArgs& a, int hosts, int local);
/// `a` run over the ranks `group`, this rank being member `index`.
CollArgs overGroup(const CollArgs& a, const std::vector<int>& group, int index);
/// The two rings' price (reduce-scatter/hierarchical.cc, all_gather/hierarchical.cc): a ring
/// over the L ranks of each host with packs of S/L, a ring over the H hosts with blocks of S/p
/// (the L groups share each host's link), one pass over S in memory for the layout; `reduce`:
/// reduce-scatter (γ on both rings).
double packRingsUs(const CostModel& m, size_t bytes, bool reduce);

}  // namespace braid::detail
