// Hierarchical all-gather, for H hosts that hold L ranks each (p = H·L).
//
// Rank (h, j) is the rank with local index j on host h; its block (b bytes) sits at its global
// rank's place in the vector. The "pack" of local index j is the H blocks of ranks (0, j) ..
// (H−1, j), in host order. A flat ring crosses every host's link with (p−1)·b bytes per
// direction; this sends only the (H−1)·L·b = (p−L)·b the other hosts need, so on 2 hosts × 2
// ranks the link carries 2/3 of the ring's bytes.
//
// Schedule:
//   1. inter: ring all-gather among the ranks (·, j) of every host: each gets pack j, written
//      into its own pack's place of a staging area laid out pack by pack ([j][h]);
//   2. intra: ring all-gather of the packs among the L ranks of the host, in place in the
//      staging area;
//   3. every block moves from [j][h] to its global rank's place in the output.
// Cost (S = p·b; packRingsUs in host_plan.cc): (L−1)·(α_host + S/L·β_host) + (H−1)·(α_net +
//   S/p·β_net·L) + S·B_copy⁻¹ (the layout): the L groups share each host's link, (p−L)/p·S per
//   direction.
// Unequal hosts (3 + 1) run the flat ring, as does a single host.
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/host_plan.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {
namespace all_gather_hierarchical {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t sendcount, int /*root*/) {
  Packs l;
  if (!makePacks(a, &l)) return allGatherRing(a, sendbuf, recvbuf, sendcount);
  const size_t b = sendcount * a.elemSize;
  const size_t packBytes = b * static_cast<size_t>(l.hosts);
  uint8_t* stage = a.outerScratch->get(packBytes * static_cast<size_t>(l.local) + 64);
  uint8_t* myPack = stage + packBytes * static_cast<size_t>(l.plan.local);
  BRAID_RETURN_IF_ERROR(
      allGatherRing(overGroup(a, l.plan.group, l.plan.host), sendbuf, myPack, sendcount));
  BRAID_RETURN_IF_ERROR(allGatherRing(overGroup(a, l.plan.localRanks, l.plan.local), myPack, stage,
                                      sendcount * static_cast<size_t>(l.hosts)));
  const std::vector<int> g = packOrder(a, l.hosts, l.local);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  for (size_t i = 0; i < g.size(); ++i) {
    copyBytes(out + static_cast<size_t>(g[i]) * b, stage + i * b, b);
  }
  return Status::ok();
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t /*chunkBytes*/) {
  return packRingsUs(m, bytes, false);
}

}  // namespace all_gather_hierarchical
}  // namespace braid::detail
