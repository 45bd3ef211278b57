// Reduction kernels against a straightforward per-element reference, for every ISA the CPU has,
// every dtype × op, odd counts (vector bodies and scalar tails), and every aliasing case. The
// f16/bf16 conversions are checked against a reference that rounds by comparing exact values
// (and against the F16C instructions where present), so the kernel reference may use them.
#include "core/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BRAID_TEST_X86 1
#else
#define BRAID_TEST_X86 0
#endif

namespace braid {
namespace detail {
// Test hooks defined in core/reduce.cc.
enum class ReduceIsa : int { kPortable = 0, kAvx2 = 1 };
bool reduceIsaSupported(ReduceIsa isa);
ReduceFn getReduceFnForIsa(ReduceIsa isa, DataType type, ReduceOp op);
void scaleForAvgForIsa(ReduceIsa isa, DataType type, void* buf, size_t count, int n);

// Readable parameter names in gtest output.
void PrintTo(ReduceIsa isa, std::ostream* os) {
  *os << (isa == ReduceIsa::kAvx2 ? "avx2" : "portable");
}
}  // namespace detail

namespace {

using detail::ReduceIsa;

// ---------------------------------------------------------------------------------------------
// Independent 16-bit float reference: decode by formula, encode by searching the (monotonic)
// positive codes for the two neighbours of |x| and picking the nearer one, ties to even.

double halfValue(uint16_t h) {
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 31) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

double bf16Value(uint16_t b) {
  const int exp = (b >> 7) & 0xFF;
  const int mant = b & 0x7F;
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  if (exp == 255) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -133);
  return sign * std::ldexp(128 + mant, exp - 134);
}

struct NarrowFormat {
  double (*value)(uint16_t);
  uint16_t infCode;
  double overflowAt;  // the value the next code after the largest finite one would have
};
const NarrowFormat kHalf{halfValue, 0x7C00, 65536.0};
const NarrowFormat kBf16{bf16Value, 0x7F80, 0x1p128};

bool narrowIsNan(const NarrowFormat& f, uint16_t c) { return (c & 0x7FFF) > f.infCode; }

// Correctly rounded x (NaN handled by callers).
uint16_t roundToNarrow(const NarrowFormat& f, double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double ax = std::fabs(x);
  auto value = [&](uint32_t c) { return c == f.infCode ? f.overflowAt : f.value(c); };
  if (ax >= f.overflowAt) return sign | f.infCode;
  uint32_t lo = 0, hi = f.infCode;  // value(lo) <= ax < value(hi)
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    (value(mid) <= ax ? lo : hi) = mid;
  }
  const double below = ax - value(lo), above = value(hi) - ax;
  const uint32_t c = below < above ? lo : above < below ? hi : ((lo & 1) ? hi : lo);
  return static_cast<uint16_t>(sign | c);
}

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Float samples for the encoders: a stride through all bit patterns, every midpoint between
// adjacent narrow values with its float neighbours, and the classic edge cases.
std::vector<float> encoderSamples(const NarrowFormat& f) {
  std::vector<float> out;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4099) out.push_back(bitsToFloat(uint32_t(u)));
  for (uint32_t c = 0; c < f.infCode; ++c) {
    const double next = c + 1 == f.infCode ? f.overflowAt : f.value(uint16_t(c + 1));
    const float mid = static_cast<float>((f.value(uint16_t(c)) + next) / 2);  // exact
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      out.push_back(v);
      out.push_back(-v);
    }
  }
  return out;
}

TEST(HalfConversionTest, DecodeAllCodes) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float got = halfToFloat(uint16_t(h));
    const double want = halfValue(uint16_t(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      EXPECT_EQ(got, want) << std::hex << h;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;
    }
  }
}

TEST(HalfConversionTest, RoundTripAllCodes) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const uint16_t back = floatToHalf(halfToFloat(uint16_t(h)));
    if (narrowIsNan(kHalf, uint16_t(h))) {
      EXPECT_TRUE(narrowIsNan(kHalf, back)) << std::hex << h;
      EXPECT_TRUE(back & 0x200) << "NaN must come back quiet: " << std::hex << h;
    } else {
      EXPECT_EQ(back, h);
    }
  }
}

