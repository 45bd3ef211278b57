// Same-host all-gather in the shared segment, with no message passing.
// Blocks of ShmSegment::singleCopyMinBytes() (16 KiB, 64 KiB with more ranks than cores) and
// more take one copy, private buffer to private buffer, where the ranks may read each other's
// memory and the calibrated single copy beats the copies in and out of the segment
// (a.shmPlan.gather: selector/cost_model.h; not on the EPYC VM) (runSingleCopy below); the
// schedule through the segment that follows serves the rest.
//
// Schedule, piece by piece (kSegmentPieceBytes of each block, 256 KiB; the halves of a rank's
// slot alternate between pieces as between calls in allreduce/shm.cc): copy the own block's
// piece in → arrive → copy the p − 1 other blocks' pieces out of their slots (one
// synchronization per piece). Blocks of any size stay in the segment: on the 2-core VM this
// ran faster than the ring over the transport at every size from 4 KiB to 64 MiB (2 ranks: by
// 5% at 256 KiB–1 MiB, 20–40% from 4 MiB up; 4 ranks: 1.7–8×; braid-perf-allgather -a all
// --rounds 3). Buffers in shared windows take runInWindows below instead.
// Cost for S = p·b bytes (b a block) in k pieces: k·α_sync + b/B_copy (in) + (p−1)·b/B_copy
// (out), slower out of cache like every other stream; B_copy was measured with every local rank
// copying at once (calibration.cc), so the shared cores are in it already.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {

namespace {

// Buffers in shared windows on every rank (Communicator::allocShared): every rank copies the
// others' blocks straight from their send buffers (one copy per byte, none through the slots),
// then a last hand-off keeps each send buffer unchanged until every peer has read it.
Status runInWindows(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t bytes) {
  const int p = a.shm->localSize();
  const int me = a.shm->localIndex();
  WindowedCall w;
  BRAID_RETURN_IF_ERROR(
      beginInSharedWindows(a, sendbuf, bytes, recvbuf, bytes * static_cast<size_t>(p), &w));
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  for (int k = 1; k <= p; ++k) {  // the next rank's block first: the ranks spread their reads
    const int i = (me + k) % p;
    copyIfDistinct(out + static_cast<size_t>(i) * bytes, w.send[i], bytes);
  }
  return endInSharedWindows(a);
}

// Single copy (blocks of ShmSegment::singleCopyMinBytes() and more, buffers
// anywhere): every rank reads the others' blocks from their send buffers straight into its
// receive buffer (process_vm_readv), one copy per byte as in shared windows; out of place it
// copies its own block too. A hand-off publishes the buffers, one releases them.
Status runSingleCopy(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t bytes) {
  ShmSegment* seg = a.shm;
  const int p = seg->localSize();
  const int me = seg->localIndex();
  SingleCopyCall c;
  BRAID_RETURN_IF_ERROR(beginSingleCopy(a, sendbuf, recvbuf, &c));
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  for (int k = 1; k <= p; ++k) {  // the next rank's block first: the ranks spread their reads
    const int i = (me + k) % p;
    uint8_t* dst = out + static_cast<size_t>(i) * bytes;
    if (i == me) {
      copyIfDistinct(dst, sendbuf, bytes);
    } else {
      BRAID_RETURN_IF_ERROR(seg->readPeer(i, dst, c.send[i], bytes));
    }
  }
  return endInSharedWindows(a);
}

}  // namespace

namespace all_gather_shm {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t sendcount,
           int /*root*/) {
  ShmSegment* seg = a.shm;
  const size_t bytes = sendcount * a.elemSize;
  if (a.size == 1 || seg == nullptr) {
    if (a.size > 1) return internalError("shm all-gather needs one host");
    return allGatherRing(a, sendbuf, recvbuf, sendcount);
  }
  if (inSharedWindows(a)) return runInWindows(a, sendbuf, recvbuf, bytes);
  if (a.shmPlan.gather && bytes >= seg->singleCopyMinBytes()) {
    return runSingleCopy(a, sendbuf, recvbuf, bytes);
  }
  const int p = seg->localSize();
  const int me = seg->localIndex();
  const size_t piece = seg->pieceBytes(a.elemSize);
  const size_t npieces = bytes == 0 ? 1 : (bytes + piece - 1) / piece;
  const uint8_t* src = static_cast<const uint8_t*>(sendbuf);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  for (size_t j = 0; j < npieces; ++j) {
    // Every piece is one synchronization of every rank, so each half is free again two pieces
    // later (as between calls, allreduce/shm.cc).
    const uint64_t g = seg->nextGeneration();
    const int h = static_cast<int>(g & 1);
    const size_t off = j * piece;
    const size_t n = std::min(piece, bytes - std::min(off, bytes));
    // Out of place, the own block's place in recvbuf in the same pass over the input (in place
    // it already sits there).
    // (A 0-byte call only synchronizes: its buffers may be null.)
    if (n > 0) {
      copyToSharedAndLocal(seg->half(me, h), out + static_cast<size_t>(me) * bytes + off,
                           src + off, n);
    }
    seg->arrive(g, a.seq, a.fp);
    BRAID_RETURN_IF_ERROR(seg->waitArrived(g, true));
    for (int i = 0; i < p && n > 0; ++i) {
      if (i != me) copyBytes(out + static_cast<size_t>(i) * bytes + off, seg->half(i, h), n);
    }
  }
  return Status::ok();
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t /*chunkBytes*/) {
  const int L = m.placement().size();
  const double block = static_cast<double>(bytes) / L;
  const double piece = static_cast<double>(segmentPieceBytes(m.placement().segmentHalfBytes));
  const FabricModel& f = m.model();
  const double mem = m.memoryFactor(static_cast<double>(bytes));
  const double copy = f.segmentCopyUsPerByte(std::min(block, piece));
  // Single copy: two hand-offs, then the p − 1 blocks pulled and the own one copied.
  if (block >= static_cast<double>(m.placement().singleCopyMinBytes) &&
      m.shmPlan().gather) {
    return 2 * f.syncUs + mem * block * f.segmentCopyUsPerByte(block) * L;
  }
  return std::max(1.0, std::ceil(block / piece)) * f.syncUs + mem * block * copy * L;
}

}  // namespace all_gather_shm
}  // namespace braid::detail
