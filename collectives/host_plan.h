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
/// A quarter of the segment slot that BRAID_SHM_SEGMENT_BYTES sets (rounded as ShmSegment rounds
/// its halves): the same on every host, with or without a segment.
size_t hierarchicalQuarterBytes();
/// The piece of the pipelined hierarchical schedules (the all-reduce's slice of the vector per
/// step; the reduce-scatter's and all-gather's slice of all p blocks): a quarter slot, or the
/// pipelining chunk (CollArgs::chunkBytes: BRAID_CHUNK_BYTES, or the selector's pick for the link,
/// 64 KiB at least) when smaller. Several pieces overlap one piece's intra-host steps with
/// another's transfer between hosts, which one piece runs in turn: on the emulated 2 hosts x 2
/// ranks at 1 Gbit/s, an all-reduce of 2 MiB took 23.6 ms in one piece and 17.9 ms in four.
size_t hierarchicalPieceBytes(size_t chunk);
/// The same for the cost functions, from the placement's segment size.
size_t hierarchicalPieceBytes(const CostModel& m, size_t chunk);
/// The host's segment where the hierarchical reduce-scatter and all-gather run their pipelined
/// schedule through it (more than one rank per host, a segment: not BRAID_TRANSPORT=tcp); null
/// otherwise (they run the two rings).
ShmSegment* piecesSegment(const CollArgs& a, const Packs& l);
/// Before a pipelined schedule through the host's segment: kInternal where the segment does not
/// match the host layout (L ranks, this one local index `local`), kInvalidUsage where
/// BRAID_SHM_SEGMENT_BYTES changed since the segment was made (the pieces would differ between
/// ranks).
Status checkSegmentPieces(const CollArgs& a, const ShmSegment* seg, int L, int local);
/// The reduce-scatter's and all-gather's pipelined schedule through the host's segment as this
/// rank (host h, local index j) runs it: H hosts of L ranks, p = H·L blocks of `block` elements
/// each, every piece a slice of `slice` elements of all p blocks (hierarchicalPieceBytes: at
/// least 1 element, at most the block).
struct SegmentPieces {
  int H = 1, L = 1, h = 0, j = 0;
  size_t slice = 1, npieces = 1;
  std::vector<int> order;  ///< packOrder: the rank (q, jj) at [jj·H + q]
  int rankOf(int q, int jj) const { return order[static_cast<size_t>(jj * H + q)]; }
};
/// checkSegmentPieces, then this rank's SegmentPieces for blocks of `block` (> 0) elements.
Status planSegmentPieces(const CollArgs& a, const Packs& l, const ShmSegment* seg, size_t block,
                         SegmentPieces* out);
/// `a` run over the ranks `group`, this rank being member `index`.
CollArgs overGroup(const CollArgs& a, const std::vector<int>& group, int index);
/// The hierarchical reduce-scatter's and all-gather's price (`reduce`: the reduce-scatter, γ on
/// both levels). Through the segment (piecesSegment), pipelined in pieces of
/// hierarchicalPieceBytes(chunk): the host's copies and reductions and the link's transfer
/// overlap piece by piece. Otherwise the two rings: a ring over the L ranks of each host with
/// packs of S/L, a ring over the H hosts with blocks of S/p (the L groups share each host's
/// link), one pass over S in memory for the layout.
double packRingsUs(const CostModel& m, size_t bytes, bool reduce, size_t chunk);

}  // namespace braid::detail
