// Same-host all-gather in the shared segment, with no message passing.
//
// Schedule for blocks of at most H bytes (H = half of a rank's slot, the halves alternating
// between calls as in allreduce/shm.cc): copy the own block in → arrive → copy the p − 1 other
// blocks out of their slots (one synchronization). Larger blocks take the ring (all_gather/
// ring.cc) over the transport.
// Cost for S = p·b bytes (b a block): α_sync + b/B_copy (in) + (p−1)·b/B_copy (out), slower out
// of cache like every other stream; B_copy was measured with every local rank copying at once
// (calibration.cc), so the shared cores are in it already.
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {

namespace all_gather_shm {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t sendcount,
           int /*root*/) {
  ShmSegment* seg = a.shm;
  const size_t bytes = sendcount * a.elemSize;
  if (a.size == 1 || seg == nullptr || bytes > seg->halfBytes()) {
    if (a.size > 1 && seg == nullptr) return internalError("shm all-gather needs one host");
    return allGatherRing(a, sendbuf, recvbuf, sendcount);
  }
  const int p = seg->localSize();
  const int me = seg->localIndex();
  const uint64_t g = seg->nextGeneration();
  const int h = static_cast<int>(g & 1);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  copyToShared(seg->half(me, h), sendbuf, bytes);
  seg->arrive(g, a.seq, a.fp);
  BRAID_RETURN_IF_ERROR(seg->waitArrived(g, true));
  // In place the own block already sits at its place in recvbuf.
  copyIfDistinct(out + static_cast<size_t>(me) * bytes, sendbuf, bytes);
  for (int i = 0; i < p; ++i) {
    if (i != me) std::memcpy(out + static_cast<size_t>(i) * bytes, seg->half(i, h), bytes);
  }
  return Status::ok();
}

void plan(const CostModel& m, CostPlan* plan) { all_gather_ring::plan(m, plan); }

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t chunkBytes) {
  const int L = m.placement().size();
  const double block = static_cast<double>(bytes) / L;
  if (block > static_cast<double>(m.placement().segmentHalfBytes)) {
    return all_gather_ring::cost(m, plan, bytes, chunkBytes);
  }
  const FabricModel& f = m.model();
  const double mem = m.memoryFactor(static_cast<double>(bytes));
  const double copy = f.segmentCopyUsPerByte(block);
  return f.syncUs + mem * block * copy * L;
}

}  // namespace all_gather_shm
}  // namespace braid::detail
