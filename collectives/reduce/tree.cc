// Reduce over a binomial tree rooted at `root` (collectives/binomial_tree.h), in chunks of
// BRAID_CHUNK_BYTES.
//
// Schedule: the broadcast's tree leaves-first: rank v receives every chunk of each child in turn
// (smallest subtree first, which finishes first), reducing each chunk as it lands, then sends its
// partial result to its parent v − lowbit(v). The root finishes kAvg.
// Cost: ⌈log2 p⌉·(α + S·β + S·γ) unpipelined; ≈ (⌈log2 p⌉ + c − 1)·(α + S/c·β + S/c·γ) over c
// chunks (CostModel::pipelinedTreeUs over the tree's levels on the real placement).
#include "collectives/algorithms.h"
#include "collectives/binomial_tree.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {

Status reduceTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root) {
  const size_t es = a.elemSize;
  const size_t bytes = count * es;
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  const BinomialTree t = binomialTree(a.rank, a.size, root);
  // Accumulate in recvbuf where the caller gave one (root, or all ranks for all-reduce), else in
  // scratch. Incoming chunks land in a second scratch area.
  uint8_t* scratch = a.scratch->get(bytes * (recvbuf ? 1 : 2) + 64);
  uint8_t* acc = recvbuf ? static_cast<uint8_t*>(recvbuf) : scratch + bytes;
  uint8_t* tmp = scratch;
  copyIfDistinct(acc, sendbuf, bytes);
  const size_t chunk = std::max<size_t>(es, a.chunkBytes / es * es);
  const size_t nchunks = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
  // Children from the smallest subtree (which finishes first) to the largest.
  for (int i = t.nchildren - 1; i >= 0; --i) {
    std::vector<P2p::Handle> recvs(nchunks);
    for (size_t c = 0; c < nchunks; ++c) {
      size_t off = c * chunk;
      recvs[c] =
          net.postRecv(t.children[i], tmp + off, std::min(chunk, bytes - std::min(off, bytes)));
    }
    for (size_t c = 0; c < nchunks; ++c) {
      BRAID_RETURN_IF_ERROR(net.wait(recvs[c]));
      size_t off = c * chunk;
      size_t n = std::min(chunk, bytes - std::min(off, bytes));
      if (n > 0) a.reduce(acc + off, acc + off, tmp + off, n / es);
    }
    BRAID_RETURN_IF_ERROR(net.waitAll());
  }
  if (t.parent >= 0) {
    for (size_t c = 0; c < nchunks; ++c) {
      size_t off = c * chunk;
      net.postSend(t.parent, acc + off, std::min(chunk, bytes - std::min(off, bytes)));
    }
    return net.waitAll();
  }
  if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, acc, count, a.size);
  return Status::ok();
}

namespace reduce_tree {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root) {
  return reduceTree(a, sendbuf, recvbuf, count, root);
}

void plan(const CostModel& m, CostPlan* plan) { plan->steps = binomialLevels(m); }

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t chunkBytes) {
  return m.pipelinedTreeUs(plan.steps, true, bytes, chunkBytes);
}

}  // namespace reduce_tree
}  // namespace braid::detail
