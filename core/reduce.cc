// Element-wise reduction kernels.
//
// Structure: every (dtype, op) pair is one template instantiation of a plain loop over the
// elements, compiled twice: once for the baseline ISA (portable; SSE2 on x86-64) and once with
// target("avx2,f16c,fma"). The compiler vectorizes these loops itself; only f16 and bf16 get
// hand-written AVX2 bodies, because their conversions to f32 and back are not something the
// vectorizer finds on its own (F16C instructions for f16, shift-and-round for bf16). The ISA is
// chosen once per process (__builtin_cpu_supports), so a kernel call is one indirect call and a
// loop with no per-element dispatch.
//
// Aliasing: dst may equal a, b or both, but never overlap them partially. Each case gets its own
// loop so that the pointers that do not alias can be declared __restrict (which lets the
// vectorizer skip its runtime overlap checks), and the exact-alias cases stay correct because
// element i is read before element i is written.
//
// Semantics:
//  - Integer sum and prod wrap modulo 2^bits (computed in the unsigned type: no signed UB).
//  - Float sum and prod are IEEE (one rounding per element); f16/bf16 are widened to f32, reduced
//    and rounded back to nearest-even. f32 has at least 2p+2 bits for the narrow formats' p (11 and
//    8), so this double rounding gives the correctly rounded f16/bf16 sum, product or quotient.
//  - Float max/min propagate NaN: if either input is NaN the result is NaN. An fmax-style "ignore
//    the NaN" would let a NaN that appeared on one rank vanish from the reduced result. Between
//    -0 and +0 the result is either zero (sign unspecified).
//  - kAvg reduces as kSum; scaleForAvg divides once at the end (integers truncate toward zero).
#include "core/reduce.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BRAID_REDUCE_X86 1
#else
#define BRAID_REDUCE_X86 0
#endif

// The build default is -O2, whose "very cheap" vectorizer cost model only takes loops that need
// no scalar epilogue, i.e. none of ours. O3 applies to the functions below this line only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#define BRAID_INLINE inline __attribute__((always_inline))
#define BRAID_AVX2 __attribute__((target("avx2,f16c,fma")))

