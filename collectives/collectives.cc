// The Communicator's public operations: argument checks (bad input is rejected before anything
// is sent, and leaves the communicator usable), fingerprints, and dispatch to algorithms.
#include <cstdint>
#include <cstring>

#include "collectives/comm_impl.h"

namespace braid {
namespace {

using detail::Fingerprint;

Status checkTypes(DataType type, ReduceOp op, bool needsOp) {
  if (!isValid(type)) return invalidArgument("invalid data type " + std::to_string(static_cast<int>(type)));
  if (needsOp && !isValid(op)) return invalidArgument("invalid reduction op " + std::to_string(static_cast<int>(op)));
  return Status::ok();
}

Status checkBuffer(const void* buf, size_t bytes, const char* what) {
  if (bytes > 0 && buf == nullptr) return invalidArgument(std::string(what) + " is null");
  if (bytes > (size_t{1} << 46)) return invalidArgument(std::string(what) + " is larger than 64 TiB");
  return Status::ok();
}

// Partially overlapping input and output corrupt results; exact in-place is fine.
Status checkOverlap(const void* in, size_t inBytes, const void* out, size_t outBytes,
                    const void* inPlaceAt) {
  if (inBytes == 0 || outBytes == 0 || in == inPlaceAt) return Status::ok();
  auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
  if (a < b + outBytes && b < a + inBytes) {
    return invalidArgument("send and receive buffers overlap without being in place");
  }
  return Status::ok();
}

Status checkCount(size_t count, DataType type) {
  if (count > (size_t{1} << 44) / std::max<size_t>(1, dataTypeSize(type))) {
    return invalidArgument("count " + std::to_string(count) + " is too large");
  }
  return Status::ok();
}

Fingerprint makeFp(Collective c, size_t count, DataType type, ReduceOp op, int root) {
  Fingerprint fp;
  fp.collective = c;
  fp.count = count;
  fp.type = type;
  fp.op = op;
  fp.root = root;
  return fp;
}

}  // namespace

int Communicator::rank() const { return impl_->rank_; }
int Communicator::size() const { return impl_->size_; }
int Communicator::localRank() const { return impl_->localRank_; }
int Communicator::localSize() const { return static_cast<int>(impl_->localRanks_.size()); }
int Communicator::hostIndex() const { return impl_->hostOf_[impl_->rank_]; }
int Communicator::numHosts() const { return impl_->numHosts_; }
int Communicator::hostOf(int rank) const {
  return rank >= 0 && rank < impl_->size_ ? impl_->hostOf_[rank] : -1;
}
Status Communicator::health() const { return impl_->health(); }

void Communicator::abort(const std::string& reason) {
  impl_->recordFailure(remoteError("rank " + std::to_string(impl_->rank_) + ": " + reason), true);
}

detail::AllReduceAlgo Communicator::Impl::pickAllReduce(size_t bytes) const {
  using detail::AllReduceAlgo;
  if (forcedAllReduce_ != AllReduceAlgo::kAuto) {
    if (forcedAllReduce_ == AllReduceAlgo::kShm && !(segment_ && numHosts_ == 1)) {
      return AllReduceAlgo::kRing;  // checked at setAllReduceAlgorithm; env override falls back
    }
    return forcedAllReduce_;
  }
  // Built-in rule until the cost-model selector lands: one host → the shared segment; otherwise
  // latency-bound sizes → halving/doubling, bandwidth-bound → ring.
  if (segment_ && numHosts_ == 1) return AllReduceAlgo::kShm;
  if (bytes < 64 * 1024) return AllReduceAlgo::kHalvingDoubling;
  return AllReduceAlgo::kRing;
}

std::string Communicator::allReduceAlgorithmFor(size_t bytes) const {
  return detail::allReduceAlgoName(impl_->pickAllReduce(bytes));
}

Status Communicator::setAllReduceAlgorithm(const std::string& name) {
  BRAID_ASSIGN_OR_RETURN(detail::AllReduceAlgo algo, detail::parseAllReduceAlgo(name));
  if (algo == detail::AllReduceAlgo::kShm && impl_->numHosts_ > 1) {
    return invalidArgument("the shm all-reduce needs every rank on one host; these ranks span " +
                           std::to_string(impl_->numHosts_));
  }
  if (algo == detail::AllReduceAlgo::kShm && impl_->localRanks_.size() > 1 && impl_->size_ > 1 &&
      !impl_->hasSegment()) {
    return invalidArgument("the shm all-reduce is not available with BRAID_TRANSPORT=tcp");
  }
  impl_->forcedAllReduce_ = algo;
  return Status::ok();
}

namespace {

Status runAllReduce(const detail::CollArgs& a, detail::AllReduceAlgo algo, const void* s, void* r,
                    size_t count) {
  switch (algo) {
    case detail::AllReduceAlgo::kShm: return detail::allReduceShm(a, s, r, count);
    case detail::AllReduceAlgo::kTree: return detail::allReduceTree(a, s, r, count);
    case detail::AllReduceAlgo::kHalvingDoubling:
      return detail::allReduceHalvingDoubling(a, s, r, count);
    default: return detail::allReduceRing(a, s, r, count);
  }
}

}  // namespace

Status Communicator::allReduce(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                               ReduceOp op) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, op, true));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  const size_t bytes = count * dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "allreduce send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "allreduce receive buffer"));
  BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, bytes, recvbuf, bytes, recvbuf));
  const detail::AllReduceAlgo algo = impl_->pickAllReduce(bytes);
  return impl_->run(makeFp(Collective::kAllReduce, count, type, op, -1), true,
                    [=](const detail::CollArgs& a) { return runAllReduce(a, algo, sendbuf, recvbuf, count); });
}

