// Tree all-reduce: binomial-tree reduce to rank 0, then binomial-tree broadcast, both pipelined
// in chunks of BRAID_CHUNK_BYTES (a child forwards chunk k while chunk k+1 is in flight).
//
// Schedule: reduce: in round k (mask 2^k), a rank whose bit k is set sends its partial result to
//   rank − 2^k and leaves; the others receive from rank + 2^k (if it exists) and reduce.
//   broadcast: the same tree traversed from the root outwards.
// Cost: 2·⌈log2 p⌉·α + 2·⌈log2 p⌉·S·β + ⌈log2 p⌉·S·γ without pipelining; pipelined over c chunks
//   ≈ 2(⌈log2 p⌉ + c − 1)·(α + S/c·β). Latency-optimal for small S.
#include "collectives/algorithms.h"

namespace braid::detail {

Status allReduceTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count) {
  // reduceTree finishes kAvg on the root, so the broadcast carries the average.
  BRAID_RETURN_IF_ERROR(reduceTree(a, sendbuf, recvbuf, count, 0));
  // The broadcast is a continuation of the same operation: same sequence and fingerprint.
  return broadcastTree(a, recvbuf, recvbuf, count, 0);
}

}  // namespace braid::detail
