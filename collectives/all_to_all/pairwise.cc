// Pairwise all-to-all.
//
// Schedule: steps s = 1..p−1: send block (r+s) mod p to rank r+s, receive block (r−s) mod p from
// rank r−s. In-place input is copied to scratch first.
// Cost: (p−1)·(α + S/p·β), S = p·count·elemsize per rank (priced per step on the real placement;
// worlds over 64 ranks by one representative step).
#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {
namespace all_to_all_pairwise {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int /*root*/) {
  const int p = a.size;
  const int r = a.rank;
  const size_t blockBytes = count * a.elemSize;
  const size_t totalBytes = blockBytes * static_cast<size_t>(p);
  const uint8_t* in = static_cast<const uint8_t*>(sendbuf);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  if (in == out) {
    uint8_t* copy = a.scratch->get(totalBytes + 64);
    copyIfDistinct(copy, in, totalBytes);
    in = copy;
  }
  copyIfDistinct(out + static_cast<size_t>(r) * blockBytes,
                 in + static_cast<size_t>(r) * blockBytes, blockBytes);
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  for (int s = 1; s < p; ++s) {
    const int to = (r + s) % p;
    const int from = (r - s + p) % p;
    net.postRecv(from, out + static_cast<size_t>(from) * blockBytes, blockBytes);
    net.postSend(to, in + static_cast<size_t>(to) * blockBytes, blockBytes);
    BRAID_RETURN_IF_ERROR(net.waitAll());
  }
  return Status::ok();
}

// Step s sends block (r+s) mod p to rank r+s.
void plan(const CostModel& m, CostPlan* plan) {
  const int p = m.placement().size();
  const double dp = p;
  if (p <= 64) {
    for (int s = 1; s < p; ++s) {
      CostModel::Messages msgs;
      for (int r = 0; r < p; ++r) msgs.push_back({r, (r + s) % p});
      plan->phases.push_back(m.makePhase(msgs, 1 / dp, 1, 0));
    }
  } else {
    CostModel::Messages msgs;
    for (int r = 0; r < p; ++r) msgs.push_back({r, (r + p / 2) % p});
    plan->phases.push_back(m.makePhase(msgs, 1 / dp, p - 1, 0));
  }
}

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t /*chunkBytes*/) {
  return m.sumUs(plan.phases, static_cast<double>(bytes));
}

}  // namespace all_to_all_pairwise
}  // namespace braid::detail
