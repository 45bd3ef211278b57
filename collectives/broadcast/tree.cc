// Broadcast over a binomial tree rooted at `root` (collectives/binomial_tree.h), pipelined in
// chunks of BRAID_CHUNK_BYTES.
//
// Schedule: rank v (renumbered from the root) receives every chunk from its parent v − lowbit(v)
// and forwards chunk k to its children (largest subtree first) as soon as it arrives.
// Cost: ⌈log2 p⌉·(α + S·β) unpipelined; ≈ (⌈log2 p⌉ + c − 1)·(α + S/c·β) over c chunks
// (CostModel::pipelinedTreeUs over the tree's levels on the real placement).
#include "collectives/algorithms.h"
#include "collectives/binomial_tree.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {

Status broadcastTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count,
                     int root) {
  const size_t es = a.elemSize;
  const size_t bytes = count * es;
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  if (a.rank == root) copyIfDistinct(recvbuf, sendbuf, bytes);
  if (a.size == 1) return Status::ok();
  const BinomialTree t = binomialTree(a.rank, a.size, root);
  uint8_t* buf = static_cast<uint8_t*>(recvbuf);
  const size_t chunk = std::max<size_t>(es, a.chunkBytes / es * es);
  const size_t nchunks = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
  if (t.parent < 0) {
    for (size_t c = 0; c < nchunks; ++c) {
      size_t off = c * chunk;
      size_t n = std::min(chunk, bytes - std::min(off, bytes));
      for (int i = 0; i < t.nchildren; ++i) net.postSend(t.children[i], buf + off, n);
    }
    return net.waitAll();
  }
  // Post every chunk's receive first; forward each as it lands.
  std::vector<P2p::Handle> recvs(nchunks);
  for (size_t c = 0; c < nchunks; ++c) {
    size_t off = c * chunk;
    recvs[c] = net.postRecv(t.parent, buf + off, std::min(chunk, bytes - std::min(off, bytes)));
  }
  for (size_t c = 0; c < nchunks; ++c) {
    BRAID_RETURN_IF_ERROR(net.wait(recvs[c]));
    size_t off = c * chunk;
    size_t n = std::min(chunk, bytes - std::min(off, bytes));
    for (int i = 0; i < t.nchildren; ++i) net.postSend(t.children[i], buf + off, n);
  }
  return net.waitAll();
}

namespace broadcast_tree {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root) {
  return broadcastTree(a, sendbuf, recvbuf, count, root);
}

void plan(const CostModel& m, CostPlan* plan) { plan->steps = binomialLevels(m); }

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t chunkBytes) {
  return m.pipelinedTreeUs(plan.steps, false, bytes, chunkBytes);
}

}  // namespace broadcast_tree
}  // namespace braid::detail