namespace braid {
namespace detail {
// Test hooks (declared by tests/unit/core/reduce_test.cc, not part of the public API): run a
// kernel of a given ISA regardless of what the CPU dispatch picked.
enum class ReduceIsa : int { kPortable = 0, kAvx2 = 1 };
bool reduceIsaSupported(ReduceIsa isa);
ReduceFn getReduceFnForIsa(ReduceIsa isa, DataType type, ReduceOp op);
void scaleForAvgForIsa(ReduceIsa isa, DataType type, void* buf, size_t count, int n);
}  // namespace detail

namespace {

// ---------------------------------------------------------------------------------------------
// Scalar conversions (portable, bit-exact with F16C and with the AVX2 bf16 path).

BRAID_INLINE uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

BRAID_INLINE float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

BRAID_INLINE float halfToFloatImpl(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in f32.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return bitsFloat(floatBits(v) | sign);
  }
  if (exp == 31) return bitsFloat(sign | 0x7F800000u | (mant << 13));  // Inf, NaN (payload kept)
  return bitsFloat(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

BRAID_INLINE uint16_t floatToHalfImpl(float f) {
  uint32_t x = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) {
    // NaN becomes a quiet NaN with the top payload bits (as vcvtps2ph does); Inf stays Inf.
    if (x > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((x >> 13) & 0x3FFu));
    return static_cast<uint16_t>(sign | 0x7C00u);
  }
  // 65520 = halfway between 65504 (largest half) and 65536; the tie goes to the even neighbour,
  // which is the "next" value Inf.
  if (x >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (x >= 0x38800000u) {
    // Normal half: rebias the exponent and round the 13 dropped bits to nearest-even. A carry out
    // of the mantissa correctly bumps the exponent.
    x += ((15u - 127u) << 23) + 0xFFFu + ((x >> 13) & 1u);
    return static_cast<uint16_t>(sign | (x >> 13));
  }
  // Subnormal half (or zero): value / 2^-24 = m * 2^(e - 126), with m the 24-bit significand.
  const uint32_t e = x >> 23;
  if (e < 101) return sign;  // below half of the smallest subnormal (2^-25): rounds to zero
  const uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..25
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;  // may carry into the smallest normal
  return static_cast<uint16_t>(sign | q);
}

BRAID_INLINE float bfloat16ToFloatImpl(uint16_t b) {
  return bitsFloat(static_cast<uint32_t>(b) << 16);
}

BRAID_INLINE uint16_t floatToBfloat16Impl(float f) {
  const uint32_t x = floatBits(f);
  // NaN: truncation could clear every payload bit and turn it into Inf, so force it quiet.
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  // Round to nearest-even on the 16 dropped bits; overflow rounds into Inf as it should.
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// ---------------------------------------------------------------------------------------------
// Element codecs: how a stored element becomes the type the operator works in.

template <typename T>
struct Native {
  using Storage = T;
  using Compute = T;
  static BRAID_INLINE Compute load(Storage s) { return s; }
  static BRAID_INLINE Storage store(Compute c) { return c; }
};

struct Half {
  using Storage = uint16_t;
  using Compute = float;
  static BRAID_INLINE Compute load(Storage s) { return halfToFloatImpl(s); }
  static BRAID_INLINE Storage store(Compute c) { return floatToHalfImpl(c); }
};

struct BFloat {
  using Storage = uint16_t;
  using Compute = float;
  static BRAID_INLINE Compute load(Storage s) { return bfloat16ToFloatImpl(s); }
  static BRAID_INLINE Storage store(Compute c) { return floatToBfloat16Impl(c); }
};

// ---------------------------------------------------------------------------------------------
// Operators on the compute type.

struct OpSum {
  template <typename T>
  static BRAID_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};

struct OpProd {
  template <typename T>
  static BRAID_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return a * b;
    }
  }
};

// The float forms are written as one select on a bitwise-or of two compares so that the
// vectorizer turns them into cmp/cmp/or/blend (a branch or || would block if-conversion).
struct OpMax {
  template <typename T>
  static BRAID_INLINE T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return ((a < b) | (b != b)) ? b : a;  // b wins when larger or NaN; a NaN a is kept
    } else {
      return a < b ? b : a;
    }
  }
};

struct OpMin {
  template <typename T>
  static BRAID_INLINE T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return ((b < a) | (b != b)) ? b : a;
    } else {
      return b < a ? b : a;
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Generic loops, one per aliasing case.

template <class C, class Op>
BRAID_INLINE void loopDistinct(typename C::Storage* __restrict d,
                               const typename C::Storage* __restrict a,
                               const typename C::Storage* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = C::store(Op::apply(C::load(a[i]), C::load(b[i])));
}

template <class C, class Op>
BRAID_INLINE void loopIntoA(typename C::Storage* __restrict d,
                            const typename C::Storage* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = C::store(Op::apply(C::load(d[i]), C::load(b[i])));
}

template <class C, class Op>
BRAID_INLINE void loopIntoB(typename C::Storage* __restrict d,
                            const typename C::Storage* __restrict a, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = C::store(Op::apply(C::load(a[i]), C::load(d[i])));
}

template <class C, class Op>
BRAID_INLINE void loopSelf(typename C::Storage* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const typename C::Compute v = C::load(d[i]);
    d[i] = C::store(Op::apply(v, v));
  }
}

template <class C, class Op>
BRAID_INLINE void reduceAnyAlias(void* dst, const void* a, const void* b, size_t n) {
  using S = typename C::Storage;
  S* d = static_cast<S*>(dst);
  const S* x = static_cast<const S*>(a);
  const S* y = static_cast<const S*>(b);
  if (d == x) {
    if (d == y) {
      loopSelf<C, Op>(d, n);
    } else {
      loopIntoA<C, Op>(d, y, n);
    }
  } else if (d == y) {
    loopIntoB<C, Op>(d, x, n);
  } else {
    loopDistinct<C, Op>(d, x, y, n);  // a == b is fine here: restrict only forbids writes
  }
}

