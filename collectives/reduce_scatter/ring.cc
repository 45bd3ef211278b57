// Ring reduce-scatter: rank r ends with block r of the reduction.
//
// Schedule: steps s = 0..p−2: send partial block (r−s−1) mod p to r+1 (step 0 sends the input
// block itself), receive block (r−s−2) mod p from r−1 and reduce it with the local input block;
// the last step reduces straight into recvbuf. Two scratch blocks alternate so that the block
// being sent is never the one being received into.
// Cost: (p−1)·α + (p−1)/p·S·β + (p−1)/p·S·γ, S = p·recvcount·elemsize (cost() below, per step on
// the real placement).
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {

Status reduceScatterRing(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t recvcount) {
  const int p = a.size;
  const int r = a.rank;
  const size_t es = a.elemSize;
  const size_t blockBytes = recvcount * es;
  const uint8_t* in = static_cast<const uint8_t*>(sendbuf);
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  if (p == 1) {
    copyIfDistinct(recvbuf, sendbuf, blockBytes);
    if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, recvbuf, recvcount, p);
    return Status::ok();
  }
  const int right = a.peer((r + 1) % p);  // CollArgs::group: the ring may run over a subset
  const int left = a.peer((r - 1 + p) % p);
  auto mod = [p](int b) { return ((b % p) + p) % p; };
  uint8_t* scratch = a.scratch->get(2 * blockBytes + 64);
  uint8_t* bufs[2] = {scratch, scratch + blockBytes};
  const uint8_t* sending = in + static_cast<size_t>(mod(r - 1)) * blockBytes;
  for (int s = 0; s < p - 1; ++s) {
    const int recvBlock = mod(r - s - 2);
    uint8_t* landing = bufs[s & 1];
    net.postRecv(left, landing, blockBytes);
    net.postSend(right, sending, blockBytes);
    BRAID_RETURN_IF_ERROR(net.waitAll());
    const uint8_t* mine = in + static_cast<size_t>(recvBlock) * blockBytes;
    uint8_t* out = (s == p - 2) ? static_cast<uint8_t*>(recvbuf) : landing;
    if (recvcount > 0) a.reduce(out, landing, mine, recvcount);
    sending = out;
  }
  if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, recvbuf, recvcount, p);
  return Status::ok();
}

namespace reduce_scatter_ring {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t recvcount, int /*root*/) {
  return reduceScatterRing(a, sendbuf, recvbuf, recvcount);
}

// Every rank sends to r+1: p−1 steps of S/p, each reducing S/p.
void plan(const CostModel& m, CostPlan* plan) {
  const int p = m.placement().size();
  CostModel::Messages ring;
  for (int r = 0; r < p; ++r) ring.push_back({r, (r + 1) % p});
  const double dp = p;
  plan->phases = {m.makePhase(ring, 1 / dp, p - 1, 1 / dp)};
}

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t /*chunkBytes*/) {
  return m.sumUs(plan.phases, static_cast<double>(bytes));
}

}  // namespace reduce_scatter_ring
}  // namespace braid::detail
