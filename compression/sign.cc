// sign: scaled sign with error feedback (1-bit SGD, EF-signSGD).
//
// Payload of n elements in chunks of c (CodecOptions::chunkSize, rounded up to a multiple of 8):
// ceil(n/c) f32 scales, then ceil(n/8) bytes of sign bits (LSB first, 1 = non-negative) — about
// 32x smaller than f32 (31x at c = 1024). Schedule: encode, all-gather of the payloads, decode
// every payload in rank order, ×1/p when averaging (received bytes grow with p).
//
// Encoding of chunk v = x + e (e: the bucket's residual): s = ‖v‖₁/len, v̂_i = s·sign(v_i)
// (+s for ±0, a bit cannot say 0); new residual e = v − v̂. s = mean |v| is the scale that
// minimises ‖v − s·sign(v)‖₂ for a fixed sign pattern. Error feedback (on by default; the
// compressor is biased) stores the residual in gradient units, as PowerSGD and DGC do; ef=0
// drops it (the convergence test's control). A chunk holding Inf/NaN gets scale NaN: it decodes
// to NaN on every rank and its residual is reset.
#include <cmath>
#include <cstring>

#include "compression/codec_base.h"
#include "compression/codec_registry.h"

namespace braid::detail {
namespace {

class SignCodec final : public CodecBase {
 public:
  explicit SignCodec(const CodecOptions& options)
      : CodecBase(options),
        ef_(options.errorFeedback.value_or(true)),
        chunk_((options.chunkSize + 7) / 8 * 8) {}

  CodecInfo info() const override { return {"sign", WireCollective::kAllGather, ef_, false}; }

  Status allReduce(Communicator& comm, BucketId bucket, float* data, size_t count,
                   const std::vector<TensorShape>& shapes) override {
    return gatherAllReduce(comm, bucket, data, count, shapes);
  }

  size_t maxEncodedBytes(size_t count, const std::vector<TensorShape>&) const override {
    return chunks(count) * sizeof(float) + (count + 7) / 8;
  }

  Result<size_t> encode(BucketId bucket, const float* data, size_t count,
                        const std::vector<TensorShape>& shapes, float scale, void* wire,
                        size_t capacity) override {
    BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "input"));
    const size_t bytes = maxEncodedBytes(count, shapes);
    if (capacity < bytes) return invalidArgument("codec sign: wire buffer too small");
    BucketState& st = state(bucket);
    st.calls++;
    float* v = compensatedInput(st, data, count, scale, ef_);
    const size_t nc = chunks(count);
    unsigned char* out = static_cast<unsigned char*>(wire);
    uint8_t* bits = out + nc * sizeof(float);
    for (size_t j = 0; j < nc; ++j) {
      const size_t first = j * chunk_;
      const size_t len = std::min(chunk_, count - first);
      float s = k_.absSum(v + first, len) / static_cast<float>(len);
      if (!std::isfinite(s)) s = NAN;
      std::memcpy(out + j * sizeof(float), &s, sizeof(float));
      pack(bits + first / 8, v + first, len);
      if (ef_) {
        if (std::isfinite(s)) {
          add(v + first, bits + first / 8, len, -s);  // residual = v − s·sign(v)
        } else {
          std::fill(v + first, v + first + len, 0.0f);
        }
      }
    }
    return bytes;
  }

  Status decode(const void* wire, size_t bytes, int n, float* out, size_t count,
                const std::vector<TensorShape>& shapes) override {
    if (bytes != maxEncodedBytes(count, shapes) || n < 1) {
      return invalidArgument("codec sign: payload of " + std::to_string(bytes) +
                             " bytes does not fit " + std::to_string(count) + " elements");
    }
    std::fill(out, out + count, 0.0f);
    const size_t nc = chunks(count);
    for (int r = 0; r < n; ++r) {
      const unsigned char* in = static_cast<const unsigned char*>(wire) + bytes * r;
      const uint8_t* bits = in + nc * sizeof(float);
      for (size_t j = 0; j < nc; ++j) {
        float s;
        std::memcpy(&s, in + j * sizeof(float), sizeof(float));
        const size_t first = j * chunk_;
        add(out + first, bits + first / 8, std::min(chunk_, count - first), s);
      }
    }
    return Status::ok();
  }

 private:
  size_t chunks(size_t count) const { return (count + chunk_ - 1) / chunk_; }

  // Whole bytes through the kernel, the last partial byte here (its unused bits stay 0).
  void pack(uint8_t* bits, const float* v, size_t len) const {
    const size_t body = len / 8 * 8;
    k_.packSigns(bits, v, body);
    if (body < len) {
      uint32_t b = 0;
      for (size_t i = body; i < len; ++i) b |= static_cast<uint32_t>(!std::signbit(v[i])) << (i - body);
      bits[body / 8] = static_cast<uint8_t>(b);
    }
  }
  void add(float* out, const uint8_t* bits, size_t len, float s) const {
    const size_t body = len / 8 * 8;
    k_.addSigns(out, bits, body, s);
    for (size_t i = body; i < len; ++i) out[i] += ((bits[body / 8] >> (i - body)) & 1u) ? s : -s;
  }

  bool ef_;
  size_t chunk_;
};

}  // namespace

std::unique_ptr<Codec> createSignCodec(const CodecOptions& options) {
  return std::make_unique<SignCodec>(options);
}

}  // namespace braid::detail
