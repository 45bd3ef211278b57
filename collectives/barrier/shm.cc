// Same-host barrier in the shared segment: every rank arrives, then waits for all.
//
// Schedule: one generation of the segment: arrive (with the sequence number and fingerprint, so
// a mismatch is caught), wait until every local rank has arrived. No message passing.
// Cost: α_sync, one hand-off through the segment.
#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {
namespace barrier_shm {

Status run(const CollArgs& a, const void* /*sendbuf*/, void* /*recvbuf*/, size_t /*count*/,
           int /*root*/) {
  ShmSegment* seg = a.shm;
  if (seg == nullptr) return internalError("the shm barrier needs every rank on one host");
  const uint64_t g = seg->nextGeneration();
  seg->arrive(g, a.seq, a.fp);
  return seg->waitArrived(g, true);
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t /*bytes*/, size_t /*chunkBytes*/) {
  return m.model().syncUs;
}

}  // namespace barrier_shm
}  // namespace braid::detail
