// Internal: the element loops of the codecs, vectorized (AVX2/F16C) and chosen once per process
// like core/reduce: a call is one indirect call, then a tight loop. Built with
// -ffp-contract=off so that every ISA (and the CUDA kernels, built with --fmad=false) rounds the
// same way: int8 and sign payloads are bit-identical across CPU ISAs and the GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif

namespace braid::detail {

/// The counter-based random stream of int8's stochastic rounding: uniform in [0, 1) with 24
/// bits, a pure function of (key, index) so any element can be drawn in any order (CPU lanes,
/// GPU threads: the CUDA kernels call these same functions) with the same result.
BRAID_HOST_DEVICE inline uint32_t codecHash(uint32_t key, uint32_t index) {
  uint32_t h = index * 0x9E3779B9u + key;
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  h *= 0x846CA68Bu;
  h ^= h >> 16;
  return h;
}
BRAID_HOST_DEVICE inline float codecUniform(uint32_t key, uint32_t index) {
  return static_cast<float>(codecHash(key, index) >> 8) * (1.0f / 16777216.0f);
}
/// 64-bit mix (splitmix64) for deriving keys from (seed, bucket, step, rank).
inline uint64_t codecMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct CodecKernels {
  const char* isa;
  /// dst = f16(src·scale); finite |src·scale| > limit saturate to ±limit, Inf/NaN kept.
  void (*toHalf)(uint16_t* dst, const float* src, size_t n, float scale, float limit);
  /// dst = f32(src)·scale.
  void (*fromHalf)(float* dst, const uint16_t* src, size_t n, float scale);
  /// dst = bf16(src·scale) (round to nearest even, NaN quiet).
  void (*toBf16)(uint16_t* dst, const float* src, size_t n, float scale);
  void (*fromBf16)(float* dst, const uint16_t* src, size_t n, float scale);
  /// max |x| (NaN if any element is NaN); 0 for n = 0.
  float (*maxAbs)(const float* x, size_t n);
  /// Σ|x|, in 8 interleaved partial sums added in a fixed order.
  float (*absSum)(const float* x, size_t n);
  /// q[i] = floor(x[i]·inv + u(key, first + i)), u uniform in [0, 1) (|x·inv| ≤ 127).
  void (*quantizeInt8)(int8_t* q, const float* x, size_t n, float inv, uint32_t key,
                       uint32_t first);
  /// out[i] += q[i]·scale.
  void (*addInt8)(float* out, const int8_t* q, size_t n, float scale);
  /// bit i of bits (LSB first) = x[i] has its sign bit clear; n a multiple of 8.
  void (*packSigns)(uint8_t* bits, const float* x, size_t n);
  /// out[i] += bit ? scale : −scale; n a multiple of 8.
  void (*addSigns)(float* out, const uint8_t* bits, size_t n, float scale);
  /// Σ a[i]·b[i] in 8 interleaved partial sums added in a fixed order.
  float (*dot)(const float* a, const float* b, size_t n);
  /// y[i] += a·x[i].
  void (*axpy)(float* y, float a, const float* x, size_t n);
  /// #{i : m(x_i) ≥ thr} and those i in ascending order (collect; idx holds up to n), with
  /// m(v) = |v| and NaN counted as +Inf (top-k's magnitude).
  size_t (*countAtLeast)(const float* x, size_t n, float thr);
  size_t (*collectAtLeast)(uint32_t* idx, const float* x, size_t n, float thr);
  /// y[i] = a·x[i].
  void (*scaleCopy)(float* y, float a, const float* x, size_t n);
};

/// The kernels for this CPU (AVX2+F16C when supported, else portable).
const CodecKernels& codecKernels();
/// Test hook: 0 = portable, 1 = AVX2 (nullptr when the CPU lacks it).
const CodecKernels* codecKernelsForIsa(int isa);

}  // namespace braid::detail
