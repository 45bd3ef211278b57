// Broadcast and reduce over a binomial tree rooted at `root`, pipelined in chunks.
//
// Ranks are renumbered v = (rank − root) mod p. Broadcast: rank v receives from v − lowbit(v)
// (its parent) and sends to v + 2^k for every 2^k < lowbit(v) (its children, largest subtree
// first); chunk k is forwarded as soon as it arrives. Reduce runs the same tree leaves-first.
// Cost: ⌈log2 p⌉·(α + S·β) unpipelined; ≈ (⌈log2 p⌉ + c − 1)·(α + S/c·β) over c chunks
// (+ γ per reduced byte for reduce).
#include "collectives/algorithms.h"

namespace braid::detail {
namespace {

struct Tree {
  int parent = -1;  // real rank, -1 at the root
  int children[32];
  int nchildren = 0;
};

// Children ordered from the largest subtree to the smallest.
Tree binomialTree(int rank, int size, int root) {
  Tree t;
  const int v = (rank - root + size) % size;
  int mask = 1;
  while (mask < size) {
    if (v & mask) {
      t.parent = ((v - mask) + root) % size;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < size) t.children[t.nchildren++] = (v + mask + root) % size;
  }
  return t;
}

}  // namespace

Status broadcastTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count,
                     int root) {
  const size_t es = a.elemSize;
  const size_t bytes = count * es;
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  if (a.rank == root) copyIfDistinct(recvbuf, sendbuf, bytes);
  if (a.size == 1) return Status::ok();
  const Tree t = binomialTree(a.rank, a.size, root);
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

Status reduceTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root) {
  const size_t es = a.elemSize;
  const size_t bytes = count * es;
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  const Tree t = binomialTree(a.rank, a.size, root);
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
      recvs[c] = net.postRecv(t.children[i], tmp + off, std::min(chunk, bytes - std::min(off, bytes)));
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

}  // namespace braid::detail
