// The frame of the shm rows' schedules on buffers in shared windows (Communicator::allocShared):
// every local rank publishes where its buffers lie, so that the others read (or write) them in
// place, with none of the copies through the segment's data slots. The single-copy calls
// (beginSingleCopy) share the frame: they publish the addresses of private buffers, which the
// peers reach with process_vm_readv/writev instead of a mapping.
#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/algorithms.h"
#include "core/copy.h"

namespace braid::detail {

namespace {
/// foldSharedWindows goes through a tile that stays in L1: every contribution of a tile is read
/// before its output is written (in place, the output is the own input).
constexpr size_t kTileBytes = 16 * 1024;
}  // namespace

void foldSharedWindows(const CollArgs& a, const WindowedCall& w, size_t first, size_t count,
                       uint8_t* dst, bool stream) {
  const int p = a.shm->localSize();
  const size_t es = a.elemSize;
  alignas(64) uint8_t tile[kTileBytes];
  const size_t tileCount = std::max<size_t>(1, kTileBytes / es);
  for (size_t c = 0; c < count; c += tileCount) {
    const size_t n = std::min(tileCount, count - c);
    const size_t off = (first + c) * es;
    a.reduce(tile, w.send[0] + off, w.send[1] + off, n);
    for (int i = 2; i < p; ++i) a.reduce(tile, tile, w.send[i] + off, n);
    if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, tile, n, p);
    if (stream) {
      copyToShared(dst + c * es, tile, n * es);
    } else {
      copyBytes(dst + c * es, tile, n * es);
    }
  }
}

Status beginInSharedWindows(const CollArgs& a, const void* sendbuf, size_t sendBytes,
                            const void* recvbuf, size_t recvBytes, WindowedCall* w) {
  ShmSegment* seg = a.shm;
  const int me = seg->localIndex();
  const uint64_t sendRef = seg->windowRef(sendbuf, sendBytes);
  const uint64_t recvRef = seg->windowRef(recvbuf, recvBytes);
  if (sendRef == 0 || recvRef == 0) {
    return invalidUsage(
        "a buffer of this operation left its shared window (freed by freeShared "
        "after the operation was issued?)");
  }
  w->g = seg->nextGeneration();
  seg->setWindowRefs(w->g, sendRef, recvRef);
  seg->arrive(w->g, a.seq, a.fp);
  BRAID_RETURN_IF_ERROR(seg->waitArrived(w->g, true));
  for (int i = 0; i < seg->localSize(); ++i) {
    w->send[i] = seg->peerWindow(i, w->g, true, sendBytes);
    w->recv[i] = const_cast<uint8_t*>(seg->peerWindow(i, w->g, false, recvBytes));
    if (w->send[i] == nullptr || w->recv[i] == nullptr) {
      return invalidUsage("rank " + std::to_string(seg->globalRank(i)) +
                          "'s buffers lie in a shared window that rank " +
                          std::to_string(seg->globalRank(me)) +
                          " freed (or that does not hold them): free a window on a rank only "
                          "once no rank's operation uses it");
    }
  }
  return Status::ok();
}

Status beginSingleCopy(const CollArgs& a, const void* sendbuf, const void* recvbuf,
                       SingleCopyCall* c) {
  ShmSegment* seg = a.shm;
  const uint64_t g = seg->nextGeneration();
  seg->setWindowRefs(g, reinterpret_cast<uintptr_t>(sendbuf), reinterpret_cast<uintptr_t>(recvbuf));
  seg->arrive(g, a.seq, a.fp);
  BRAID_RETURN_IF_ERROR(seg->waitArrived(g, true));
  for (int i = 0; i < seg->localSize(); ++i) {
    c->send[i] = seg->peerRef(i, g, true);
    c->recv[i] = seg->peerRef(i, g, false);
  }
  return Status::ok();
}

Status endInSharedWindows(const CollArgs& a) {
  ShmSegment* seg = a.shm;
  // Arriving at g + 1 rewrites the fingerprint half of g − 1: every rank arrived at g already.
  const uint64_t g = seg->nextGeneration();
  seg->setWindowRefs(g, 0, 0);
  seg->arrive(g, a.seq, a.fp);
  return seg->waitArrived(g, false);
}

}  // namespace braid::detail
