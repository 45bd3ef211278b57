// Same-host broadcast in the shared segment, with no message passing.
// Messages of ShmSegment::singleCopyMinBytes() (16 KiB, 64 KiB with more ranks than cores) and
// more take one copy, private buffer to private buffer, where the ranks may read each other's
// memory and the calibrated single copy beats a copy through the segment (a.shmPlan.broadcast:
// selector/cost_model.h; not on the EPYC VM) (runSingleCopy below); the schedule through the
// segment that follows serves the rest.
//
// Schedule, piece by piece (kSegmentPieceBytes, 256 KiB; the halves of the root's slot
// alternate between pieces as between calls in allreduce/shm.cc): the root copies piece j into
// its slot → arrives → the others copy it out while the root copies piece j + 1 into the other
// half; before reusing a half the root waits until every rank arrived at the piece after it.
// Messages of any size stay in the segment (the pipelined tree over the transport took 15–45%
// longer on the 2-core VM at 16–64 MiB, 2 and 4 ranks; braid-perf-broadcast -a all --rounds 3).
// Cost for S bytes in k pieces: k·α_sync + S/B_slow + min(S, piece)/B_fast, the slower and the
// faster of the root's copy in (one core alone, B_alone, when the ranks have cores of their own
// or the message is one piece) and the readers' copies out (B_copy, measured as the segment's
// probe rounds run): the two streams overlap but for one piece; slower out of cache.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {

namespace {

// Buffers in shared windows on every rank (the root's send and receive buffers, the others'
// receive buffers; Communicator::allocShared): every rank copies the message straight from the
// root's send buffer (one copy, no pieces through the root's slot), then a last hand-off keeps
// it unchanged until every rank has read it.
Status runInWindows(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t bytes, int root) {
  // Only the root's send buffer is read; the others' receive buffer stands for theirs.
  WindowedCall w;
  BRAID_RETURN_IF_ERROR(beginInSharedWindows(a, a.shm->localIndex() == root ? sendbuf : recvbuf,
                                             bytes, recvbuf, bytes, &w));
  copyIfDistinct(recvbuf, w.send[root], bytes);
  return endInSharedWindows(a);
}

// Single copy (messages of ShmSegment::singleCopyMinBytes() and more, buffers
// anywhere): each reader pulls the message from the root's send buffer straight into its own
// (process_vm_readv) while the root pushes the message's tail into every reader's
// (process_vm_writev), so that with a core per rank both ends of the transfer copy. The tail t
// balances the root's work, (p − 1)·t plus its own copy out of place, against a reader's, S − t:
// in place, t = S/p; out of place the root's own copy already matches a reader's pull. One
// hand-off publishes the buffers, one releases them.
Status runSingleCopy(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t bytes,
                     int root) {
  ShmSegment* seg = a.shm;
  const int p = seg->localSize();
  const int me = seg->localIndex();
  SingleCopyCall c;
  BRAID_RETURN_IF_ERROR(beginSingleCopy(a, me == root ? sendbuf : nullptr, recvbuf, &c));
  // Every rank computes the same split from what the root published; whole pages, so that the
  // two writers of a reader's buffer never share a line.
  const size_t own = c.send[root] != c.recv[root] ? bytes : 0;
  const size_t tail = (bytes - own) / static_cast<size_t>(p) / 4096 * 4096;
  const size_t head = bytes - tail;
  if (me == root) {
    const uint8_t* src = static_cast<const uint8_t*>(sendbuf);
    for (int k = 1; k < p && tail > 0; ++k) {
      const int i = (root + k) % p;
      BRAID_RETURN_IF_ERROR(seg->writePeer(i, c.recv[i] + head, src + head, tail));
    }
    copyIfDistinct(recvbuf, sendbuf, bytes);
  } else {
    BRAID_RETURN_IF_ERROR(seg->readPeer(root, recvbuf, c.send[root], head));
  }
  return endInSharedWindows(a);
}

}  // namespace

