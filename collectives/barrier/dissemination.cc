// Dissemination barrier.
//
// Schedule: rounds k = 0..⌈log2 p⌉−1: an empty message to r+2^k, one from r−2^k.
// Cost: ⌈log2 p⌉·α (each round an exchange, priced on the real placement).
#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {

Status barrierDissemination(const CollArgs& a) {
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  for (int dist = 1; dist < a.size; dist *= 2) {
    net.postRecv((a.rank - dist + a.size) % a.size, nullptr, 0);
    net.postSend((a.rank + dist) % a.size, nullptr, 0);
    BRAID_RETURN_IF_ERROR(net.waitAll());
  }
  return Status::ok();
}

namespace barrier_dissemination {

Status run(const CollArgs& a, const void* /*sendbuf*/, void* /*recvbuf*/, size_t /*count*/,
           int /*root*/) {
  return barrierDissemination(a);
}

void plan(const CostModel& m, CostPlan* plan) {
  const int p = m.placement().size();
  for (int dist = 1; dist < p; dist *= 2) {
    CostModel::Messages msgs;
    for (int r = 0; r < p; ++r) msgs.push_back({r, (r + dist) % p});
    plan->phases.push_back(m.makePhase(msgs, 0, 1, 0));
  }
}

double cost(const CostModel& m, const CostPlan& plan, size_t /*bytes*/, size_t /*chunkBytes*/) {
  return m.sumUs(plan.phases, 0);
}

}  // namespace barrier_dissemination
}  // namespace braid::detail
