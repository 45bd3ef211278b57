// Internal: the 16-bit cast codecs (fp16.cc, bf16.cc) share this one template; each file holds
// its format's traits and the reasoning about its range.
//
// Schedule of allReduce (p ranks, n elements):
//   [dynamic scale only] all-reduce (max) of one f32: g = max over ranks of max|x|  — 4 bytes
//   w = cast16(x · s)                     s = 1/p, or the shared power-of-two scale below
//   all-reduce (sum) of w in the 16-bit format                                     — 2n bytes
//   x = f32(w) · post                     post = 1/(s·p) averaging, 1/s summing
// Wire: 2n bytes (+4 with the dynamic scale): 2x smaller than f32; α-β cost is the all-reduce's
// with half the bytes (+ one latency-bound all-reduce for the scale).
//
// Dynamic scale: s = 2^k with k = floor(log2(32768 / (p·g))), clamped to [-126, 126], so that
// every partial sum of p scaled values is at most p·g·s ≤ 32768 (half f16's range: rounding
// of partial sums cannot reach 65520, where f16 rounds to Inf) and the largest values use the
// top of the format — small buckets do not flush to zero. Power of two: scaling is exact.
// g = 0 gives s = 1; a non-finite g (Inf/NaN on some rank) gives s = 1/p, and the Inf/NaN
// propagates to every rank's result.
#pragma once

#include <cmath>
#include <cstring>

#include "compression/codec_base.h"

namespace braid::detail {

template <class Format>
class CastCodec final : public CodecBase {
 public:
  CastCodec(const CodecOptions& options, bool dynamicDefault)
      : CodecBase(options), dynamic_(options.dynamicScale.value_or(dynamicDefault)) {}

  CodecInfo info() const override {
    return {Format::kName, WireCollective::kAllReduce, false, true};
  }

  Status allReduce(Communicator& comm, BucketId bucket, float* data, size_t count,
                   const std::vector<TensorShape>&) override {
    BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "bucket"));
    state(bucket).calls++;
    const int p = comm.size();
    float scale = 1.0f / static_cast<float>(p);
    float post = options_.average ? 1.0f : static_cast<float>(p);
    int collectives = 1;
    size_t bytes = count * 2;
    if (dynamic_) {
      float g = k_.maxAbs(data, count);
      BRAID_RETURN_IF_ERROR(comm.allReduce(&g, &g, 1, DataType::kFloat32, ReduceOp::kMax));
      collectives++;
      bytes += sizeof(float);
      if (std::isfinite(g)) {
        const int e = sharedExponent(g, p);
        scale = std::ldexp(1.0f, e);
        const double inv = std::ldexp(1.0, -e);
        post = static_cast<float>(options_.average ? inv / p : inv);
      }
    }
    wire_.resize(count * 2);
    uint16_t* w = reinterpret_cast<uint16_t*>(wire_.data());
    Format::encode(k_, w, data, count, scale, limitFor(p));
    BRAID_RETURN_IF_ERROR(comm.allReduce(w, w, count, Format::kType, ReduceOp::kSum));
    Format::decode(k_, data, w, count, post);
    countCall(count, bytes, collectives);
    return Status::ok();
  }

  size_t maxEncodedBytes(size_t count, const std::vector<TensorShape>&) const override {
    return count * 2;
  }

  Result<size_t> encode(BucketId bucket, const float* data, size_t count,
                        const std::vector<TensorShape>&, float scale, void* wire,
                        size_t capacity) override {
    BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "input"));
    if (capacity < count * 2) return invalidArgument(std::string("codec ") + Format::kName +
                                                     ": wire buffer too small");
    state(bucket).calls++;
    Format::encode(k_, static_cast<uint16_t*>(wire), data, count, scale, Format::kMax);
    return count * 2;
  }

  Status decode(const void* wire, size_t bytes, int n, float* out, size_t count,
                const std::vector<TensorShape>&) override {
    if (bytes != count * 2 || n < 1) {
      return invalidArgument(std::string("codec ") + Format::kName + ": payload of " +
                             std::to_string(bytes) + " bytes does not hold " +
                             std::to_string(count) + " 16-bit values");
    }
    const uint16_t* w = static_cast<const uint16_t*>(wire);
    Format::decode(k_, out, w, count, 1.0f);
    scratch_.resize(count);
    for (int r = 1; r < n; ++r) {
      Format::decode(k_, scratch_.data(), w + static_cast<size_t>(r) * count, count, 1.0f);
      for (size_t i = 0; i < count; ++i) out[i] += scratch_[i];
    }
    return Status::ok();
  }

  /// The exponent of the dynamic scale for a global max g (finite) over p ranks.
  static int sharedExponent(float g, int p) {
    if (g == 0.0f) return 0;
    const double room = Format::kSumBound / (static_cast<double>(p) * g);
    int e = static_cast<int>(std::floor(std::log2(room)));
    if (std::ldexp(1.0, e) > room) --e;  // guard log2's rounding
    return e < -126 ? -126 : (e > 126 ? 126 : e);
  }

  /// Static scaling: the largest scaled value whose p-fold sum stays finite — the format's max
  /// divided by p, rounded down to a representable value.
  static float limitFor(int p) { return Format::limitFor(p); }

 private:
  bool dynamic_;
};

}  // namespace braid::detail