template <class C>
BRAID_INLINE void scaleLoop(typename C::Storage* __restrict buf, size_t n, int k) {
  using S = typename C::Storage;
  using T = typename C::Compute;
  if constexpr (std::is_floating_point_v<T>) {
    // A true division (not a multiply by 1/k) so the result is the correctly rounded quotient.
    const T div = static_cast<T>(k);
    for (size_t i = 0; i < n; ++i) buf[i] = C::store(C::load(buf[i]) / div);
  } else if constexpr (sizeof(T) <= 4) {
    // Through double, which vectorizes where integer division does not. Exact: |x| < 2^32 and
    // k <= 2^31, so x/k is off an integer by at least 1/k, far above double's rounding error.
    // The truncating conversion goes through int32 (vectorizable; 64-bit needs AVX-512): with
    // k >= 2 even a uint32 quotient is below 2^31.
    const double div = static_cast<double>(k);
    for (size_t i = 0; i < n; ++i) {
      buf[i] = static_cast<S>(static_cast<int32_t>(static_cast<double>(buf[i]) / div));
    }
  } else {
    const T div = static_cast<T>(k);
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<S>(buf[i] / div);  // truncates to zero
  }
}

template <class C, class Op>
void reducePortable(void* dst, const void* a, const void* b, size_t n) {
  reduceAnyAlias<C, Op>(dst, a, b, n);
}

template <class C>
void scalePortable(void* buf, size_t n, int k) {
  scaleLoop<C>(static_cast<typename C::Storage*>(buf), n, k);
}

#if BRAID_REDUCE_X86
// ---------------------------------------------------------------------------------------------
// AVX2 versions. The generic loops are inlined into these target("avx2") functions (inlining a
// baseline function into a wider-ISA one is allowed) and vectorized for 256-bit registers.

template <class C, class Op>
BRAID_AVX2 void reduceAvx2(void* dst, const void* a, const void* b, size_t n) {
  reduceAnyAlias<C, Op>(dst, a, b, n);
}

template <class C>
BRAID_AVX2 void scaleAvx2(void* buf, size_t n, int k) {
  scaleLoop<C>(static_cast<typename C::Storage*>(buf), n, k);
}

// 8 packed f32 operators, same semantics as the scalar ones (NaN-propagating max/min).
template <class Op>
struct VecOp;
template <>
struct VecOp<OpSum> {
  static BRAID_INLINE BRAID_AVX2 __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
};
template <>
struct VecOp<OpProd> {
  static BRAID_INLINE BRAID_AVX2 __m256 apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
};
template <>
struct VecOp<OpMax> {
  static BRAID_INLINE BRAID_AVX2 __m256 apply(__m256 a, __m256 b) {
    const __m256 takeB =
        _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
    return _mm256_blendv_ps(a, b, takeB);
  }
};
template <>
struct VecOp<OpMin> {
  static BRAID_INLINE BRAID_AVX2 __m256 apply(__m256 a, __m256 b) {
    const __m256 takeB =
        _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_LT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
    return _mm256_blendv_ps(a, b, takeB);
  }
};

// 8 f16 <-> 8 f32 with F16C.
struct HalfVec {
  using Scalar = Half;
  static BRAID_INLINE BRAID_AVX2 __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static BRAID_INLINE BRAID_AVX2 void store(uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static BRAID_INLINE BRAID_AVX2 void load16(const uint16_t* p, __m256* lo, __m256* hi) {
    *lo = load(p);
    *hi = load(p + 8);
  }
  static BRAID_INLINE BRAID_AVX2 void store16(uint16_t* p, __m256 lo, __m256 hi) {
    store(p, lo);
    store(p + 8, hi);
  }
};

// bf16 <-> f32: widening is a 16-bit shift; narrowing rounds to nearest-even by adding 0x7FFF plus
// the lowest kept bit, keeps NaNs quiet, and packs 32->16 bits.
//
// The 16-element forms avoid the cross-lane work: unpacklo/unpackhi against zero widen a
// 256-bit load into elements {0-3, 8-11} and {4-7, 12-15} (the shift comes free), and packus,
// which works per 128-bit lane, puts exactly that split back in order. Operators are
// element-wise, so computing in the permuted order is fine.
struct BFloatVec {
  using Scalar = BFloat;
  static BRAID_INLINE BRAID_AVX2 __m256 load(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  // 8 x u32, each holding the rounded bf16 bits in its low half.
  static BRAID_INLINE BRAID_AVX2 __m256i round(__m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i quietNan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256i isNan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(rounded, quietNan, isNan);
  }
  static BRAID_INLINE BRAID_AVX2 void store(uint16_t* p, __m256 v) {
    const __m256i r = round(v);
    // packus pairs lanes: [r0-3, r0-3 | r4-7, r4-7]; the qword permute gathers r0-7 low.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  static BRAID_INLINE BRAID_AVX2 void load16(const uint16_t* p, __m256* lo, __m256* hi) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i zero = _mm256_setzero_si256();
    *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, w));  // elements 0-3, 8-11
    *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, w));  // elements 4-7, 12-15
  }
  static BRAID_INLINE BRAID_AVX2 void store16(uint16_t* p, __m256 lo, __m256 hi) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_packus_epi32(round(lo), round(hi)));
  }
};