TEST(HalfConversionTest, EncodeMatchesReference) {
  for (float v : encoderSamples(kHalf)) {
    const uint16_t got = floatToHalf(v);
    if (std::isnan(v)) {
      ASSERT_TRUE(narrowIsNan(kHalf, got)) << v;
    } else {
      ASSERT_EQ(got, roundToNarrow(kHalf, v)) << std::hexfloat << v;
    }
  }
}

TEST(HalfConversionTest, EdgeCases) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);   // largest finite
  EXPECT_EQ(floatToHalf(65519.99f), 0x7BFF);  // below the midpoint to 65536
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);   // midpoint: ties to even = Inf
  EXPECT_EQ(floatToHalf(-65520.0f), 0xFC00);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);         // half of it: tie to even (0)
  EXPECT_EQ(floatToHalf(0x1.000002p-25f), 0x0001);  // just above the tie
  EXPECT_EQ(floatToHalf(0x1.8p-24f), 0x0002);       // 1.5 ulp: tie to even (2)
  EXPECT_EQ(floatToHalf(0x1.4p-23f), 0x0002);       // 2.5 ulp: tie to even (2)
  EXPECT_EQ(floatToHalf(0x1.ff8p-15f), 0x03FF);     // largest subnormal
  EXPECT_EQ(floatToHalf(0x1.ffcp-15f), 0x0400);     // tie, odd: carries into the smallest normal
  EXPECT_EQ(floatToHalf(0x1p-14f), 0x0400);
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3C00);  // tie, even stays
  EXPECT_EQ(floatToHalf(1.0f + 0x3p-11f), 0x3C02);  // tie, odd rounds up
  EXPECT_EQ(floatToHalf(1e-10f), 0x0000);
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  EXPECT_TRUE(narrowIsNan(kHalf, floatToHalf(NAN)));
  EXPECT_TRUE(narrowIsNan(kHalf, floatToHalf(bitsToFloat(0x7F800001u))));  // low-payload NaN
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0xFC00), -INFINITY);
}

#if BRAID_TEST_X86
__attribute__((target("f16c"))) uint16_t hardwareFloatToHalf(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(HalfConversionTest, EncodeMatchesF16c) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "CPU has no F16C";
  for (float v : encoderSamples(kHalf)) {
    ASSERT_EQ(floatToHalf(v), hardwareFloatToHalf(v)) << std::hexfloat << v;  // NaNs too
  }
}
#endif

TEST(Bfloat16ConversionTest, DecodeAllCodes) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float got = bfloat16ToFloat(uint16_t(b));
    const double want = bf16Value(uint16_t(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      EXPECT_EQ(got, want) << std::hex << b;
    }
  }
}

TEST(Bfloat16ConversionTest, RoundTripAllCodes) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t back = floatToBfloat16(bfloat16ToFloat(uint16_t(b)));
    if (narrowIsNan(kBf16, uint16_t(b))) {
      EXPECT_TRUE(narrowIsNan(kBf16, back)) << std::hex << b;
    } else {
      EXPECT_EQ(back, b);
    }
  }
}

TEST(Bfloat16ConversionTest, EncodeMatchesReference) {
  for (float v : encoderSamples(kBf16)) {
    const uint16_t got = floatToBfloat16(v);
    if (std::isnan(v)) {
      ASSERT_TRUE(narrowIsNan(kBf16, got)) << v;
    } else {
      ASSERT_EQ(got, roundToNarrow(kBf16, v)) << std::hexfloat << v;
    }
  }
}

