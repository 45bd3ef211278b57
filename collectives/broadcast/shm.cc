// Same-host broadcast in the shared segment, with no message passing.
//
// Schedule for a message of at most H bytes (H = half of a rank's slot, the halves alternating
// between calls as in allreduce/shm.cc): the root copies the message into its slot → arrive →
// every other rank copies it out (one synchronization). Larger messages take the pipelined tree
// (broadcast/tree.cc) over the transport.
// Cost for S bytes: α_sync + S/B_copy (the root's copy in) + S/B_copy (the copies out, all at
// once; B_copy was measured so, calibration.cc), slower out of cache.
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {

namespace broadcast_shm {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root) {
  ShmSegment* seg = a.shm;
  const size_t bytes = count * a.elemSize;
  if (a.size == 1 || seg == nullptr || bytes > seg->halfBytes()) {
    if (a.size > 1 && seg == nullptr) return internalError("shm broadcast needs one host");
    return broadcastTree(a, sendbuf, recvbuf, count, root);
  }
  const int me = seg->localIndex();
  const uint64_t g = seg->nextGeneration();
  const int h = static_cast<int>(g & 1);
  // On one host the local index is the rank.
  if (me == root) copyToShared(seg->half(root, h), sendbuf, bytes);
  seg->arrive(g, a.seq, a.fp);
  BRAID_RETURN_IF_ERROR(seg->waitArrived(g, true));
  if (me == root) {
    copyIfDistinct(recvbuf, sendbuf, bytes);
  } else {
    std::memcpy(recvbuf, seg->half(root, h), bytes);
  }
  return Status::ok();
}

void plan(const CostModel& m, CostPlan* plan) { broadcast_tree::plan(m, plan); }

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t chunkBytes) {
  if (bytes > m.placement().segmentHalfBytes) {
    return broadcast_tree::cost(m, plan, bytes, chunkBytes);
  }
  const FabricModel& f = m.model();
  const double dn = static_cast<double>(bytes);
  return f.syncUs + m.memoryFactor(dn) * 2 * dn * f.segmentCopyUsPerByte(dn);
}

}  // namespace broadcast_shm
}  // namespace braid::detail
