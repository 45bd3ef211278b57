// Ring all-reduce: reduce-scatter then all-gather around the ring r → r+1.
//
// Schedule (p ranks, S bytes, p blocks of S/p):
//   reduce-scatter, steps s = 0..p−2: send block (r−s) mod p to r+1, receive block (r−s−1) mod p
//     from r−1 and reduce it into the local copy. After p−1 steps rank r owns the fully reduced
//     block (r+1) mod p.
//   all-gather, steps s = 0..p−2: send block (r+1−s) mod p, receive block (r−s) mod p in place.
//   Each step's block is cut into chunks of BRAID_CHUNK_BYTES; all chunk receives are posted at
//   once and each chunk is reduced as soon as it lands, overlapping reduction with transfer.
// Cost: 2(p−1)·α + 2·(p−1)/p·S·β + (p−1)/p·S·γ, plus S/B_copy out of place (the input is
// first copied to the output; the selector's model leaves this copy out). Bandwidth-optimal;
// latency grows with p. cost() below prices the two phases on the real placement (which ring
// edges cross hosts, how many share a host's link).
// Runs over CollArgs::group when set (r and p are then positions in the group).
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {

Status allReduceRing(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count) {
  uint8_t* buf = beginAllReduce(a, sendbuf, recvbuf, count);
  if (a.size == 1) return Status::ok();
  const int p = a.size, r = a.rank;
  const size_t es = a.elemSize;
  P2p& net = *a.p2p;
  const int right = a.peer((r + 1) % p);
  const int left = a.peer((r - 1 + p) % p);
  const size_t chunkElems = std::max<size_t>(1, a.chunkBytes / es);
  uint8_t* tmp = a.scratch->get((count / static_cast<size_t>(p) + 1) * es);
  auto block = [&](int b, size_t* lo, size_t* n) {
    b = ((b % p) + p) % p;
    *lo = blockStart(count, p, b);
    *n = blockStart(count, p, b + 1) - *lo;
  };

  std::vector<P2p::Handle> recvs;
  recvs.reserve(64);
  for (int s = 0; s < p - 1; ++s) {
    size_t sendLo, sendN, recvLo, recvN;
    block(r - s, &sendLo, &sendN);
    block(r - s - 1, &recvLo, &recvN);
    recvs.clear();
    // Zero-length blocks still exchange one empty message so that every step synchronizes and
    // carries the fingerprint.
    for (size_t off = 0; off < recvN || off == 0; off += chunkElems) {
      size_t n = std::min(chunkElems, recvN - std::min(off, recvN));
      recvs.push_back(net.postRecv(left, tmp + off * es, n * es));
      if (recvN == 0) break;
    }
    for (size_t off = 0; off < sendN || off == 0; off += chunkElems) {
      size_t n = std::min(chunkElems, sendN - std::min(off, sendN));
      net.postSend(right, buf + (sendLo + off) * es, n * es);
      if (sendN == 0) break;
    }
    for (size_t i = 0; i < recvs.size(); ++i) {
      BRAID_RETURN_IF_ERROR(net.wait(recvs[i]));
      size_t off = i * chunkElems;
      size_t n = std::min(chunkElems, recvN - std::min(off, recvN));
      if (n > 0) a.reduce(buf + (recvLo + off) * es, buf + (recvLo + off) * es, tmp + off * es, n);
    }
    BRAID_RETURN_IF_ERROR(net.waitAll());
  }
  if (a.op == ReduceOp::kAvg) {
    size_t lo, n;
    block(r + 1, &lo, &n);
    scaleForAvg(a.type, buf + lo * es, n, p);
  }
  for (int s = 0; s < p - 1; ++s) {
    size_t sendLo, sendN, recvLo, recvN;
    block(r + 1 - s, &sendLo, &sendN);
    block(r - s, &recvLo, &recvN);
    net.postRecv(left, buf + recvLo * es, recvN * es);
    net.postSend(right, buf + sendLo * es, sendN * es);
    BRAID_RETURN_IF_ERROR(net.waitAll());
  }
  return Status::ok();
}

namespace allreduce_ring {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int /*root*/) {
  return allReduceRing(a, sendbuf, recvbuf, count);
}

// Every rank sends to r+1: p−1 reduce-scatter steps (reducing S/p) and p−1 all-gather steps,
// S/p bytes each.
void plan(const CostModel& m, CostPlan* plan) {
  const int p = m.placement().size();
  CostModel::Messages ring;
  for (int r = 0; r < p; ++r) ring.push_back({r, (r + 1) % p});
  const double dp = p;
  plan->phases = {m.makePhase(ring, 1 / dp, p - 1, 1 / dp), m.makePhase(ring, 1 / dp, p - 1, 0)};
}

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t /*chunkBytes*/) {
  return m.sumUs(plan.phases, static_cast<double>(bytes));
}

}  // namespace allreduce_ring
}  // namespace braid::detail
