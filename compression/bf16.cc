// bf16: scale by 1/p in f32, cast to bfloat16 once (round to nearest even), all-reduce (sum) in
// bfloat16, widen back. Wire and schedule: cast_codec.h.
//
// Range. bfloat16 has f32's exponent range, so neither the pre-divided summands nor their sum can
// overflow for finite f32 inputs (each ≤ FLT_MAX/p), and underflow starts only near 1e-38·p: no
// dynamic scale is needed (it is off by default, available with dynamic=1). Precision is the
// cost: 8 significant bits, and the on-the-wire sum rounds once per addition, so the relative
// error of the average grows with p (about p·2^-9 in the worst case). Inf/NaN propagate.
#include <cfloat>

#include "compression/cast_codec.h"
#include "compression/codec_registry.h"

namespace braid::detail {
namespace {

struct Bf16 {
  static constexpr const char* kName = "bf16";
  static constexpr DataType kType = DataType::kBFloat16;
  static constexpr float kMax = FLT_MAX;
  static constexpr double kSumBound = 1.0e38;
  static float limitFor(int) { return FLT_MAX; }
  static void encode(const CodecKernels& k, uint16_t* w, const float* x, size_t n, float scale,
                     float) {
    k.toBf16(w, x, n, scale);
  }
  static void decode(const CodecKernels& k, float* out, const uint16_t* w, size_t n,
                     float scale) {
    k.fromBf16(out, w, n, scale);
  }
};

}  // namespace

std::unique_ptr<Codec> createBf16Codec(const CodecOptions& options) {
  return std::make_unique<CastCodec<Bf16>>(options, /*dynamicDefault=*/false);
}

}  // namespace braid::detail