// 16-bit float kernels: 16 elements per iteration, then 8, then a scalar tail with the
// bit-identical scalar conversions. Every block loads both inputs before it stores, so dst == a
// or dst == b is safe without separate loops.
template <class V, class Op>
BRAID_AVX2 void reduce16Avx2(void* dst, const void* a, const void* b, size_t n) {
  using C = typename V::Scalar;
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a0, a1, b0, b1;
    V::load16(x + i, &a0, &a1);
    V::load16(y + i, &b0, &b1);
    V::store16(d + i, VecOp<Op>::apply(a0, b0), VecOp<Op>::apply(a1, b1));
  }
  if (i + 8 <= n) {
    V::store(d + i, VecOp<Op>::apply(V::load(x + i), V::load(y + i)));
    i += 8;
  }
  for (; i < n; ++i) d[i] = C::store(Op::apply(C::load(x[i]), C::load(y[i])));
}

template <class V>
BRAID_AVX2 void scale16Avx2(void* buf, size_t n, int k) {
  using C = typename V::Scalar;
  uint16_t* p = static_cast<uint16_t*>(buf);
  const float kf = static_cast<float>(k);
  const __m256 div = _mm256_set1_ps(kf);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 lo, hi;
    V::load16(p + i, &lo, &hi);
    V::store16(p + i, _mm256_div_ps(lo, div), _mm256_div_ps(hi, div));
  }
  for (; i + 8 <= n; i += 8) V::store(p + i, _mm256_div_ps(V::load(p + i), div));
  for (; i < n; ++i) p[i] = C::store(C::load(p[i]) / kf);
}
#endif  // BRAID_REDUCE_X86

// ---------------------------------------------------------------------------------------------
// Dispatch tables, built once per ISA.

using ScaleFn = void (*)(void* buf, size_t count, int n);

struct KernelTable {
  ReduceFn reduce[kNumDataTypes][kNumReduceOps];
  ScaleFn scale[kNumDataTypes];
};

template <class C, class Op>
ReduceFn pickReduce(detail::ReduceIsa isa) {
#if BRAID_REDUCE_X86
  if (isa == detail::ReduceIsa::kAvx2) {
    if constexpr (std::is_same_v<C, Half>) {
      return &reduce16Avx2<HalfVec, Op>;
    } else if constexpr (std::is_same_v<C, BFloat>) {
      return &reduce16Avx2<BFloatVec, Op>;
    } else {
      return &reduceAvx2<C, Op>;
    }
  }
#endif
  (void)isa;
  return &reducePortable<C, Op>;
}

template <class C>
ScaleFn pickScale(detail::ReduceIsa isa) {
#if BRAID_REDUCE_X86
  if (isa == detail::ReduceIsa::kAvx2) {
    if constexpr (std::is_same_v<C, Half>) {
      return &scale16Avx2<HalfVec>;
    } else if constexpr (std::is_same_v<C, BFloat>) {
      return &scale16Avx2<BFloatVec>;
    } else {
      return &scaleAvx2<C>;
    }
  }
#endif
  (void)isa;
  return &scalePortable<C>;
}

template <class C>
void fillRow(KernelTable& t, DataType type, detail::ReduceIsa isa) {
  const int row = static_cast<int>(type);
  t.reduce[row][static_cast<int>(ReduceOp::kSum)] = pickReduce<C, OpSum>(isa);
  t.reduce[row][static_cast<int>(ReduceOp::kProd)] = pickReduce<C, OpProd>(isa);
  t.reduce[row][static_cast<int>(ReduceOp::kMax)] = pickReduce<C, OpMax>(isa);
  t.reduce[row][static_cast<int>(ReduceOp::kMin)] = pickReduce<C, OpMin>(isa);
  t.reduce[row][static_cast<int>(ReduceOp::kAvg)] = pickReduce<C, OpSum>(isa);
  t.scale[row] = pickScale<C>(isa);
}