Result<std::shared_ptr<Work>> Communicator::allReduceAsync(const void* sendbuf, void* recvbuf,
                                                           size_t count, DataType type,
                                                           ReduceOp op) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, op, true));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  const size_t bytes = count * dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "allreduce send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "allreduce receive buffer"));
  BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, bytes, recvbuf, bytes, recvbuf));
  const detail::AllReduceAlgo algo = impl_->pickAllReduce(bytes);
  return impl_->runAsync(makeFp(Collective::kAllReduce, count, type, op, -1),
                         [=](const detail::CollArgs& a) { return runAllReduce(a, algo, sendbuf, recvbuf, count); });
}

namespace {
struct ReduceScatterCheck {
  static Status check(const void* sendbuf, void* recvbuf, size_t recvcount, DataType type,
                      ReduceOp op, int rank, int size) {
    BRAID_RETURN_IF_ERROR(checkTypes(type, op, true));
    BRAID_RETURN_IF_ERROR(checkCount(recvcount * static_cast<size_t>(size), type));
    const size_t es = dataTypeSize(type);
    BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, recvcount * es * size, "reducescatter send buffer"));
    BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, recvcount * es, "reducescatter receive buffer"));
    return checkOverlap(sendbuf, recvcount * es * size, recvbuf, recvcount * es,
                        static_cast<const uint8_t*>(recvbuf) - recvcount * es * rank);
  }
};
Status checkAllGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType type,
                      int rank, int size) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkCount(sendcount * static_cast<size_t>(size), type));
  const size_t es = dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, sendcount * es, "allgather send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, sendcount * es * size, "allgather receive buffer"));
  return checkOverlap(sendbuf, sendcount * es, recvbuf, sendcount * es * size,
                      static_cast<const uint8_t*>(recvbuf) + sendcount * es * rank);
}
Status checkRoot(int root, int size) {
  if (root < 0 || root >= size) {
    return invalidArgument("root " + std::to_string(root) + " is outside [0, " + std::to_string(size) + ")");
  }
  return Status::ok();
}
}  // namespace

Status Communicator::reduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                   DataType type, ReduceOp op) {
  BRAID_RETURN_IF_ERROR(ReduceScatterCheck::check(sendbuf, recvbuf, recvcount, type, op, rank(), size()));
  return impl_->run(makeFp(Collective::kReduceScatter, recvcount, type, op, -1), true,
                    [=](const detail::CollArgs& a) { return detail::reduceScatterRing(a, sendbuf, recvbuf, recvcount); });
}

Result<std::shared_ptr<Work>> Communicator::reduceScatterAsync(const void* sendbuf, void* recvbuf,
                                                               size_t recvcount, DataType type,
                                                               ReduceOp op) {
  BRAID_RETURN_IF_ERROR(ReduceScatterCheck::check(sendbuf, recvbuf, recvcount, type, op, rank(), size()));
  return impl_->runAsync(makeFp(Collective::kReduceScatter, recvcount, type, op, -1),
                         [=](const detail::CollArgs& a) { return detail::reduceScatterRing(a, sendbuf, recvbuf, recvcount); });
}

Status Communicator::allGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType type) {
  BRAID_RETURN_IF_ERROR(checkAllGather(sendbuf, recvbuf, sendcount, type, rank(), size()));
  return impl_->run(makeFp(Collective::kAllGather, sendcount, type, ReduceOp::kSum, -1), true,
                    [=](const detail::CollArgs& a) { return detail::allGatherRing(a, sendbuf, recvbuf, sendcount); });
}