namespace broadcast_shm {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root) {
  ShmSegment* seg = a.shm;
  const size_t es = a.elemSize;
  const size_t bytes = count * es;
  if (a.size == 1 || seg == nullptr) {
    if (a.size > 1) return internalError("shm broadcast needs one host");
    return broadcastTree(a, sendbuf, recvbuf, count, root);
  }
  if (inSharedWindows(a)) return runInWindows(a, sendbuf, recvbuf, bytes, root);
  if (a.shmPlan.broadcast && bytes >= seg->singleCopyMinBytes()) {
    return runSingleCopy(a, sendbuf, recvbuf, bytes, root);
  }
  // On one host the local index is the rank.
  const int me = seg->localIndex();
  const size_t piece = seg->pieceBytes(es);
  const size_t npieces = bytes == 0 ? 1 : (bytes + piece - 1) / piece;
  const uint8_t* src = static_cast<const uint8_t*>(sendbuf);
  uint8_t* dst = static_cast<uint8_t*>(recvbuf);
  uint64_t g = 0;
  for (size_t j = 0; j < npieces; ++j) {
    g = seg->nextGeneration();
    const int h = static_cast<int>(g & 1);
    const size_t off = j * piece;
    const size_t n = std::min(piece, bytes - std::min(off, bytes));
    if (me == root) {
      // Half h last held piece j − 2 (or an earlier call's data): the readers are done with it
      // once they arrived at g − 1 (a rank arrives at a piece after copying out the one before).
      // Piece 0's half was freed by the previous call's last wait.
      if (j > 0) BRAID_RETURN_IF_ERROR(seg->waitArrived(g - 1, true));
      // Out of place, its own receive buffer in the same pass over the source.
      copyToSharedAndLocal(seg->half(root, h), dst + off, src + off, n);
      seg->arrive(g, a.seq, a.fp);
    } else {
      // Arriving at g rewrites this rank's fingerprint of g − 2, which a peer still checking
      // g − 2 (a rank still finishing the previous collective) would take for a mismatch: as
      // every shm collective does, arrive only once every rank arrived at g − 1 (for piece 0,
      // the previous call's last wait saw to it; the root arrived already).
      if (j > 0) BRAID_RETURN_IF_ERROR(seg->waitArrived(g - 1, false));
      seg->arrive(g, a.seq, a.fp);
      BRAID_RETURN_IF_ERROR(seg->waitArrivedFrom(root, g, true));
      copyBytes(dst + off, seg->half(root, h), n);
    }
  }
  // Every rank leaves with every other arrived at the last piece, so that the next collective
  // may write either half (what every shm collective guarantees the next one).
  return seg->waitArrived(g, true);
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t /*chunkBytes*/) {
  const FabricModel& f = m.model();
  const double dn = static_cast<double>(bytes);
  if (bytes >= m.placement().singleCopyMinBytes &&
      m.shmPlan().broadcast) {
    // Two hand-offs and a reader's pull of the message (out of place; in place the root takes
    // 1/p of it), at the cross-core copy rate (process_vm_readv ran at 0.7–0.8 of memcpy on
    // the Intel VM).
    return 2 * f.syncUs + m.memoryFactor(dn) * dn * f.segmentCopyUsPerByte(dn);
  }
  const double piece = static_cast<double>(segmentPieceBytes(m.placement().segmentHalfBytes));
  const double pieces = std::max(1.0, std::ceil(dn / piece));
  // The root copies in alone (the readers wait for its first piece, and have cores of their own
  // or yield theirs); the readers read what it streamed to memory, as the probe's rounds do.
  // Beyond a piece the two streams overlap, and the slower one sets the pace.
  const bool alone = f.copyAloneUsPerByte > 0 && (!m.crowded() || pieces == 1) &&
                     dn >= static_cast<double>(kCopyStreamMinBytes);  // streamed copies
  const double in = alone ? f.copyAloneUsPerByte : f.segmentCopyUsPerByte(dn);
  const double out = f.segmentCopyUsPerByte(dn);
  return pieces * f.syncUs +
         m.memoryFactor(dn) * (dn * std::max(in, out) + std::min(dn, piece) * std::min(in, out));
}

}  // namespace broadcast_shm
}  // namespace braid::detail
