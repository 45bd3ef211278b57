// Same-host reduce-scatter in the shared segment, with no message passing.
//
// Schedule for an input of at most H bytes (p blocks; H = half of a rank's slot, the halves
// alternating between calls as in allreduce/shm.cc): copy the p − 1 blocks the other ranks
// reduce into the slot → arrive → reduce the own block from the p contributions in rank order
// into the output (one synchronization; the own contribution read from the input). Larger
// inputs take the same schedule piece by piece (each block's piece of at most
// min(kSegmentPieceBytes, H/p), the halves alternating between pieces as between calls); they
// took the ring (reduce_scatter/ring.cc) over the transport before. Buffers in shared windows
// take runInWindows below at any size.
// Cost for S = p·b bytes in k pieces: k·α_sync + (p−1)·b/B_copy (in) + (p−1)·b·γ (every rank
// reduces its block at once, sharing the cores: cpuShare), slower out of cache.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {

namespace {

// Buffers in shared windows on every rank (Communicator::allocShared): every rank folds its
// block of the p send buffers where they lie, in rank order, into its output (no copy into the
// slots), then a last hand-off keeps each send buffer unchanged until every peer has read it.
// Any size: nothing passes through the segment.
Status runInWindows(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t recvcount) {
  const int p = a.shm->localSize();
  const int me = a.shm->localIndex();
  const size_t es = a.elemSize;
  const size_t bytes = recvcount * es;
  WindowedCall w;
  BRAID_RETURN_IF_ERROR(
      beginInSharedWindows(a, sendbuf, bytes * static_cast<size_t>(p), recvbuf, bytes, &w));
  // Nobody reads the output: plain stores, so it stays in this core's cache for the caller.
  foldSharedWindows(a, w, static_cast<size_t>(me) * recvcount, recvcount,
                    static_cast<uint8_t*>(recvbuf), /*stream=*/false);
  return endInSharedWindows(a);
}

// Each block's piece of at most this many bytes per synchronization: the p pieces of one
// generation fill at most one half slot.
size_t rsPieceBytes(size_t halfBytes, int p, size_t elemSize) {
  const size_t piece = std::min(segmentPieceBytes(halfBytes), halfBytes / static_cast<size_t>(p));
  return std::max(elemSize, piece / elemSize * elemSize);
}

}  // namespace

namespace reduce_scatter_shm {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t recvcount,
           int /*root*/) {
  ShmSegment* seg = a.shm;
  const size_t es = a.elemSize;
  const size_t bytes = recvcount * es;  // one block
  if (inSharedWindows(a)) return runInWindows(a, sendbuf, recvbuf, recvcount);
  if (a.size == 1 || seg == nullptr) {
    if (a.size > 1) return internalError("shm reduce-scatter needs one host");
    return reduceScatterRing(a, sendbuf, recvbuf, recvcount);
  }
  // Piece j of every block goes through the slots in generation j's half, piece i at i·piece
  // (the p − 1 other blocks' pieces copied in) → arrive → the own block's piece folded from the
  // p contributions into the output. Where the p blocks fit one half slot the piece is the whole
  // block: one hand-off. A half is written again two pieces later, after every rank arrived at
  // the piece between, so after every rank read it.
  const int p = seg->localSize();
  const int me = seg->localIndex();
  const bool whole = bytes * static_cast<size_t>(p) <= seg->halfBytes();
  const size_t piece = whole ? bytes : rsPieceBytes(seg->halfBytes(), p, es);
  const size_t npieces = whole ? 1 : (bytes + piece - 1) / piece;
  const uint8_t* src = static_cast<const uint8_t*>(sendbuf);
  uint8_t* dst = static_cast<uint8_t*>(recvbuf);
  const size_t lo = static_cast<size_t>(me) * bytes;
  // In place the output is the own input block, which the fold overwrites before it reads it
  // (from rank 2 on): then the own piece goes through the slot too.
  const bool inPlace = dst == src + lo;
  for (size_t j = 0; j < npieces; ++j) {
    const uint64_t g = seg->nextGeneration();
    const int h = static_cast<int>(g & 1);
    const size_t off = j * piece;
    const size_t n = std::min(piece, bytes - off);
    uint8_t* slot = seg->half(me, h);
    if (whole) {  // the blocks lie in the slot as in the input: those before and after the own
      copyToShared(slot, src, lo);
      if (inPlace) copyToShared(slot + lo, src + lo, bytes);
      copyToShared(slot + lo + bytes, src + lo + bytes, static_cast<size_t>(p - me - 1) * bytes);
    } else {
      for (int i = 0; i < p; ++i) {
        if (i != me || inPlace) {
          copyToShared(slot + static_cast<size_t>(i) * piece,
                       src + static_cast<size_t>(i) * bytes + off, n);
        }
      }
    }
    // count == 0 still synchronizes once, so that a mismatch (0 vs n) is detected.
    seg->arrive(g, a.seq, a.fp);
    BRAID_RETURN_IF_ERROR(seg->waitArrived(g, true));
    const size_t at = static_cast<size_t>(me) * piece;
    auto contribution = [&](int i) -> const uint8_t* {
      return i == me && !inPlace ? src + lo + off : seg->half(i, h) + at;
    };
    const size_t count = n / es;
    a.reduce(dst + off, contribution(0), contribution(1), count);
    for (int i = 2; i < p; ++i) a.reduce(dst + off, dst + off, contribution(i), count);
    if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, dst + off, count, p);
  }
  return Status::ok();
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t /*chunkBytes*/) {
  const FabricModel& f = m.model();
  const int L = m.placement().size();
  const size_t half = m.placement().segmentHalfBytes;
  const double dn = static_cast<double>(bytes);
  const double mem = m.memoryFactor(dn);
  const double others = dn * (L - 1) / L;
  // Over one half slot, in pieces of at most rsPieceBytes of each block.
  const double block = dn / L;
  const double piece = static_cast<double>(rsPieceBytes(half, L, 1));
  const double pieces = bytes > half ? std::max(1.0, std::ceil(block / piece)) : 1.0;
  const double copied = bytes > half ? std::min(block, piece) : block;
  return pieces * f.syncUs + mem * (others * f.segmentCopyUsPerByte(copied) +
                                    m.cpuShare(L) * others * f.gammaUsPerByte);
}

}  // namespace reduce_scatter_shm
}  // namespace braid::detail
