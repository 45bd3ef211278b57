// topk: each rank sends its k largest-magnitude elements (after adding its residual), as
// (index, value) pairs; Deep Gradient Compression's selection with error feedback.
//
// Payload: k = max(1, ceil(ratio·n)) u32 indices, then k f32 values — 8k bytes, n/(2k) times
// smaller than f32 (50x at ratio 0.01). Fixed size on every rank, so one all-gather carries it
// (p·8k bytes received). Decode: out = 0, then out[idx] += value for rank 0's pairs in order,
// then rank 1's, ... : a fixed summation order, so every rank computes bit-identical results.
//
// Selection (per bucket, per step), as DGC does it:
//  1. v = x + e. Threshold estimate from a strided sample of |v| (sample ratio, at least 256
//     elements): the ceil(k·ns/n)-th largest sample.
//  2. While fewer than k elements reach the threshold, lower it (×0.8, at most 10 times, then
//     0). Then keep exactly k: the largest magnitudes among the candidates, ties to the lower
//     index (nth_element on (|v|, index)), and emit them sorted by index.
//  3. Error feedback (on by default): e = v with the sent entries zeroed. Off: e is not kept.
// NaN counts as the largest magnitude, so a NaN is sent (and reaches every rank's result).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compression/codec_base.h"
#include "compression/codec_registry.h"

namespace braid::detail {
namespace {

inline float magnitude(float v) {
  const float a = std::fabs(v);
  return a != a ? INFINITY : a;
}

class TopKCodec final : public CodecBase {
 public:
  explicit TopKCodec(const CodecOptions& options)
      : CodecBase(options), ef_(options.errorFeedback.value_or(true)) {}

  CodecInfo info() const override { return {"topk", WireCollective::kAllGather, ef_, false}; }

  Status allReduce(Communicator& comm, BucketId bucket, float* data, size_t count,
                   const std::vector<TensorShape>& shapes) override {
    return gatherAllReduce(comm, bucket, data, count, shapes);
  }

  size_t maxEncodedBytes(size_t count, const std::vector<TensorShape>&) const override {
    return kFor(count) * 8;
  }

  Result<size_t> encode(BucketId bucket, const float* data, size_t count,
                        const std::vector<TensorShape>& shapes, float scale, void* wire,
                        size_t capacity) override {
    BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "input"));
    const size_t bytes = maxEncodedBytes(count, shapes);
    if (capacity < bytes) return invalidArgument("codec topk: wire buffer too small");
    if (count > UINT32_MAX) return invalidArgument("codec topk: buckets hold at most 2^32 - 1 elements");
    BucketState& st = state(bucket);
    st.calls++;
    float* v = compensatedInput(st, data, count, scale, ef_);
    const size_t k = kFor(count);
    uint32_t* idx = static_cast<uint32_t*>(wire);
    float* val = reinterpret_cast<float*>(idx + k);
    if (count == 0) {  // k = 1: one (0, 0) pair, skipped by decode
      idx[0] = 0;
      val[0] = 0.0f;
      return bytes;
    }
    select(v, count, k, idx);
    for (size_t j = 0; j < k; ++j) {
      val[j] = v[idx[j]];
      if (ef_) v[idx[j]] = 0.0f;
    }
    return bytes;
  }

  Status decode(const void* wire, size_t bytes, int n, float* out, size_t count,
                const std::vector<TensorShape>& shapes) override {
    if (bytes != maxEncodedBytes(count, shapes) || n < 1) {
      return invalidArgument("codec topk: payload of " + std::to_string(bytes) +
                             " bytes does not fit " + std::to_string(count) + " elements");
    }
    std::fill(out, out + count, 0.0f);
    const size_t k = kFor(count);
    for (int r = 0; r < n; ++r) {
      const uint32_t* idx = reinterpret_cast<const uint32_t*>(
          static_cast<const unsigned char*>(wire) + bytes * static_cast<size_t>(r));
      const float* val = reinterpret_cast<const float*>(idx + k);
      for (size_t j = 0; j < k; ++j) {
        if (idx[j] >= count) {
          if (count == 0 && idx[j] == 0) continue;
          return internalError("codec topk: payload " + std::to_string(r) + " names element " +
                               std::to_string(idx[j]) + " of a " + std::to_string(count) +
                               "-element bucket (corrupt or mismatched payload)");
        }
        out[idx[j]] += val[j];
      }
    }
    return Status::ok();
  }

 private:
  size_t kFor(size_t count) const {
    const double k = std::ceil(options_.topkRatio * static_cast<double>(count));
    return std::max<size_t>(1, std::min<size_t>(count, static_cast<size_t>(k)));
  }

  // Fills idx[0..k) with the indices of the k largest magnitudes, ascending.
  void select(const float* v, size_t n, size_t k, uint32_t* idx) {
    float thr = 0.0f;
    if (k < n) thr = estimateThreshold(v, n, k);
    size_t c = k_.countAtLeast(v, n, thr);
    for (int round = 0; c < k && round < 10; ++round) {
      thr *= 0.8f;
      c = k_.countAtLeast(v, n, thr);
    }
    if (c < k) thr = 0.0f;  // every element qualifies (|v| ≥ 0)
    if (cand_.size() < n) cand_.resize(n);  // grows once per bucket size, never shrinks
    const size_t found = k_.collectAtLeast(cand_.data(), v, n, thr);
    if (found > k) {
      auto larger = [v](uint32_t a, uint32_t b) {
        const float ma = magnitude(v[a]), mb = magnitude(v[b]);
        return ma > mb || (ma == mb && a < b);
      };
      const auto first = cand_.begin();
      std::nth_element(first, first + static_cast<std::ptrdiff_t>(k),
                       first + static_cast<std::ptrdiff_t>(found), larger);
      std::sort(first, first + static_cast<std::ptrdiff_t>(k));
    }
    std::memcpy(idx, cand_.data(), k * sizeof(uint32_t));
  }

  float estimateThreshold(const float* v, size_t n, size_t k) {
    size_t ns = static_cast<size_t>(std::ceil(options_.topkSampleRatio * static_cast<double>(n)));
    ns = std::min(n, std::max<size_t>(ns, 256));
    const size_t stride = n / ns;
    sample_.resize(ns);
    for (size_t i = 0; i < ns; ++i) sample_[i] = magnitude(v[i * stride]);
    size_t ks = static_cast<size_t>(std::ceil(static_cast<double>(k) * ns / n));
    ks = std::max<size_t>(1, std::min(ks, ns));
    std::nth_element(sample_.begin(), sample_.begin() + static_cast<std::ptrdiff_t>(ns - ks),
                     sample_.end());
    return sample_[ns - ks];
  }

  bool ef_;
  std::vector<uint32_t> cand_;
  std::vector<float> sample_;
};

}  // namespace

std::unique_ptr<Codec> createTopKCodec(const CodecOptions& options) {
  return std::make_unique<TopKCodec>(options);
}

}  // namespace braid::detail