KernelTable buildTable(detail::ReduceIsa isa) {
  KernelTable t{};
  fillRow<Native<int8_t>>(t, DataType::kInt8, isa);
  fillRow<Native<uint8_t>>(t, DataType::kUint8, isa);
  fillRow<Native<int32_t>>(t, DataType::kInt32, isa);
  fillRow<Native<uint32_t>>(t, DataType::kUint32, isa);
  fillRow<Native<int64_t>>(t, DataType::kInt64, isa);
  fillRow<Native<uint64_t>>(t, DataType::kUint64, isa);
  fillRow<Half>(t, DataType::kFloat16, isa);
  fillRow<Native<float>>(t, DataType::kFloat32, isa);
  fillRow<Native<double>>(t, DataType::kFloat64, isa);
  fillRow<BFloat>(t, DataType::kBFloat16, isa);
  return t;
}

const KernelTable& tableFor(detail::ReduceIsa isa) {
  static const KernelTable portable = buildTable(detail::ReduceIsa::kPortable);
  static const KernelTable avx2 =
      buildTable(cpuHasAvx2Kernels() ? detail::ReduceIsa::kAvx2 : detail::ReduceIsa::kPortable);
  return isa == detail::ReduceIsa::kAvx2 ? avx2 : portable;
}

const KernelTable& activeTable() {
  static const KernelTable& t =
      tableFor(cpuHasAvx2Kernels() ? detail::ReduceIsa::kAvx2 : detail::ReduceIsa::kPortable);
  return t;
}

bool validPair(DataType type, ReduceOp op) { return isValid(type) && isValid(op); }

}  // namespace

ReduceFn getReduceFn(DataType type, ReduceOp op) {
  if (!validPair(type, op)) return nullptr;
  return activeTable().reduce[static_cast<int>(type)][static_cast<int>(op)];
}

void reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  ReduceFn fn = getReduceFn(type, op);
  if (fn != nullptr) fn(dst, dst, src, count);
}

void scaleForAvg(DataType type, void* buf, size_t count, int n) {
  // n <= 1 leaves the sum unchanged (n == 1 is the identity; n <= 0 is a caller bug that must not
  // divide by zero).
  if (!isValid(type) || n <= 1) return;
  activeTable().scale[static_cast<int>(type)](buf, count, n);
}

float halfToFloat(uint16_t h) { return halfToFloatImpl(h); }
uint16_t floatToHalf(float f) { return floatToHalfImpl(f); }
float bfloat16ToFloat(uint16_t b) { return bfloat16ToFloatImpl(b); }
uint16_t floatToBfloat16(float f) { return floatToBfloat16Impl(f); }

bool cpuHasAvx2Kernels() {
#if BRAID_REDUCE_X86
  // libgcc's check includes the OS having enabled YMM state (XGETBV). clang 14's builtin knows
  // no "f16c" (the fuzzing build, scripts/fuzz.sh); every CPU with AVX2 and FMA has F16C.
#if defined(__clang__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
         __builtin_cpu_supports("fma");
#endif
#else
  return false;
#endif
}

namespace detail {

bool reduceIsaSupported(ReduceIsa isa) {
  return isa == ReduceIsa::kPortable || cpuHasAvx2Kernels();
}

ReduceFn getReduceFnForIsa(ReduceIsa isa, DataType type, ReduceOp op) {
  if (!validPair(type, op) || !reduceIsaSupported(isa)) return nullptr;
  return tableFor(isa).reduce[static_cast<int>(type)][static_cast<int>(op)];
}

void scaleForAvgForIsa(ReduceIsa isa, DataType type, void* buf, size_t count, int n) {
  if (!isValid(type) || n <= 1 || !reduceIsaSupported(isa)) return;
  tableFor(isa).scale[static_cast<int>(type)](buf, count, n);
}

}  // namespace detail
}  // namespace braid
