// Codec element loops. As in core/reduce.cc: each loop is a template inlined into a portable
// instantiation and a target("avx2,f16c,fma") one; the compiler vectorizes the plain loops, and
// f16 conversion, sign packing and unpacking get hand-written AVX2 bodies (F16C and movemask are
// nothing the vectorizer finds). The scalar f16 conversions are core's (core/reduce.h).
#include "compression/kernels.h"

#include <cmath>
#include <cstring>

#include "core/reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BRAID_CODEC_X86 1
#else
#define BRAID_CODEC_X86 0
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#define BRAID_INLINE inline __attribute__((always_inline))
#define BRAID_AVX2 __attribute__((target("avx2,f16c,fma")))

namespace braid::detail {
namespace {

BRAID_INLINE uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

BRAID_INLINE float clampFinite(float v, float limit) {
  // Saturate finite values beyond ±limit; Inf and NaN stay (|v| < Inf is false for both).
  const float a = std::fabs(v);
  return (a > limit && a < INFINITY) ? std::copysign(limit, v) : v;
}

// bf16 round-to-nearest-even, written without branches so that it vectorizes.
BRAID_INLINE uint16_t toBf16One(float f) {
  const uint32_t x = bitsOf(f);
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  const uint32_t quiet = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7FFFFFFFu) > 0x7F800000u ? quiet : rounded);
}

BRAID_INLINE float fromBf16One(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// ---------------------------------------------------------------------------------------------
// Generic loops.

BRAID_INLINE void toBf16Loop(uint16_t* __restrict d, const float* __restrict s, size_t n,
                             float scale) {
  for (size_t i = 0; i < n; ++i) d[i] = toBf16One(s[i] * scale);
}

BRAID_INLINE void fromBf16Loop(float* __restrict d, const uint16_t* __restrict s, size_t n,
                               float scale) {
  for (size_t i = 0; i < n; ++i) d[i] = fromBf16One(s[i]) * scale;
}

// max |x| with NaN tracked apart from the maximum (a compare-select the vectorizer turns into
// max instructions, which would otherwise drop NaNs).
BRAID_INLINE float maxAbsLoop(const float* __restrict x, size_t n) {
  float m = 0.0f;
  int nan = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    m = m < a ? a : m;
    nan |= a != a;
  }
  return nan ? NAN : m;
}

BRAID_INLINE float absSumLoop(const float* __restrict x, size_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) s[l] += std::fabs(x[i + l]);
  }
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) r += std::fabs(x[i]);
  return r;
}

BRAID_INLINE float dotLoop(const float* __restrict a, const float* __restrict b, size_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) s[l] += a[i + l] * b[i + l];
  }
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

BRAID_INLINE void axpyLoop(float* __restrict y, float a, const float* __restrict x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

BRAID_INLINE bool atLeast(float v, float thr) {
  const float a = std::fabs(v);
  return (a >= thr) | (a != a);
}

BRAID_INLINE size_t countAtLeastLoop(const float* __restrict x, size_t n, float thr) {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) c += atLeast(x[i], thr);
  return c;
}

BRAID_INLINE size_t collectAtLeastLoop(uint32_t* __restrict idx, const float* __restrict x,
                                       size_t n, float thr) {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) {
    if (atLeast(x[i], thr)) idx[c++] = static_cast<uint32_t>(i);
  }
  return c;
}

// y may equal x (scaleInPlace): no __restrict here.
BRAID_INLINE void scaleCopyLoop(float* y, float a, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = a * x[i];
}

BRAID_INLINE void quantizeLoop(int8_t* __restrict q, const float* __restrict x, size_t n,
                               float inv, uint32_t key, uint32_t first) {
  for (size_t i = 0; i < n; ++i) {
    const float u = codecUniform(key, first + static_cast<uint32_t>(i));
    const float v = std::floor(x[i] * inv + u);
    // |x·inv| ≤ 127 by construction; the clamp only guards rounding at the edge.
    const float c = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
    q[i] = static_cast<int8_t>(static_cast<int32_t>(c));
  }
}

