// "none": the plain f32 all-reduce, behind the Codec interface so that baselines and compressed
// runs take the same code path. Wire: the bucket itself (4 bytes per element), one all-reduce.
#include <cstring>

#include "compression/codec_base.h"
#include "compression/codec_registry.h"

namespace braid::detail {
namespace {

class NoneCodec final : public CodecBase {
 public:
  using CodecBase::CodecBase;

  CodecInfo info() const override { return {"none", WireCollective::kAllReduce, false, true}; }

  Status allReduce(Communicator& comm, BucketId bucket, float* data, size_t count,
                   const std::vector<TensorShape>&) override {
    BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "bucket"));
    state(bucket).calls++;
    BRAID_RETURN_IF_ERROR(comm.allReduce(data, data, count, DataType::kFloat32,
                                         options_.average ? ReduceOp::kAvg : ReduceOp::kSum));
    countCall(count, count * sizeof(float), 1);
    return Status::ok();
  }

  size_t maxEncodedBytes(size_t count, const std::vector<TensorShape>&) const override {
    return count * sizeof(float);
  }

  Result<size_t> encode(BucketId bucket, const float* data, size_t count,
                        const std::vector<TensorShape>&, float scale, void* wire,
                        size_t capacity) override {
    BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "input"));
    if (capacity < count * sizeof(float)) return invalidArgument("codec none: wire too small");
    state(bucket).calls++;
    float* w = static_cast<float*>(wire);
    k_.scaleCopy(w, scale, data, count);
    return count * sizeof(float);
  }

  Status decode(const void* wire, size_t bytes, int n, float* out, size_t count,
                const std::vector<TensorShape>&) override {
    if (bytes != count * sizeof(float) || n < 1) {
      return invalidArgument("codec none: payload of " + std::to_string(bytes) +
                             " bytes does not hold " + std::to_string(count) + " floats");
    }
    const float* w = static_cast<const float*>(wire);
    if (count > 0) std::memcpy(out, w, bytes);
    for (int r = 1; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) out[i] += w[static_cast<size_t>(r) * count + i];
    }
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<Codec> createNoneCodec(const CodecOptions& options) {
  return std::make_unique<NoneCodec>(options);
}

}  // namespace braid::detail