TEST(Bfloat16ConversionTest, EdgeCases) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBfloat16(bitsToFloat(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(floatToBfloat16(bitsToFloat(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(floatToBfloat16(bitsToFloat(0x3F808001u)), 0x3F81);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to Inf
  EXPECT_EQ(floatToBfloat16(-INFINITY), 0xFF80);
  EXPECT_EQ(floatToBfloat16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToBfloat16(bitsToFloat(0x00018000u)), 0x0002);  // subnormal tie to even
  // A NaN whose payload lives only in the dropped bits must stay NaN, not become Inf.
  EXPECT_TRUE(narrowIsNan(kBf16, floatToBfloat16(bitsToFloat(0x7F800001u))));
  EXPECT_TRUE(narrowIsNan(kBf16, floatToBfloat16(bitsToFloat(0xFF800001u))));
  EXPECT_EQ(floatToBfloat16(bitsToFloat(0xFF800001u)) & 0x8000, 0x8000);
}

// ---------------------------------------------------------------------------------------------
// Kernel reference, one element at a time on raw bytes.

const ReduceIsa kIsas[] = {ReduceIsa::kPortable, ReduceIsa::kAvx2};

template <typename T>
T load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void put(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

const NarrowFormat* narrowFormat(DataType type) {
  if (type == DataType::kFloat16) return &kHalf;
  if (type == DataType::kBFloat16) return &kBf16;
  return nullptr;
}

// Integers: computed modulo 2^64 in uint64_t, which is well defined, then truncated.
template <typename T>
T refInt(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return static_cast<T>(uint64_t(a) + uint64_t(b));
    case ReduceOp::kProd:
      return static_cast<T>(uint64_t(a) * uint64_t(b));
    case ReduceOp::kMax:
      return a > b ? a : b;
    case ReduceOp::kMin:
      return a < b ? a : b;
  }
  return 0;
}

// Floats in double: exact for f16/bf16 sums and products (then rounded once), plain IEEE for
// f32/f64. max/min: NaN if either input is NaN.
template <typename T>
T refFloat(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMax:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::fmax(a, b);
    case ReduceOp::kMin:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::fmin(a, b);
  }
  return 0;
}

void refElement(DataType type, ReduceOp op, const void* a, const void* b, void* out) {
  switch (type) {
    case DataType::kInt8:
      put(out, refInt(op, load<int8_t>(a), load<int8_t>(b)));
      break;
    case DataType::kUint8:
      put(out, refInt(op, load<uint8_t>(a), load<uint8_t>(b)));
      break;
    case DataType::kInt32:
      put(out, refInt(op, load<int32_t>(a), load<int32_t>(b)));
      break;
    case DataType::kUint32:
      put(out, refInt(op, load<uint32_t>(a), load<uint32_t>(b)));
      break;
    case DataType::kInt64:
      put(out, refInt(op, load<int64_t>(a), load<int64_t>(b)));
      break;
    case DataType::kUint64:
      put(out, refInt(op, load<uint64_t>(a), load<uint64_t>(b)));
      break;
    case DataType::kFloat32:
      put(out, refFloat(op, load<float>(a), load<float>(b)));
      break;
    case DataType::kFloat64:
      put(out, refFloat(op, load<double>(a), load<double>(b)));
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const NarrowFormat& f = *narrowFormat(type);
      const double r = refFloat(op, f.value(load<uint16_t>(a)), f.value(load<uint16_t>(b)));
      put<uint16_t>(out, std::isnan(r) ? uint16_t(0x7FFF) : roundToNarrow(f, r));
      break;
    }
  }
}

bool isNanElement(DataType type, const void* p) {
  if (type == DataType::kFloat32) return std::isnan(load<float>(p));
  if (type == DataType::kFloat64) return std::isnan(load<double>(p));
  if (const NarrowFormat* f = narrowFormat(type)) return narrowIsNan(*f, load<uint16_t>(p));
  return false;
}

bool isZeroElement(DataType type, const void* p) {
  if (type == DataType::kFloat32) return load<float>(p) == 0.0f;
  if (type == DataType::kFloat64) return load<double>(p) == 0.0;
  if (narrowFormat(type) != nullptr) return (load<uint16_t>(p) & 0x7FFF) == 0;
  return false;
}

// Bit-equal; NaN matches any NaN; for max/min of +0 and -0 either zero is accepted.
bool sameResult(DataType type, ReduceOp op, const void* got, const void* want) {
  if (isNanElement(type, want)) return isNanElement(type, got);
  if ((op == ReduceOp::kMax || op == ReduceOp::kMin) && isZeroElement(type, want)) {
    return isZeroElement(type, got);
  }
  return std::memcmp(got, want, dataTypeSize(type)) == 0;
}

std::string showElement(DataType type, const void* p) {
  std::ostringstream os;
  switch (type) {
    case DataType::kInt8:
      os << int(load<int8_t>(p));
      break;
    case DataType::kUint8:
      os << int(load<uint8_t>(p));
      break;
    case DataType::kInt32:
      os << load<int32_t>(p);
      break;
    case DataType::kUint32:
      os << load<uint32_t>(p);
      break;
    case DataType::kInt64:
      os << load<int64_t>(p);
      break;
    case DataType::kUint64:
      os << load<uint64_t>(p);
      break;
    case DataType::kFloat32:
      os << std::hexfloat << load<float>(p);
      break;
    case DataType::kFloat64:
      os << std::hexfloat << load<double>(p);
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      os << "0x" << std::hex << load<uint16_t>(p) << " ("
         << narrowFormat(type)->value(load<uint16_t>(p)) << ")";
      break;
  }
  return os.str();
}

// Random inputs: raw bit patterns (every class of value, NaN and Inf included), moderate values
// (meaningful rounding), and the special values.
void randomElement(DataType type, std::mt19937_64& rng, void* out) {
  const uint64_t bits = rng();
  const int kind = static_cast<int>(rng() % 16);
  switch (type) {
    case DataType::kFloat32: {
      const float specials[] = {0.0f,
                                -0.0f,
                                INFINITY,
                                -INFINITY,
                                NAN,
                                -NAN,
                                std::numeric_limits<float>::denorm_min(),
                                std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::min()};
      float v = kind == 0  ? specials[bits % 9]
                : kind < 6 ? bitsToFloat(uint32_t(bits))
                           : static_cast<float>(int64_t(bits % 200001) - 100000) / 64.0f;
      put(out, v);
      break;
    }
    case DataType::kFloat64: {
      const double specials[] = {0.0,
                                 -0.0,
                                 INFINITY,
                                 -INFINITY,
                                 NAN,
                                 std::numeric_limits<double>::denorm_min(),
                                 std::numeric_limits<double>::max()};
      double v;
      std::memcpy(&v, &bits, 8);
      if (kind == 0) v = specials[bits % 7];
      if (kind >= 6) v = static_cast<double>(int64_t(bits % 2000001) - 1000000) / 1024.0;
      put(out, v);
      break;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const NarrowFormat& f = *narrowFormat(type);
      uint16_t c = uint16_t(bits);
      if (kind >= 8)
        c = roundToNarrow(f, static_cast<double>(int64_t(bits % 20001) - 10000) / 64.0);
      put(out, c);
      break;
    }
    default:
      std::memcpy(out, &bits, dataTypeSize(type));
      break;
  }
}

enum class Alias { kDistinct, kDstIsA, kDstIsB, kAll, kMisaligned };
const Alias kAliases[] = {Alias::kDistinct, Alias::kDstIsA, Alias::kDstIsB, Alias::kAll,
                          Alias::kMisaligned};
const char* aliasName(Alias a) {
  switch (a) {
    case Alias::kDistinct:
      return "distinct";
    case Alias::kDstIsA:
      return "dst==a";
    case Alias::kDstIsB:
      return "dst==b";
    case Alias::kAll:
      return "dst==a==b";
    case Alias::kMisaligned:
      return "offset by one element";
  }
  return "?";
}

constexpr size_t kGuard = 16;  // elements after the end that must stay untouched

// Runs fn on `count` random elements in the given aliasing layout and checks every element and
// the guard region. Returns the number of mismatches (reports the first few).
int checkKernel(ReduceFn fn, DataType type, ReduceOp op, size_t count, Alias alias, uint64_t seed) {
  const size_t es = dataTypeSize(type);
  const size_t shift = alias == Alias::kMisaligned ? 1 : 0;
  const size_t total = count + shift + kGuard;
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> a(total * es), b(total * es), d(total * es), want(count * es);
  for (size_t i = 0; i < total; ++i) {
    randomElement(type, rng, &a[i * es]);
    randomElement(type, rng, &b[i * es]);
    randomElement(type, rng, &d[i * es]);
  }
  if (alias == Alias::kAll) b = a;
  for (size_t i = 0; i < count; ++i) {
    refElement(type, op, &a[(i + shift) * es], &b[(i + shift) * es], &want[i * es]);
  }
  const std::vector<uint8_t> aBefore = a, bBefore = b, dBefore = d;
  uint8_t* pa = a.data() + shift * es;
  uint8_t* pb = b.data() + shift * es;
  uint8_t* pd = d.data() + shift * es;
  uint8_t* out = pd;
  switch (alias) {
    case Alias::kDistinct:
    case Alias::kMisaligned:
      fn(pd, pa, pb, count);
      break;
    case Alias::kDstIsA:
      fn(pa, pa, pb, count);
      out = pa;
      break;
    case Alias::kDstIsB:
      fn(pb, pa, pb, count);
      out = pb;
      break;
    case Alias::kAll:
      fn(pa, pa, pa, count);
      out = pa;
      break;
  }
  int bad = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!sameResult(type, op, out + i * es, &want[i * es])) {
      if (++bad <= 3) {
        ADD_FAILURE() << dataTypeName(type) << " " << reduceOpName(op) << " count " << count << " "
                      << aliasName(alias) << " element " << i << ": "
                      << showElement(type, pa + i * es) << " op " << showElement(type, pb + i * es)
                      << " gave " << showElement(type, out + i * es) << ", want "
                      << showElement(type, &want[i * es]);
      }
    }
  }
  // Nothing outside [0, count) of the output may change, and inputs that are not the output
  // must not change at all.
  const size_t endByte = (count + shift) * es;
  const std::vector<uint8_t>& outBefore = out == pa ? aBefore : out == pb ? bBefore : dBefore;
  const std::vector<uint8_t>& outNow = out == pa ? a : out == pb ? b : d;
  EXPECT_TRUE(std::equal(outNow.begin() + endByte, outNow.end(), outBefore.begin() + endByte))
      << "wrote past the end: " << dataTypeName(type) << " count " << count;
  EXPECT_TRUE(std::equal(outNow.begin(), outNow.begin() + shift * es, outBefore.begin()))
      << "wrote before the start";
  if (out != pa) {
    EXPECT_EQ(a, aBefore) << "input a modified";
  }
  if (out != pb) {
    EXPECT_EQ(b, bBefore) << "input b modified";
  }
  return bad;
}