BRAID_INLINE void addInt8Loop(float* __restrict out, const int8_t* __restrict q, size_t n,
                              float scale) {
  for (size_t i = 0; i < n; ++i) out[i] += static_cast<float>(q[i]) * scale;
}

BRAID_INLINE void packSignsLoop(uint8_t* __restrict bits, const float* __restrict x, size_t n) {
  for (size_t b = 0; b < n / 8; ++b) {
    uint32_t v = 0;
    for (uint32_t l = 0; l < 8; ++l) v |= ((bitsOf(x[b * 8 + l]) >> 31) ^ 1u) << l;
    bits[b] = static_cast<uint8_t>(v);
  }
}

BRAID_INLINE void addSignsLoop(float* __restrict out, const uint8_t* __restrict bits, size_t n,
                               float scale) {
  for (size_t b = 0; b < n / 8; ++b) {
    const uint32_t v = bits[b];
    for (uint32_t l = 0; l < 8; ++l) out[b * 8 + l] += ((v >> l) & 1u) ? scale : -scale;
  }
}

// ---------------------------------------------------------------------------------------------
// Portable instantiations.

void toHalfPortable(uint16_t* d, const float* s, size_t n, float scale, float limit) {
  for (size_t i = 0; i < n; ++i) d[i] = floatToHalf(clampFinite(s[i] * scale, limit));
}
void fromHalfPortable(float* d, const uint16_t* s, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) d[i] = halfToFloat(s[i]) * scale;
}
void toBf16Portable(uint16_t* d, const float* s, size_t n, float scale) {
  toBf16Loop(d, s, n, scale);
}
void fromBf16Portable(float* d, const uint16_t* s, size_t n, float scale) {
  fromBf16Loop(d, s, n, scale);
}
float maxAbsPortable(const float* x, size_t n) { return maxAbsLoop(x, n); }
float absSumPortable(const float* x, size_t n) { return absSumLoop(x, n); }
void quantizePortable(int8_t* q, const float* x, size_t n, float inv, uint32_t key,
                      uint32_t first) {
  quantizeLoop(q, x, n, inv, key, first);
}
void addInt8Portable(float* out, const int8_t* q, size_t n, float scale) {
  addInt8Loop(out, q, n, scale);
}
void packSignsPortable(uint8_t* bits, const float* x, size_t n) { packSignsLoop(bits, x, n); }
void addSignsPortable(float* out, const uint8_t* bits, size_t n, float scale) {
  addSignsLoop(out, bits, n, scale);
}
float dotPortable(const float* a, const float* b, size_t n) { return dotLoop(a, b, n); }
void axpyPortable(float* y, float a, const float* x, size_t n) { axpyLoop(y, a, x, n); }
void scaleCopyPortable(float* y, float a, const float* x, size_t n) { scaleCopyLoop(y, a, x, n); }
size_t countAtLeastPortable(const float* x, size_t n, float thr) {
  return countAtLeastLoop(x, n, thr);
}
size_t collectAtLeastPortable(uint32_t* idx, const float* x, size_t n, float thr) {
  return collectAtLeastLoop(idx, x, n, thr);
}

const CodecKernels kPortable = {
    "portable",       toHalfPortable,    fromHalfPortable,  toBf16Portable, fromBf16Portable,
    maxAbsPortable,   absSumPortable,    quantizePortable,  addInt8Portable,
    packSignsPortable, addSignsPortable, dotPortable,       axpyPortable,
    countAtLeastPortable, collectAtLeastPortable, scaleCopyPortable,
};

#if BRAID_CODEC_X86
// ---------------------------------------------------------------------------------------------
// AVX2 instantiations.

BRAID_AVX2 void toHalfAvx2(uint16_t* d, const float* s, size_t n, float scale, float limit) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256 vl = _mm256_set1_ps(limit);
  const __m256 inf = _mm256_set1_ps(INFINITY);
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + i), vs);
    const __m256 a = _mm256_and_ps(v, absMask);
    const __m256 over = _mm256_and_ps(_mm256_cmp_ps(a, vl, _CMP_GT_OQ),
                                      _mm256_cmp_ps(a, inf, _CMP_LT_OQ));
    const __m256 sat = _mm256_or_ps(_mm256_andnot_ps(absMask, v), vl);
    v = _mm256_blendv_ps(v, sat, over);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) d[i] = floatToHalf(clampFinite(s[i] * scale, limit));
}

