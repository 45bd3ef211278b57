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

BRAID_INLINE float maxAbsLoop(const float* __restrict x, size_t n) {
  float m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      const float a = std::fabs(x[i + l]);
      m[l] = ((m[l] < a) | (a != a)) ? a : m[l];
    }
  }
  float r = 0;
  for (; i < n; ++i) {
    const float a = std::fabs(x[i]);
    r = ((r < a) | (a != a)) ? a : r;
  }
  for (int l = 0; l < 8; ++l) r = ((r < m[l]) | (m[l] != m[l])) ? m[l] : r;
  return r;
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

const CodecKernels kPortable = {
    "portable",       toHalfPortable,    fromHalfPortable,  toBf16Portable, fromBf16Portable,
    maxAbsPortable,   absSumPortable,    quantizePortable,  addInt8Portable,
    packSignsPortable, addSignsPortable, dotPortable,       axpyPortable,
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

BRAID_AVX2 void toBf16Avx2(uint16_t* d, const float* s, size_t n, float scale) {
  toBf16Loop(d, s, n, scale);
}
BRAID_AVX2 void fromBf16Avx2(float* d, const uint16_t* s, size_t n, float scale) {
  fromBf16Loop(d, s, n, scale);
}
BRAID_AVX2 float maxAbsAvx2(const float* x, size_t n) { return maxAbsLoop(x, n); }
BRAID_AVX2 float absSumAvx2(const float* x, size_t n) { return absSumLoop(x, n); }
BRAID_AVX2 void quantizeAvx2(int8_t* q, const float* x, size_t n, float inv, uint32_t key,
                             uint32_t first) {
  quantizeLoop(q, x, n, inv, key, first);
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

BRAID_AVX2 float dotAvx2(const float* a, const float* b, size_t n) { return dotLoop(a, b, n); }
BRAID_AVX2 void axpyAvx2(float* y, float a, const float* x, size_t n) { axpyLoop(y, a, x, n); }

const CodecKernels kAvx2 = {
    "avx2",        toHalfAvx2,     fromHalfAvx2,   toBf16Avx2,  fromBf16Avx2,
    maxAbsAvx2,    absSumAvx2,     quantizeAvx2,   addInt8Avx2, packSignsAvx2,
    addSignsAvx2,  dotAvx2,        axpyAvx2,
};

bool haveAvx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
         __builtin_cpu_supports("fma");
}
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