class ReduceKernelTest : public ::testing::TestWithParam<std::tuple<ReduceIsa, int, int>> {};

TEST_P(ReduceKernelTest, MatchesReference) {
  const ReduceIsa isa = std::get<0>(GetParam());
  const DataType type = static_cast<DataType>(std::get<1>(GetParam()));
  const ReduceOp op = static_cast<ReduceOp>(std::get<2>(GetParam()));
  if (!detail::reduceIsaSupported(isa)) GTEST_SKIP() << "CPU lacks AVX2/F16C/FMA";
  ReduceFn fn = detail::getReduceFnForIsa(isa, type, op);
  ASSERT_NE(fn, nullptr);
  const size_t counts[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1023};
  uint64_t seed = 1;
  for (size_t count : counts) {
    for (Alias alias : kAliases) {
      ASSERT_EQ(checkKernel(fn, type, op, count, alias, seed++), 0);
    }
  }
}

std::string kernelName(const ::testing::TestParamInfo<std::tuple<ReduceIsa, int, int>>& info) {
  return std::string(std::get<0>(info.param) == ReduceIsa::kAvx2 ? "avx2" : "portable") + "_" +
         dataTypeName(static_cast<DataType>(std::get<1>(info.param))) + "_" +
         reduceOpName(static_cast<ReduceOp>(std::get<2>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceKernelTest,
                         ::testing::Combine(::testing::ValuesIn(kIsas),
                                            ::testing::Range(0, kNumDataTypes),
                                            ::testing::Range(0, kNumReduceOps)),
                         kernelName);

TEST(ReduceTest, LargeCountThroughPublicDispatch) {
  const size_t count = (size_t{1} << 20) + 3;
  for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    ReduceFn fn = getReduceFn(type, ReduceOp::kSum);
    ASSERT_NE(fn, nullptr);
    EXPECT_EQ(checkKernel(fn, type, ReduceOp::kSum, count, Alias::kDistinct, 7), 0);
    EXPECT_EQ(checkKernel(fn, type, ReduceOp::kSum, count, Alias::kDstIsA, 8), 0);
  }
}

TEST(ReduceTest, InvalidPairsHaveNoKernel) {
  EXPECT_EQ(getReduceFn(static_cast<DataType>(10), ReduceOp::kSum), nullptr);
  EXPECT_EQ(getReduceFn(static_cast<DataType>(-1), ReduceOp::kSum), nullptr);
  EXPECT_EQ(getReduceFn(DataType::kFloat32, static_cast<ReduceOp>(5)), nullptr);
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      EXPECT_NE(getReduceFn(static_cast<DataType>(t), static_cast<ReduceOp>(o)), nullptr);
    }
  }
}

