// Pairwise all-to-all and the dissemination barrier.
//
// All-to-all: steps s = 1..p−1: send block (r+s) mod p to rank r+s, receive block (r−s) mod p
// from rank r−s. Cost: (p−1)·(α + S/p·β), S = p·count·elemsize per rank. In-place input is
// copied to scratch first.
// Barrier: rounds k = 0..⌈log2 p⌉−1: empty message to r+2^k, from r−2^k. Cost ⌈log2 p⌉·α.
#include "collectives/algorithms.h"

namespace braid::detail {

Status allToAllPairwise(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count) {
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
  copyIfDistinct(out + static_cast<size_t>(r) * blockBytes, in + static_cast<size_t>(r) * blockBytes,
                 blockBytes);
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

}  // namespace braid::detail