Result<std::shared_ptr<Work>> Communicator::allGatherAsync(const void* sendbuf, void* recvbuf,
                                                           size_t sendcount, DataType type) {
  BRAID_RETURN_IF_ERROR(checkAllGather(sendbuf, recvbuf, sendcount, type, rank(), size()));
  return impl_->runAsync(makeFp(Collective::kAllGather, sendcount, type, ReduceOp::kSum, -1),
                         [=](const detail::CollArgs& a) { return detail::allGatherRing(a, sendbuf, recvbuf, sendcount); });
}

Status Communicator::broadcast(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                               int root) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkRoot(root, size()));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  const size_t bytes = count * dataTypeSize(type);
  if (rank() == root) BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "broadcast send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "broadcast receive buffer"));
  if (rank() == root) BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, bytes, recvbuf, bytes, recvbuf));
  return impl_->run(makeFp(Collective::kBroadcast, count, type, ReduceOp::kSum, root), true,
                    [=](const detail::CollArgs& a) { return detail::broadcastTree(a, sendbuf, recvbuf, count, root); });
}

Result<std::shared_ptr<Work>> Communicator::broadcastAsync(const void* sendbuf, void* recvbuf,
                                                           size_t count, DataType type, int root) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkRoot(root, size()));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  const size_t bytes = count * dataTypeSize(type);
  if (rank() == root) BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "broadcast send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "broadcast receive buffer"));
  return impl_->runAsync(makeFp(Collective::kBroadcast, count, type, ReduceOp::kSum, root),
                         [=](const detail::CollArgs& a) { return detail::broadcastTree(a, sendbuf, recvbuf, count, root); });
}

Status Communicator::reduce(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                            ReduceOp op, int root) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, op, true));
  BRAID_RETURN_IF_ERROR(checkRoot(root, size()));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  const size_t bytes = count * dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "reduce send buffer"));
  void* out = rank() == root ? recvbuf : nullptr;
  if (rank() == root) {
    BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "reduce receive buffer"));
    BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, bytes, recvbuf, bytes, recvbuf));
  }
  return impl_->run(makeFp(Collective::kReduce, count, type, op, root), true,
                    [=](const detail::CollArgs& a) { return detail::reduceTree(a, sendbuf, out, count, root); });
}

Status Communicator::allToAll(const void* sendbuf, void* recvbuf, size_t count, DataType type) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkCount(count * static_cast<size_t>(size()), type));
  const size_t bytes = count * dataTypeSize(type) * static_cast<size_t>(size());
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "alltoall send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "alltoall receive buffer"));
  BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, bytes, recvbuf, bytes, recvbuf));
  return impl_->run(makeFp(Collective::kAllToAll, count, type, ReduceOp::kSum, -1), true,
                    [=](const detail::CollArgs& a) { return detail::allToAllPairwise(a, sendbuf, recvbuf, count); });
}

Status Communicator::barrier() {
  return impl_->run(makeFp(Collective::kBarrier, 0, DataType::kUint8, ReduceOp::kSum, -1), true,
                    [](const detail::CollArgs& a) {
                      return a.shm ? detail::barrierShm(a) : detail::barrierDissemination(a);
                    });
}

Status Communicator::send(const void* buf, size_t count, DataType type, int peer) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  if (peer < 0 || peer >= size() || peer == rank()) {
    return invalidArgument("send peer " + std::to_string(peer) + " is not another rank of this communicator");
  }
  const size_t bytes = count * dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(buf, bytes, "send buffer"));
  // The receiver checks the sender's fingerprint, so both sides describe the message as kSend.
  return impl_->run(makeFp(Collective::kSend, count, type, ReduceOp::kSum, -1), false,
                    [=](const detail::CollArgs& a) {
                      a.p2p->begin(0, a.fp);
                      a.p2p->postSend(peer, buf, bytes);
                      return a.p2p->waitAll();
                    });
}

Status Communicator::recv(void* buf, size_t count, DataType type, int peer) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  if (peer < 0 || peer >= size() || peer == rank()) {
    return invalidArgument("recv peer " + std::to_string(peer) + " is not another rank of this communicator");
  }
  const size_t bytes = count * dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(buf, bytes, "recv buffer"));
  return impl_->run(makeFp(Collective::kSend, count, type, ReduceOp::kSum, -1), false,
                    [=](const detail::CollArgs& a) {
                      a.p2p->begin(0, a.fp);
                      a.p2p->postRecv(peer, buf, bytes);
                      return a.p2p->waitAll();
                    });
}

}  // namespace braid
