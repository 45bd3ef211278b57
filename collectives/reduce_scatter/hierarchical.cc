// Hierarchical reduce-scatter, for H hosts that hold L ranks each (p = H·L).
//
// Rank (h, j) is the rank with local index j on host h; its block (b bytes) sits at its global
// rank's place in the vector. The "pack" of local index j is the H blocks of ranks (0, j) ..
// (H−1, j), in host order. A flat ring crosses every host's link with (p−1)·b bytes per
// direction; this sends only the (H−1)·L·b = (p−L)·b the other hosts need, so on 2 hosts × 2
// ranks the link carries 2/3 of the ring's bytes.
//
// Schedule:
//   1. the input's blocks are laid out pack by pack ([j][h]) in a staging area;
//   2. intra: ring reduce-scatter of the packs among the L ranks of the host: rank (h, j) gets
//      pack j summed over its host;
//   3. inter: ring reduce-scatter of that pack among the ranks (·, j) of every host: each gets
//      its own block, summed over every host. kAvg sums and divides once, by p.
// Cost (S = p·b; packRingsUs in host_plan.cc): S·B_copy⁻¹ (the layout) + (L−1)·(α_host +
//   S/L·β_host + S/L·γ) + (H−1)·(α_net + S/p·β_net·L + S/p·γ): the L groups share each host's
//   link, (p−L)/p·S per direction.
// Unequal hosts (3 + 1) run the flat ring, as does a single host.
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/host_plan.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {
namespace reduce_scatter_hierarchical {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t recvcount, int /*root*/) {
  Packs l;
  if (!makePacks(a, &l)) return reduceScatterRing(a, sendbuf, recvbuf, recvcount);
  const size_t b = recvcount * a.elemSize;
  const size_t packBytes = b * static_cast<size_t>(l.hosts);
  const size_t all = packBytes * static_cast<size_t>(l.local);
  uint8_t* stage = a.outerScratch->get(all + packBytes + 64);
  uint8_t* pack = stage + all;  // this rank's pack, summed over its host
  const std::vector<int> g = packOrder(a, l.hosts, l.local);
  const uint8_t* in = static_cast<const uint8_t*>(sendbuf);
  for (size_t i = 0; i < g.size(); ++i) {
    copyBytes(stage + i * b, in + static_cast<size_t>(g[i]) * b, b);
  }
  CollArgs sum = a;
  if (a.op == ReduceOp::kAvg) sum.op = ReduceOp::kSum;
  BRAID_RETURN_IF_ERROR(reduceScatterRing(overGroup(sum, l.plan.localRanks, l.plan.local), stage,
                                          pack, recvcount * static_cast<size_t>(l.hosts)));
  BRAID_RETURN_IF_ERROR(
      reduceScatterRing(overGroup(sum, l.plan.group, l.plan.host), pack, recvbuf, recvcount));
  if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, recvbuf, recvcount, a.size);
  return Status::ok();
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t /*chunkBytes*/) {
  return packRingsUs(m, bytes, true);
}

}  // namespace reduce_scatter_hierarchical
}  // namespace braid::detail