TEST(ReduceTest, SemanticsSpotChecks) {
  // Signed sum and product wrap instead of overflowing.
  int32_t a = INT32_MAX, b = 1, d = 0;
  getReduceFn(DataType::kInt32, ReduceOp::kSum)(&d, &a, &b, 1);
  EXPECT_EQ(d, INT32_MIN);
  int8_t x = -128, y = -1, z = 0;
  getReduceFn(DataType::kInt8, ReduceOp::kProd)(&z, &x, &y, 1);
  EXPECT_EQ(z, -128);
  // NaN propagates through max and min from either side.
  float f[4] = {NAN, 1.0f, 2.0f, -INFINITY}, g[4] = {3.0f, NAN, -1.0f, -5.0f}, r[4];
  getReduceFn(DataType::kFloat32, ReduceOp::kMax)(r, f, g, 4);
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_EQ(r[2], 2.0f);
  EXPECT_EQ(r[3], -5.0f);
  getReduceFn(DataType::kFloat32, ReduceOp::kMin)(r, f, g, 4);
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_EQ(r[2], -1.0f);
  EXPECT_EQ(r[3], -INFINITY);
  // bf16 and f16 sums round once to nearest even: 1 + 2^-8 is a tie in bf16 (stays 1).
  uint16_t one = floatToBfloat16(1.0f), tiny = floatToBfloat16(0x1p-8f), out = 0;
  getReduceFn(DataType::kBFloat16, ReduceOp::kSum)(&out, &one, &tiny, 1);
  EXPECT_EQ(out, one);
  uint16_t hmax = 0x7BFF, hout = 0;
  getReduceFn(DataType::kFloat16, ReduceOp::kSum)(&hout, &hmax, &hmax, 1);
  EXPECT_EQ(hout, 0x7C00);  // 65504 + 65504 overflows to Inf
}

