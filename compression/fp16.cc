// fp16: scale by 1/p in f32, cast to IEEE half once, all-reduce (sum) in half, widen back.
// Wire and schedule: cast_codec.h.
//
// Range. Half's largest finite value is 65504 and its smallest subnormal 2^-24 ≈ 6e-8; values
// below 2^-25 round to zero.
//  - Overflow. A post-divided sum (PyTorch 1.8: sum in half, then divide) overflows once the sum
//    of p values passes 65504 (p ranks holding 60000 each: 60000·p). Pre-dividing in
//    f32 keeps each summand ≤ 65504/p when every |x| ≤ 65504, so no partial sum in any order can
//    exceed 65504 (summands are also rounded down to a half ≤ 65504/p). Static mode saturates
//    larger finite inputs at ±65504/p per rank (so at ±65504 in the average) instead of
//    producing Inf; with the dynamic scale (default) any finite input is carried, since the
//    shared scale keeps p·max|x|·s ≤ 32768.
//  - Underflow. With 1/p alone, an element of 1e-6 at p = 64 becomes 1.6e-8 < 2^-25 and
//    vanishes. The dynamic scale (default) lifts the bucket so that its largest element sits near
//    32768/p: 1e-6 at p = 64 is carried with half's full 11-bit precision.
//  - Inf/NaN inputs propagate (never saturated), so loss-scaling overflow checks still see them.
#include "compression/cast_codec.h"
#include "compression/codec_registry.h"
#include "core/reduce.h"

namespace braid::detail {
namespace {

struct Fp16 {
  static constexpr const char* kName = "fp16";
  static constexpr DataType kType = DataType::kFloat16;
  static constexpr float kMax = 65504.0f;
  static constexpr double kSumBound = 32768.0;
  static float limitFor(int p) {
    float l = kMax / static_cast<float>(p);
    // Round down to a representable half, so that the cast cannot round a summand up.
    float h = halfToFloat(floatToHalf(l));
    while (h > l) h = halfToFloat(static_cast<uint16_t>(floatToHalf(h) - 1));
    return h;
  }
  static void encode(const CodecKernels& k, uint16_t* w, const float* x, size_t n, float scale,
                     float limit) {
    k.toHalf(w, x, n, scale, limit);
  }
  static void decode(const CodecKernels& k, float* out, const uint16_t* w, size_t n,
                     float scale) {
    k.fromHalf(out, w, n, scale);
  }
};

}  // namespace

float fp16StaticLimit(int p) { return Fp16::limitFor(p); }

std::unique_ptr<Codec> createFp16Codec(const CodecOptions& options) {
  return std::make_unique<CastCodec<Fp16>>(options, /*dynamicDefault=*/true);
}

}  // namespace braid::detail