BRAID_AVX2 void fromHalfAvx2(float* d, const uint16_t* s, size_t n, float scale) {
  const __m256 vs = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_ps(d + i, _mm256_mul_ps(v, vs));
  }
  for (; i < n; ++i) d[i] = halfToFloat(s[i]) * scale;
}

// 16 floats per step: round to nearest even in 32-bit lanes, NaN forced quiet, then pack the
// high halves (packus interleaves 128-bit lanes; the permute restores element order).
BRAID_AVX2 inline __m256i bf16Bits(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)),
                                         _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

BRAID_AVX2 void toBf16Avx2(uint16_t* d, const float* s, size_t n, float scale) {
  const __m256 vs = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = bf16Bits(_mm256_mul_ps(_mm256_loadu_ps(s + i), vs));
    const __m256i b = bf16Bits(_mm256_mul_ps(_mm256_loadu_ps(s + i + 8), vs));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), packed);
  }
  toBf16Loop(d + i, s + i, n - i, scale);
}
BRAID_AVX2 void fromBf16Avx2(float* d, const uint16_t* s, size_t n, float scale) {
  fromBf16Loop(d, s, n, scale);
}
BRAID_AVX2 float maxAbsAvx2(const float* x, size_t n) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m0 = _mm256_setzero_ps(), m1 = m0, nan = m0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), absMask);
    const __m256 b = _mm256_and_ps(_mm256_loadu_ps(x + i + 8), absMask);
    m0 = _mm256_max_ps(m0, a);  // maxps keeps m0 when a is NaN; NaNs are collected below
    m1 = _mm256_max_ps(m1, b);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(m0, m1));
  float m = maxAbsLoop(x + i, n - i);
  if (m != m || _mm256_movemask_ps(nan) != 0) return NAN;
  for (float l : lanes) m = m < l ? l : m;
  return m;
}
// absSum and dot: one 8-lane accumulator, the same order as the portable loops (lane l sums
// elements l, l+8, ...; then ((0+1)+(2+3))+((4+5)+(6+7)); then the tail), so results are equal.
BRAID_AVX2 inline float finishLanes(__m256 acc, const float* tailA, const float* tailB,
                                    size_t tail, bool abs) {
  alignas(32) float s[8];
  _mm256_store_ps(s, acc);
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (size_t i = 0; i < tail; ++i) r += abs ? std::fabs(tailA[i]) : tailA[i] * tailB[i];
  return r;
}

BRAID_AVX2 float absSumAvx2(const float* x, size_t n) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 acc = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_and_ps(_mm256_loadu_ps(x + i), absMask));
  return finishLanes(acc, x + i, nullptr, n - i, true);
}
// 8 lanes of codecUniform: the same integer hash with 32-bit multiplies, then the same
// conversion (h >> 8 < 2^24 converts exactly) and the same f32 operations as the scalar loop.
BRAID_AVX2 void quantizeAvx2(int8_t* q, const float* x, size_t n, float inv, uint32_t key,
                             uint32_t first) {
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256 unit = _mm256_set1_ps(1.0f / 16777216.0f);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i golden = _mm256_set1_epi32(static_cast<int>(0x9E3779B9u));
  const __m256i vkey = _mm256_set1_epi32(static_cast<int>(key));
  const __m256i m1 = _mm256_set1_epi32(0x7FEB352D);
  const __m256i m2 = _mm256_set1_epi32(static_cast<int>(0x846CA68Bu));
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i idx =
        _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first + static_cast<uint32_t>(i))), lane);
    __m256i h = _mm256_add_epi32(_mm256_mullo_epi32(idx, golden), vkey);
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    h = _mm256_mullo_epi32(h, m1);
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 15));
    h = _mm256_mullo_epi32(h, m2);
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), unit);
    const __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
    __m256 v = _mm256_floor_ps(_mm256_add_ps(t, u));
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256i qi = _mm256_cvttps_epi32(v);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(w16, w16));
  }
  quantizeLoop(q + i, x + i, n - i, inv, key, first + static_cast<uint32_t>(i));
}
BRAID_AVX2 void addInt8Avx2(float* out, const int8_t* q, size_t n, float scale) {
  addInt8Loop(out, q, n, scale);
}