TEST(ReduceTest, ReduceIntoAccumulates) {
  std::vector<double> dst = {1, 2, 3, 4, 5}, src = {10, 20, 30, 40, 50};
  reduceInto(DataType::kFloat64, ReduceOp::kSum, dst.data(), src.data(), dst.size());
  EXPECT_EQ(dst, (std::vector<double>{11, 22, 33, 44, 55}));
  reduceInto(DataType::kFloat64, ReduceOp::kMax, dst.data(), src.data(), 0);  // no-op
  EXPECT_EQ(dst[0], 11);
}

// ---------------------------------------------------------------------------------------------
// scaleForAvg.

void refScale(DataType type, const void* in, int n, void* out) {
  switch (type) {
    case DataType::kInt8:
      put(out, int8_t(load<int8_t>(in) / n));
      break;
    case DataType::kUint8:
      put(out, uint8_t(load<uint8_t>(in) / n));
      break;
    case DataType::kInt32:
      put(out, int32_t(int64_t(load<int32_t>(in)) / n));
      break;
    case DataType::kUint32:
      put(out, uint32_t(load<uint32_t>(in) / uint32_t(n)));
      break;
    case DataType::kInt64:
      put(out, int64_t(load<int64_t>(in) / n));
      break;
    case DataType::kUint64:
      put(out, uint64_t(load<uint64_t>(in) / uint64_t(n)));
      break;
    case DataType::kFloat32:
      put(out, load<float>(in) / float(n));
      break;
    case DataType::kFloat64:
      put(out, load<double>(in) / double(n));
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const NarrowFormat& f = *narrowFormat(type);
      const double r = f.value(load<uint16_t>(in)) / n;
      put<uint16_t>(out, std::isnan(r) ? uint16_t(0x7FFF) : roundToNarrow(f, r));
      break;
    }
  }
}

class ScaleTest : public ::testing::TestWithParam<std::tuple<ReduceIsa, int>> {};

