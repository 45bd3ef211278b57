#include "compression/codec_base.h"

#include <algorithm>
#include <cstring>

namespace braid::detail {

Status CodecBase::checkBuffer(const void* p, size_t count, const char* what) {
  if (p == nullptr && count > 0) {
    return invalidArgument(std::string("codec: ") + what + " is null with count " +
                           std::to_string(count));
  }
  return Status::ok();
}

Status CodecBase::getResidual(BucketId bucket, float* out, size_t count) const {
  BRAID_RETURN_IF_ERROR(checkBuffer(out, count, "residual output"));
  auto it = states_.find(bucket);
  if (it == states_.end() || it->second.residual.empty()) {
    std::fill(out, out + count, 0.0f);
    return Status::ok();
  }
  const std::vector<float>& r = it->second.residual;
  if (r.size() != count) {
    return invalidArgument("codec: bucket " + std::to_string(bucket) + " has a residual of " +
                           std::to_string(r.size()) + " elements, not " + std::to_string(count));
  }
  if (count > 0) std::memcpy(out, r.data(), count * sizeof(float));
  return Status::ok();
}

Status CodecBase::setResidual(BucketId bucket, const float* in, size_t count) {
  BRAID_RETURN_IF_ERROR(checkBuffer(in, count, "residual input"));
  states_[bucket].residual.assign(in, in + count);
  return Status::ok();
}

std::vector<float>& CodecBase::residualFor(BucketState& s, size_t count) {
  if (s.residual.size() != count) s.residual.assign(count, 0.0f);
  return s.residual;
}

float* CodecBase::compensatedInput(BucketState& s, const float* data, size_t count, float scale,
                                   bool errorFeedback) {
  if (errorFeedback) {
    std::vector<float>& r = residualFor(s, count);
    k_.axpy(r.data(), scale, data, count);
    return r.data();
  }
  scratch_.resize(count);
  k_.scaleCopy(scratch_.data(), scale, data, count);
  return scratch_.data();
}

uint32_t CodecBase::streamKey(BucketId bucket, uint64_t step, int rank) const {
  uint64_t h = codecMix(options_.seed);
  h = codecMix(h ^ bucket);
  h = codecMix(h ^ step);
  h = codecMix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(rank)));
  return static_cast<uint32_t>(h ^ (h >> 32));
}

Status CodecBase::gatherAllReduce(Communicator& comm, BucketId bucket, float* data, size_t count,
                                  const std::vector<TensorShape>& shapes) {
  BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "bucket"));
  const int p = comm.size();
  rank_ = comm.rank();
  const size_t cap = maxEncodedBytes(count, shapes);
  // The own payload sits in its slot of the gather buffer (in-place all-gather).
  gather_.resize(cap * static_cast<size_t>(p));
  unsigned char* mine = gather_.data() + cap * static_cast<size_t>(rank_);
  BRAID_ASSIGN_OR_RETURN(const size_t bytes,
                         encode(bucket, data, count, shapes, 1.0f, mine, cap));
  if (bytes != cap) {
    return internalError(std::string("codec ") + info().name + ": payload of " +
                         std::to_string(bytes) + " bytes, expected the fixed " +
                         std::to_string(cap));
  }
  BRAID_RETURN_IF_ERROR(comm.allGather(mine, gather_.data(), cap, DataType::kUint8));
  BRAID_RETURN_IF_ERROR(decode(gather_.data(), cap, p, data, count, shapes));
  if (options_.average) scaleInPlace(data, count, 1.0f / static_cast<float>(p));
  countCall(count, cap, 1);
  return Status::ok();
}

void scaleInPlace(float* x, size_t n, float s) {
  if (s == 1.0f) return;
  codecKernels().scaleCopy(x, s, x, n);
}

}  // namespace braid::detail