BRAID_AVX2 void packSignsAvx2(uint8_t* bits, const float* x, size_t n) {
  for (size_t b = 0; b < n / 8; ++b) {
    bits[b] = static_cast<uint8_t>(~_mm256_movemask_ps(_mm256_loadu_ps(x + b * 8)));
  }
}

BRAID_AVX2 void addSignsAvx2(float* out, const uint8_t* bits, size_t n, float scale) {
  const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 pos = _mm256_set1_ps(scale);
  const __m256 neg = _mm256_set1_ps(-scale);
  for (size_t b = 0; b < n / 8; ++b) {
    const __m256i v = _mm256_and_si256(_mm256_set1_epi32(bits[b]), lane);
    const __m256 set = _mm256_castsi256_ps(_mm256_cmpeq_epi32(v, lane));
    float* o = out + b * 8;
    _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), _mm256_blendv_ps(neg, pos, set)));
  }
}

BRAID_AVX2 float dotAvx2(const float* a, const float* b, size_t n) {
  __m256 acc = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  return finishLanes(acc, a + i, b + i, n - i, false);
}
BRAID_AVX2 void axpyAvx2(float* y, float a, const float* x, size_t n) { axpyLoop(y, a, x, n); }
// 8 lanes: |x| ≥ thr or NaN (unordered compare), as a bit mask.
BRAID_AVX2 inline unsigned atLeastMask(const float* x, __m256 thr, __m256 absMask) {
  const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x), absMask);
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, thr, _CMP_NLT_UQ)));
}

BRAID_AVX2 size_t countAtLeastAvx2(const float* x, size_t n, float thr) {
  const __m256 vt = _mm256_set1_ps(thr);
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  size_t c = 0, i = 0;
  for (; i + 8 <= n; i += 8) c += static_cast<size_t>(__builtin_popcount(atLeastMask(x + i, vt, absMask)));
  return c + countAtLeastLoop(x + i, n - i, thr);
}

BRAID_AVX2 size_t collectAtLeastAvx2(uint32_t* idx, const float* x, size_t n, float thr) {
  const __m256 vt = _mm256_set1_ps(thr);
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  size_t c = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    for (unsigned m = atLeastMask(x + i, vt, absMask); m != 0; m &= m - 1) {
      idx[c++] = static_cast<uint32_t>(i) + static_cast<uint32_t>(__builtin_ctz(m));
    }
  }
  const size_t tail = collectAtLeastLoop(idx + c, x + i, n - i, thr);
  for (size_t j = c; j < c + tail; ++j) idx[j] += static_cast<uint32_t>(i);
  return c + tail;
}

BRAID_AVX2 void scaleCopyAvx2(float* y, float a, const float* x, size_t n) {
  scaleCopyLoop(y, a, x, n);
}

const CodecKernels kAvx2 = {
    "avx2",        toHalfAvx2,     fromHalfAvx2,   toBf16Avx2,  fromBf16Avx2,
    maxAbsAvx2,    absSumAvx2,     quantizeAvx2,   addInt8Avx2, packSignsAvx2,
    addSignsAvx2,  dotAvx2,        axpyAvx2,       countAtLeastAvx2, collectAtLeastAvx2,
    scaleCopyAvx2,
};

bool haveAvx2() { return cpuHasAvx2Kernels(); }
#endif

}  // namespace

const CodecKernels* codecKernelsForIsa(int isa) {
  if (isa == 0) return &kPortable;
#if BRAID_CODEC_X86
  if (isa == 1 && haveAvx2()) return &kAvx2;
#endif
  return nullptr;
}

const CodecKernels& codecKernels() {
#if BRAID_CODEC_X86
  static const CodecKernels* k = haveAvx2() ? &kAvx2 : &kPortable;
  return *k;
#else
  return kPortable;
#endif
}

}  // namespace braid::detail