TEST_P(ScaleTest, MatchesReference) {
  const ReduceIsa isa = std::get<0>(GetParam());
  const DataType type = static_cast<DataType>(std::get<1>(GetParam()));
  if (!detail::reduceIsaSupported(isa)) GTEST_SKIP() << "CPU lacks AVX2/F16C/FMA";
  const size_t es = dataTypeSize(type);
  std::mt19937_64 rng(99);
  for (int n : {2, 3, 7, 1000}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{17}, size_t{1023}}) {
      std::vector<uint8_t> buf((count + kGuard) * es), want(count * es);
      for (size_t i = 0; i < count + kGuard; ++i) randomElement(type, rng, &buf[i * es]);
      for (size_t i = 0; i < count; ++i) refScale(type, &buf[i * es], n, &want[i * es]);
      const std::vector<uint8_t> before = buf;
      detail::scaleForAvgForIsa(isa, type, buf.data(), count, n);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_TRUE(sameResult(type, ReduceOp::kSum, &buf[i * es], &want[i * es]))
            << dataTypeName(type) << " / " << n << " element " << i << ": "
            << showElement(type, &before[i * es]) << " gave " << showElement(type, &buf[i * es])
            << ", want " << showElement(type, &want[i * es]);
      }
      EXPECT_TRUE(std::equal(buf.begin() + count * es, buf.end(), before.begin() + count * es));
    }
  }
}

std::string scaleName(const ::testing::TestParamInfo<std::tuple<ReduceIsa, int>>& info) {
  return std::string(std::get<0>(info.param) == ReduceIsa::kAvx2 ? "avx2" : "portable") + "_" +
         dataTypeName(static_cast<DataType>(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ScaleTest,
                         ::testing::Combine(::testing::ValuesIn(kIsas),
                                            ::testing::Range(0, kNumDataTypes)),
                         scaleName);

TEST(ScaleForAvgTest, IntegersTruncateTowardZero) {
  int32_t v[] = {-7, 7, INT32_MIN, INT32_MAX, -1, 1};
  scaleForAvg(DataType::kInt32, v, 6, 2);
  EXPECT_EQ(v[0], -3);
  EXPECT_EQ(v[1], 3);
  EXPECT_EQ(v[2], -1073741824);
  EXPECT_EQ(v[3], 1073741823);
  EXPECT_EQ(v[4], 0);
  EXPECT_EQ(v[5], 0);
  int8_t c[] = {-128, 127, -5};
  scaleForAvg(DataType::kInt8, c, 3, 3);
  EXPECT_EQ(c[0], -42);
  EXPECT_EQ(c[1], 42);
  EXPECT_EQ(c[2], -1);
  uint32_t u = UINT32_MAX;
  scaleForAvg(DataType::kUint32, &u, 1, 2);
  EXPECT_EQ(u, 0x7FFFFFFFu);
  int64_t l[] = {INT64_MIN, INT64_MAX, -10};
  scaleForAvg(DataType::kInt64, l, 3, 3);
  EXPECT_EQ(l[0], INT64_MIN / 3);
  EXPECT_EQ(l[1], INT64_MAX / 3);
  EXPECT_EQ(l[2], -3);
}

TEST(ScaleForAvgTest, FloatsAndDegenerateCounts) {
  float f[] = {7.0f, -1.0f, INFINITY};
  scaleForAvg(DataType::kFloat32, f, 3, 2);
  EXPECT_EQ(f[0], 3.5f);
  EXPECT_EQ(f[1], -0.5f);
  EXPECT_EQ(f[2], INFINITY);
  uint16_t h = floatToHalf(3.0f);
  scaleForAvg(DataType::kFloat16, &h, 1, 3);
  EXPECT_EQ(h, floatToHalf(1.0f));
  int32_t same[] = {5, -5};
  scaleForAvg(DataType::kInt32, same, 2, 1);  // one contribution: unchanged
  scaleForAvg(DataType::kInt32, same, 2, 0);  // invalid n: left alone rather than dividing by 0
  EXPECT_EQ(same[0], 5);
  EXPECT_EQ(same[1], -5);
  scaleForAvg(static_cast<DataType>(42), same, 2, 2);  // invalid type: ignored
  EXPECT_EQ(same[0], 5);
}

}  // namespace
}  // namespace braid
