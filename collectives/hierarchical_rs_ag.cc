// Hierarchical reduce-scatter and all-gather, for H hosts that hold L ranks each.
//
// Rank (h, j) is the rank with local index j on host h; its block (b bytes) sits at its global
// rank's place in the vector. The "pack" of local index j is the H blocks of ranks (0, j) ..
// (H−1, j), in host order. A flat ring crosses every host's link with (p−1)·b bytes per
// direction; these send only the (H−1)·L·b = (p−L)·b the other hosts need, so on 2 hosts × 2
// ranks the link carries 2/3 of the ring's bytes.
//
// All-gather:
//   1. inter: ring all-gather among the ranks (·, j) of every host: each gets pack j, written
//      into its own pack's place of a staging area laid out pack by pack ([j][h]);
//   2. intra: ring all-gather of the packs among the L ranks of the host, in place in the
//      staging area;
//   3. every block moves from [j][h] to its global rank's place in the output.
// Reduce-scatter, the mirror image:
//   1. the input's blocks are laid out pack by pack ([j][h]) in the staging area;
//   2. intra: ring reduce-scatter of the packs among the L ranks of the host: rank (h, j) gets
//      pack j summed over its host;
//   3. inter: ring reduce-scatter of that pack among the ranks (·, j): each gets its own block,
//      summed over every host. kAvg sums and divides once, by p.
// Cost (S = p·b): intra (L−1)·α_host + (L−1)/L·S·β_host (+ γ for reduce-scatter); inter
//   (H−1)·α_net + (H−1)/H·S/L·β_net·L (the L groups share the host's link: (p−L)/p·S per
//   direction) (+ γ); plus one pass over S in memory for the layout.
// Unequal hosts (3 + 1) fall back to the flat ring, as does a single host.
#include <cstring>

#include "collectives/algorithms.h"

namespace braid::detail {
namespace {

// The staging area of p blocks, [j][h], and this rank's view of the layout. Null when the
// placement does not suit (one host, unequal hosts).
struct Layout {
  HostPlan plan;  // plan.localRanks: the ranks of this host, by local index
  int hosts = 1, local = 1;
};

bool makeLayout(const CollArgs& a, Layout* out) {
  out->plan = makeHostPlan(a, false);
  const HostPlan& plan = out->plan;
  if (plan.numHosts <= 1 || !plan.uniform || a.outerScratch == nullptr) return false;
  out->hosts = plan.numHosts;
  out->local = static_cast<int>(plan.localRanks.size());
  return static_cast<int>(plan.group.size()) == out->hosts;
}

// The global rank of (host h, local index j): the j-th rank of host h.
std::vector<int> globalRanks(const CollArgs& a, int hosts, int local) {
  std::vector<int> g(static_cast<size_t>(hosts) * static_cast<size_t>(local), -1);
  std::vector<int> seen(static_cast<size_t>(hosts), 0);
  for (int r = 0; r < a.size; ++r) {
    const int h = (*a.hostOf)[r];
    g[static_cast<size_t>(seen[h]++) * static_cast<size_t>(hosts) + static_cast<size_t>(h)] = r;
  }
  return g;  // [j][h]
}

CollArgs over(const CollArgs& a, const std::vector<int>& group, int index) {
  CollArgs sub = a;
  sub.group = group.data();
  sub.size = static_cast<int>(group.size());
  sub.rank = index;
  sub.hostOf = nullptr;
  return sub;
}

}  // namespace

Status allGatherHierarchical(const CollArgs& a, const void* sendbuf, void* recvbuf,
                             size_t sendcount) {
  Layout l;
  if (!makeLayout(a, &l)) return allGatherRing(a, sendbuf, recvbuf, sendcount);
  const size_t b = sendcount * a.elemSize;
  const size_t packBytes = b * static_cast<size_t>(l.hosts);
  uint8_t* stage = a.outerScratch->get(packBytes * static_cast<size_t>(l.local) + 64);
  uint8_t* myPack = stage + packBytes * static_cast<size_t>(l.plan.local);
  BRAID_RETURN_IF_ERROR(
      allGatherRing(over(a, l.plan.group, l.plan.host), sendbuf, myPack, sendcount));
  BRAID_RETURN_IF_ERROR(allGatherRing(over(a, l.plan.localRanks, l.plan.local), myPack, stage,
                                      sendcount * static_cast<size_t>(l.hosts)));
  const std::vector<int> g = globalRanks(a, l.hosts, l.local);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  for (size_t i = 0; i < g.size(); ++i) {
    std::memcpy(out + static_cast<size_t>(g[i]) * b, stage + i * b, b);
  }
  return Status::ok();
}

Status reduceScatterHierarchical(const CollArgs& a, const void* sendbuf, void* recvbuf,
                                 size_t recvcount) {
  Layout l;
  if (!makeLayout(a, &l)) return reduceScatterRing(a, sendbuf, recvbuf, recvcount);
  const size_t b = recvcount * a.elemSize;
  const size_t packBytes = b * static_cast<size_t>(l.hosts);
  const size_t all = packBytes * static_cast<size_t>(l.local);
  uint8_t* stage = a.outerScratch->get(all + packBytes + 64);
  uint8_t* pack = stage + all;  // this rank's pack, summed over its host
  const std::vector<int> g = globalRanks(a, l.hosts, l.local);
  const uint8_t* in = static_cast<const uint8_t*>(sendbuf);
  for (size_t i = 0; i < g.size(); ++i) {
    std::memcpy(stage + i * b, in + static_cast<size_t>(g[i]) * b, b);
  }
  CollArgs sum = a;
  if (a.op == ReduceOp::kAvg) sum.op = ReduceOp::kSum;
  BRAID_RETURN_IF_ERROR(reduceScatterRing(over(sum, l.plan.localRanks, l.plan.local), stage, pack,
                                          recvcount * static_cast<size_t>(l.hosts)));
  BRAID_RETURN_IF_ERROR(
      reduceScatterRing(over(sum, l.plan.group, l.plan.host), pack, recvbuf, recvcount));
  if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, recvbuf, recvcount, a.size);
  return Status::ok();
}

}  // namespace braid::detail
