// int8: per-chunk scaled 8-bit quantization with stochastic rounding (QSGD/TernGrad family).
//
// Payload of n elements in chunks of c (CodecOptions::chunkSize): ceil(n/c) f32 scales, then n
// int8 values — n + 4·ceil(n/c) bytes, about 4x smaller than f32 (3.98x at c = 1024).
// Schedule: encode, all-gather of the payloads (p·(n + 4n/c) bytes received), decode every
// payload in rank order, ×1/p when averaging. The sum cannot travel as int8 (it needs more
// bits, and ranks' scales differ), hence the all-gather: received bytes grow with p.
//
// Quantization of chunk v: s = max|v| / 127, q_i = floor(v_i/s + u_i) with u_i uniform in
// [0, 1). Unbiased: floor(t + u) is ⌈t⌉ with probability frac(t) and ⌊t⌋ otherwise, so
// E[q_i]·s = v_i exactly (up to the 24-bit resolution of u: |bias| ≤ 2^-24·s). |t| ≤ 127, so
// nothing is clipped. The variance per element is at most s²/4; the noise of different ranks is
// independent, so the average's noise shrinks with p.
//
// Random stream: u_i = codecUniform(key, i) with key = mix(seed, bucket, step, rank): a pure
// function of its inputs, so a run is reproducible, the CUDA kernel draws the same numbers, and
// ranks draw independent noise. Every rank decodes the same gathered bytes in the same order, so
// results are bit-identical everywhere.
//
// Error feedback is off by default (the quantizer is unbiased); ef=1 keeps the residual
// v − decode(encode(v)) per bucket. A chunk holding Inf or NaN decodes to NaN on every rank.
#include <cmath>
#include <cstring>

#include "compression/codec_base.h"
#include "compression/codec_registry.h"

namespace braid::detail {
namespace {

class Int8Codec final : public CodecBase {
 public:
  explicit Int8Codec(const CodecOptions& options)
      : CodecBase(options), ef_(options.errorFeedback.value_or(false)) {}

  CodecInfo info() const override { return {"int8", WireCollective::kAllGather, ef_, !ef_}; }

  Status allReduce(Communicator& comm, BucketId bucket, float* data, size_t count,
                   const std::vector<TensorShape>& shapes) override {
    return gatherAllReduce(comm, bucket, data, count, shapes);
  }

  size_t maxEncodedBytes(size_t count, const std::vector<TensorShape>&) const override {
    return chunks(count) * sizeof(float) + count;
  }

  Result<size_t> encode(BucketId bucket, const float* data, size_t count,
                        const std::vector<TensorShape>& shapes, float scale, void* wire,
                        size_t capacity) override {
    BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "input"));
    const size_t bytes = maxEncodedBytes(count, shapes);
    if (capacity < bytes) return invalidArgument("codec int8: wire buffer too small");
    BucketState& st = state(bucket);
    const uint32_t key = streamKey(bucket, stepFor(st.calls), rank_);
    st.calls++;
    float* v = compensatedInput(st, data, count, scale, ef_);
    const size_t nc = chunks(count);
    unsigned char* out = static_cast<unsigned char*>(wire);
    int8_t* q = reinterpret_cast<int8_t*>(out + nc * sizeof(float));
    const size_t c = options_.chunkSize;
    for (size_t j = 0; j < nc; ++j) {
      const size_t first = j * c;
      const size_t len = std::min(c, count - first);
      const float m = k_.maxAbs(v + first, len);
      float s = m / 127.0f;
      float inv = (m > 0.0f && std::isfinite(m)) ? 127.0f / m : 0.0f;
      if (!std::isfinite(m)) s = NAN;  // the chunk decodes to NaN: never silently finite
      std::memcpy(out + j * sizeof(float), &s, sizeof(float));
      if (std::isfinite(m)) {
        k_.quantizeInt8(q + first, v + first, len, inv, key, static_cast<uint32_t>(first));
      } else {
        std::memset(q + first, 0, len);
      }
      if (ef_) {
        // residual = v − q·s (v is the residual buffer).
        k_.addInt8(v + first, q + first, len, -s);
        if (!std::isfinite(m)) std::fill(v + first, v + first + len, 0.0f);
      }
    }
    return bytes;
  }

  Status decode(const void* wire, size_t bytes, int n, float* out, size_t count,
                const std::vector<TensorShape>& shapes) override {
    if (bytes != maxEncodedBytes(count, shapes) || n < 1) {
      return invalidArgument("codec int8: payload of " + std::to_string(bytes) +
                             " bytes does not fit " + std::to_string(count) + " elements");
    }
    std::fill(out, out + count, 0.0f);
    const size_t nc = chunks(count);
    const size_t c = options_.chunkSize;
    for (int r = 0; r < n; ++r) {
      const unsigned char* in = static_cast<const unsigned char*>(wire) + bytes * r;
      const int8_t* q = reinterpret_cast<const int8_t*>(in + nc * sizeof(float));
      for (size_t j = 0; j < nc; ++j) {
        float s;
        std::memcpy(&s, in + j * sizeof(float), sizeof(float));
        const size_t first = j * c;
        k_.addInt8(out + first, q + first, std::min(c, count - first), s);
      }
    }
    return Status::ok();
  }

 private:
  size_t chunks(size_t count) const { return (count + options_.chunkSize - 1) / options_.chunkSize; }
  bool ef_;
};

}  // namespace

std::unique_ptr<Codec> createInt8Codec(const CodecOptions& options) {
  return std::make_unique<Int8Codec>(options);
}

}  // namespace braid::detail
