// Tree all-reduce: binomial-tree reduce to rank 0, then binomial-tree broadcast, both pipelined
// in chunks of BRAID_CHUNK_BYTES (a child forwards chunk k while chunk k+1 is in flight).
//
// Schedule: reduce: in round k (mask 2^k), a rank whose bit k is set sends its partial result to
//   rank − 2^k and leaves; the others receive from rank + 2^k (if it exists) and reduce.
//   broadcast: the same tree traversed from the root outwards (reduce/tree.cc, broadcast/tree.cc,
//   collectives/binomial_tree.h).
// Cost: 2·⌈log2 p⌉·α + 2·⌈log2 p⌉·S·β + ⌈log2 p⌉·S·γ without pipelining; pipelined over c chunks
//   ≈ 2(⌈log2 p⌉ + c − 1)·(α + S/c·β) (CostModel::pipelinedTreeUs over the tree's levels on the
//   real placement, once with γ and once without). Latency-optimal for small S.
#include "collectives/algorithms.h"
#include "collectives/binomial_tree.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {
namespace allreduce_tree {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int /*root*/) {
  // reduceTree finishes kAvg on the root, so the broadcast carries the average.
  BRAID_RETURN_IF_ERROR(reduceTree(a, sendbuf, recvbuf, count, 0));
  // The broadcast is a continuation of the same operation: same sequence and fingerprint.
  return broadcastTree(a, recvbuf, recvbuf, count, 0);
}

void plan(const CostModel& m, CostPlan* plan) { plan->steps = binomialLevels(m); }

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t chunkBytes) {
  return m.pipelinedTreeUs(plan.steps, true, bytes, chunkBytes) +
         m.pipelinedTreeUs(plan.steps, false, bytes, chunkBytes);
}

}  // namespace allreduce_tree
}  // namespace braid::detail
