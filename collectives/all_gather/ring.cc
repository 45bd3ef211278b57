// Ring all-gather: each block travels p−1 hops around the ring, received in place.
//
// Schedule: steps s = 0..p−2: send block (r−s) mod p to r+1, receive block (r−s−1) mod p from
// r−1 straight into recvbuf.
// Cost: (p−1)·α + (p−1)/p·S·β, S = p·sendcount·elemsize (cost() below, per step on the real
// placement).
#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {

Status allGatherRing(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t sendcount) {
  const int p = a.size;
  const int r = a.rank;
  const size_t blockBytes = sendcount * a.elemSize;
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  copyIfDistinct(out + static_cast<size_t>(r) * blockBytes, sendbuf, blockBytes);
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  const int right = a.peer((r + 1) % p);  // CollArgs::group: the ring may run over a subset
  const int left = a.peer((r - 1 + p) % p);
  for (int s = 0; s < p - 1; ++s) {
    const size_t sendBlock = static_cast<size_t>((r - s + p) % p);
    const size_t recvBlock = static_cast<size_t>((r - s - 1 + 2 * p) % p);
    net.postRecv(left, out + recvBlock * blockBytes, blockBytes);
    net.postSend(right, out + sendBlock * blockBytes, blockBytes);
    BRAID_RETURN_IF_ERROR(net.waitAll());
  }
  return Status::ok();
}

namespace all_gather_ring {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t sendcount, int /*root*/) {
  return allGatherRing(a, sendbuf, recvbuf, sendcount);
}

// Every rank sends to r+1: p−1 steps of S/p.
void plan(const CostModel& m, CostPlan* plan) {
  const int p = m.placement().size();
  CostModel::Messages ring;
  for (int r = 0; r < p; ++r) ring.push_back({r, (r + 1) % p});
  const double dp = p;
  plan->phases = {m.makePhase(ring, 1 / dp, p - 1, 0)};
}

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t /*chunkBytes*/) {
  return m.sumUs(plan.phases, static_cast<double>(bytes));
}

}  // namespace all_gather_ring
}  // namespace braid::detail
