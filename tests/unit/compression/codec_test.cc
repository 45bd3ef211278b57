// Codecs without a communicator: round-trip bounds of encode/decode, error-feedback accounting
// (sum of what was sent plus the residual equals the sum of the inputs), selection and
// quantization properties, the 16-bit range handling (overflow near 65504·p, underflow at
// p = 64, emulating the on-the-wire half sum), kernels of every ISA alike, and option parsing.
// Multi-rank behaviour (bit-identical results on every rank) is in multirank_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compression/codec.h"
#include "compression/codec_registry.h"
#include "compression/kernels.h"
#include "core/reduce.h"

namespace braid {
namespace {

std::vector<float> randomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::unique_ptr<Codec> make(const std::string& spec) {
  std::string name;
  CodecOptions o;
  Status s = parseCodecSpec(spec, &name, &o);
  EXPECT_TRUE(s.isOk()) << s.toString();
  auto c = createCodec(name, o);
  EXPECT_TRUE(c.isOk()) << c.status().toString();
  return std::move(c).value();
}

// One encode + decode of x (single rank, scale 1).
std::vector<float> roundTrip(Codec& c, BucketId b, const std::vector<float>& x,
                             const std::vector<TensorShape>& shapes = {}) {
  std::vector<unsigned char> wire(c.maxEncodedBytes(x.size(), shapes));
  auto bytes = c.encode(b, x.data(), x.size(), shapes, 1.0f, wire.data(), wire.size());
  EXPECT_TRUE(bytes.isOk()) << bytes.status().toString();
  std::vector<float> out(x.size(), -7.0f);
  Status s = c.decode(wire.data(), *bytes, 1, out.data(), out.size(), shapes);
  EXPECT_TRUE(s.isOk()) << s.toString();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Every codec: sizes 0, 1, primes, and one past a chunk; error-feedback accounting.

struct AccountingCase {
  const char* spec;
  bool keepsResidual;
};

class EveryCodec : public ::testing::TestWithParam<AccountingCase> {};

TEST_P(EveryCodec, ErrorFeedbackAccountingAndSizes) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1031}, size_t{4099}}) {
    auto c = make(GetParam().spec);
    std::vector<double> sumIn(n, 0.0), sumSent(n, 0.0);
    std::vector<float> residual(n);
    for (int step = 0; step < 6; ++step) {
      const auto x = randomVector(n, 100 + step);
      c->setStep(static_cast<uint64_t>(step));
      const auto y = roundTrip(*c, 3, x);
      for (size_t i = 0; i < n; ++i) {
        sumIn[i] += x[i];
        sumSent[i] += y[i];
        ASSERT_TRUE(std::isfinite(y[i])) << GetParam().spec << " n=" << n << " i=" << i;
      }
      ASSERT_TRUE(c->getResidual(3, residual.data(), n).isOk());
      if (GetParam().keepsResidual) {
        // Σ sent + residual = Σ inputs (up to f32 rounding of the running residual).
        for (size_t i = 0; i < n; ++i) {
          ASSERT_NEAR(sumSent[i] + residual[i], sumIn[i], 1e-4 * (1 + std::fabs(sumIn[i])))
              << GetParam().spec << " n=" << n << " step " << step << " i=" << i;
        }
      } else {
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(residual[i], 0.0f);
      }
    }
    EXPECT_LE(c->maxEncodedBytes(n), std::max<size_t>(n * 4, 8)) << GetParam().spec;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, EveryCodec,
    ::testing::Values(AccountingCase{"none", false}, AccountingCase{"fp16", false},
                      AccountingCase{"bf16", false}, AccountingCase{"int8", false},
                      AccountingCase{"int8:ef=1", true}, AccountingCase{"sign", true},
                      AccountingCase{"sign:ef=0", false}, AccountingCase{"topk", true},
                      AccountingCase{"topk:ratio=0.1,ef=0", false},
                      AccountingCase{"powersgd:start=2,rank=2", true},
                      AccountingCase{"powersgd:start=0,ef=0", false}),
    [](const ::testing::TestParamInfo<AccountingCase>& info) {
      std::string s = info.param.spec;
      for (char& ch : s) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return s;
    });

// ---------------------------------------------------------------------------------------------
// Round-trip bounds.

TEST(Casts, RoundTripWithinHalfAnUlp) {
  const auto x = randomVector(10007, 1, 3.0f);
  auto f16 = make("fp16");
  auto y = roundTrip(*f16, 0, x);
  for (size_t i = 0; i < x.size(); ++i) {
    // Normal halves: relative error ≤ 2^-11; subnormals: absolute ≤ 2^-25.
    ASSERT_LE(std::fabs(y[i] - x[i]), std::max(std::fabs(x[i]) * 0x1p-11f, 0x1p-25f)) << i;
  }
  auto bf = make("bf16");
  y = roundTrip(*bf, 0, x);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i]) * 0x1p-8f) << i;
  }
}

TEST(Casts, InfAndNanPropagate) {
  const std::vector<float> x = {1.0f, INFINITY, -INFINITY, NAN, 1e30f, -1e30f};
  auto f16 = make("fp16");
  auto y = roundTrip(*f16, 0, x);
  EXPECT_EQ(y[1], INFINITY);
  EXPECT_EQ(y[2], -INFINITY);
  EXPECT_TRUE(std::isnan(y[3]));
  // encode saturates finite values at ±65504 (never a spurious Inf).
  EXPECT_EQ(y[4], 65504.0f);
  EXPECT_EQ(y[5], -65504.0f);
  auto bf = make("bf16");
  y = roundTrip(*bf, 0, x);
  EXPECT_EQ(y[1], INFINITY);
  EXPECT_TRUE(std::isnan(y[3]));
}

// The on-the-wire f16 sum of p ranks, as an all-reduce computes it (here: in rank order through
// core's half kernel), with the codec's own scaling: the encode scale and the decode factor.
std::vector<float> emulateHalfAllReduce(const std::vector<std::vector<float>>& x, float scale,
                                        float post) {
  auto c = make("fp16:dynamic=0");
  const size_t n = x[0].size();
  std::vector<uint16_t> acc(n), w(n);
  for (size_t r = 0; r < x.size(); ++r) {
    EXPECT_TRUE(c->encode(0, x[r].data(), n, {}, scale, r == 0 ? acc.data() : w.data(), n * 2).isOk());
    if (r > 0) reduceInto(DataType::kFloat16, ReduceOp::kSum, acc.data(), w.data(), n);
  }
  std::vector<float> out(n);
  const auto& k = detail::codecKernels();
  k.fromHalf(out.data(), acc.data(), n, post);
  return out;
}

TEST(Fp16, OverflowNear65504TimesP) {
  // Every rank holds values near 65504: their sum is ~65504·p. Post-dividing (sum in half, then
  // ÷p) overflows; pre-dividing by p in f32 keeps every partial sum finite.
  for (int p : {2, 8, 64}) {
    std::vector<std::vector<float>> x(p, std::vector<float>{65504.0f, -65504.0f, 60000.0f, 1.0f});
    auto naive = emulateHalfAllReduce(x, 1.0f, 1.0f / p);
    EXPECT_TRUE(std::isinf(naive[0])) << "p=" << p << ": the post-divide control must overflow";
    auto pre = emulateHalfAllReduce(x, 1.0f / p, 1.0f);
    EXPECT_EQ(pre[0], 65504.0f) << "p=" << p;
    EXPECT_EQ(pre[1], -65504.0f) << "p=" << p;
    // The half sum rounds once per addition: at most half an ulp (16 near 60000) each.
    EXPECT_NEAR(pre[2], 60000.0f, 16.0f * p) << "p=" << p;
  }
}

TEST(Fp16, StaticModeSaturatesAtTheLimit) {
  // Larger finite inputs saturate per rank at ±65504/p (rounded down to a half), so no order of
  // summation can overflow; the average saturates near ±65504.
  const int p = 3;
  std::vector<std::vector<float>> x(p, std::vector<float>{1e6f, -1e9f, 5.0f});
  // The codec's static limit for p = 3 is applied by allReduce; encode with limit = 65504/p is
  // what the emulation does through the kernels directly.
  const auto& k = detail::codecKernels();
  auto sum = [&](float limit) {
    std::vector<uint16_t> acc(3), w(3);
    k.toHalf(acc.data(), x[0].data(), 3, 1.0f / p, limit);
    for (int r = 1; r < p; ++r) {
      k.toHalf(w.data(), x[r].data(), 3, 1.0f / p, limit);
      reduceInto(DataType::kFloat16, ReduceOp::kSum, acc.data(), w.data(), 3);
    }
    std::vector<float> out(3);
    k.fromHalf(out.data(), acc.data(), 3, 1.0f);
    return out;
  };
  // Control: 65504/3 = 21834.67 rounds up to the half 21840, and 3 × 21840 rounds to Inf.
  EXPECT_TRUE(std::isinf(sum(65504.0f / p)[0]));
  // The codec's limit is rounded down to a representable half.
  EXPECT_LE(detail::fp16StaticLimit(p), 65504.0f / p);
  auto out = sum(detail::fp16StaticLimit(p));
  EXPECT_TRUE(std::isfinite(out[0]));
  EXPECT_LE(out[0], 65504.0f);
  EXPECT_GE(out[0], 65504.0f * 0.99f);
  EXPECT_GE(out[1], -65504.0f);
  EXPECT_NEAR(out[2], 5.0f, 5.0f * 0x1p-10f);
}

TEST(Fp16, UnderflowAtP64) {
  // 1e-6 on each of 64 ranks: ÷64 gives 1.6e-8, below half of the smallest subnormal (2^-25):
  // the static scaling loses it entirely; the dynamic shared scale (fp16's default) keeps it.
  const int p = 64;
  std::vector<std::vector<float>> x(p, std::vector<float>{1e-6f, -3e-6f, 2.5e-7f});
  auto lost = emulateHalfAllReduce(x, 1.0f / p, 1.0f);
  EXPECT_EQ(lost[0], 0.0f) << "the static-scaling control should flush 1e-6/64 to zero";
  // Dynamic: s = 2^e with e = floor(log2(32768 / (p · max|x|))), decode × 1/(s·p).
  const float g = 3e-6f;
  const int e = static_cast<int>(std::floor(std::log2(32768.0 / (p * static_cast<double>(g)))));
  auto kept = emulateHalfAllReduce(x, std::ldexp(1.0f, e), static_cast<float>(std::ldexp(1.0, -e) / p));
  // Within the half sum's rounding: 2^-11 relative per addition (partial sums of one sign).
  EXPECT_NEAR(kept[0], 1e-6f, 1e-6f * p * 0x1p-11f);
  EXPECT_NEAR(kept[1], -3e-6f, 3e-6f * p * 0x1p-11f);
  EXPECT_NEAR(kept[2], 2.5e-7f, 2.5e-7f * p * 0x1p-11f);
}

TEST(TopK, SendsExactlyTheKLargest) {
  const size_t n = 20000;
  auto x = randomVector(n, 5);
  auto c = make("topk:ratio=0.01,ef=0");
  auto y = roundTrip(*c, 0, x);
  std::vector<float> mags(n);
  for (size_t i = 0; i < n; ++i) mags[i] = std::fabs(x[i]);
  std::nth_element(mags.begin(), mags.begin() + 199, mags.end(), std::greater<float>());
  const float kth = mags[199];
  size_t sent = 0;
  for (size_t i = 0; i < n; ++i) {
    if (y[i] != 0.0f) {
      ++sent;
      EXPECT_EQ(y[i], x[i]);
      EXPECT_GE(std::fabs(x[i]), kth);
    }
  }
  EXPECT_EQ(sent, 200u);
  EXPECT_EQ(c->maxEncodedBytes(n), 200u * 8);
}

TEST(TopK, DecodeSumsPayloadsInRankOrder) {
  // Three "ranks" encode; decoding the gathered payloads equals the element-wise sum of their
  // individual decodes, and repeats bit for bit.
  const size_t n = 5000;
  std::vector<unsigned char> gathered;
  std::vector<float> expect(n, 0.0f);
  size_t bytes = 0;
  for (int r = 0; r < 3; ++r) {
    auto c = make("topk:ratio=0.05");
    auto x = randomVector(n, 40 + r);
    std::vector<unsigned char> w(c->maxEncodedBytes(n));
    bytes = c->encode(0, x.data(), n, {}, 1.0f, w.data(), w.size()).value();
    gathered.insert(gathered.end(), w.begin(), w.end());
    std::vector<float> one(n);
    ASSERT_TRUE(c->decode(w.data(), bytes, 1, one.data(), n).isOk());
    for (size_t i = 0; i < n; ++i) expect[i] += one[i];
  }
  auto c = make("topk:ratio=0.05");
  std::vector<float> a(n), b(n);
  ASSERT_TRUE(c->decode(gathered.data(), bytes, 3, a.data(), n).isOk());
  ASSERT_TRUE(c->decode(gathered.data(), bytes, 3, b.data(), n).isOk());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(a.data(), expect.data(), n * 4));
  // A corrupt index is an error, not a write out of bounds.
  reinterpret_cast<uint32_t*>(gathered.data())[0] = static_cast<uint32_t>(n + 3);
  EXPECT_EQ(c->decode(gathered.data(), bytes, 3, a.data(), n).code(), Code::kInternal);
}

TEST(Int8, WithinOneStepAndUnbiased) {
  const size_t n = 4096;
  auto x = randomVector(n, 9);
  auto c = make("int8:chunk=1024");
  std::vector<double> mean(n, 0.0);
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    c->setStep(static_cast<uint64_t>(t));  // a fresh random stream per step
    auto y = roundTrip(*c, 1, x);
    for (size_t j = 0; j < n / 1024; ++j) {
      float m = 0;
      for (size_t i = j * 1024; i < (j + 1) * 1024; ++i) m = std::max(m, std::fabs(x[i]));
      for (size_t i = j * 1024; i < (j + 1) * 1024; ++i) {
        ASSERT_LE(std::fabs(y[i] - x[i]), m / 127.0f * 1.0001f) << i;
      }
    }
    for (size_t i = 0; i < n; ++i) mean[i] += y[i] / trials;
  }
  // Unbiased: the mean of 400 independent roundings is within a few standard errors
  // (s/2/√400 per element at most; s ≈ 3.5/127).
  double worst = 0, avgErr = 0;
  for (size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(mean[i] - x[i]));
    avgErr += (mean[i] - x[i]) / n;
  }
  EXPECT_LT(worst, 5 * (4.5 / 127) / 2 / std::sqrt(trials));
  EXPECT_LT(std::fabs(avgErr), 2e-4);
}

TEST(Int8, SameKeySameBytes) {
  auto x = randomVector(3000, 2);
  auto a = make("int8:seed=7");
  auto b = make("int8:seed=7");
  std::vector<unsigned char> wa(a->maxEncodedBytes(3000)), wb(wa.size());
  ASSERT_TRUE(a->encode(4, x.data(), 3000, {}, 1.0f, wa.data(), wa.size()).isOk());
  ASSERT_TRUE(b->encode(4, x.data(), 3000, {}, 1.0f, wb.data(), wb.size()).isOk());
  EXPECT_EQ(wa, wb);
}

TEST(Sign, MagnitudeIsTheChunkMeanAndSizeIs32xSmaller) {
  const size_t n = 8192;
  auto x = randomVector(n, 3);
  auto c = make("sign:chunk=1024,ef=0");
  auto y = roundTrip(*c, 0, x);
  for (size_t j = 0; j < n / 1024; ++j) {
    double m = 0;
    for (size_t i = j * 1024; i < (j + 1) * 1024; ++i) m += std::fabs(x[i]) / 1024;
    for (size_t i = j * 1024; i < (j + 1) * 1024; ++i) {
      ASSERT_NEAR(std::fabs(y[i]), m, 1e-5);
      ASSERT_EQ(std::signbit(y[i]), std::signbit(x[i]));
    }
  }
  EXPECT_EQ(c->maxEncodedBytes(n), n / 8 + 8 * 4);
}

TEST(PowerSgd, RecoversALowRankMatrixAndSkips1D) {
  // A rank-2 48×40 matrix followed by a bias of 40: rank 2 recovers the matrix (up to f32
  // rounding); the bias goes uncompressed (exact).
  const size_t rows = 48, cols = 40;
  std::vector<float> x(rows * cols + cols);
  auto u = randomVector(rows * 2, 1), v = randomVector(cols * 2, 2);
  for (size_t a = 0; a < rows; ++a) {
    for (size_t b = 0; b < cols; ++b) {
      x[a * cols + b] = u[a] * v[b] + u[rows + a] * v[cols + b];
    }
  }
  auto bias = randomVector(cols, 3);
  std::copy(bias.begin(), bias.end(), x.begin() + rows * cols);
  const std::vector<TensorShape> shapes = {{rows, cols}, {cols, 1}};
  auto c = make("powersgd:rank=2,start=0");
  std::vector<unsigned char> wire(c->maxEncodedBytes(x.size(), shapes));
  auto bytes = c->encode(0, x.data(), x.size(), shapes, 1.0f, wire.data(), wire.size());
  ASSERT_TRUE(bytes.isOk());
  EXPECT_EQ(*bytes, (cols + (rows + cols) * 2) * 4);  // bias + P (48×2) + Q (40×2)
  std::vector<float> y(x.size());
  ASSERT_TRUE(c->decode(wire.data(), *bytes, 1, y.data(), y.size(), shapes).isOk());
  for (size_t i = 0; i < rows * cols; ++i) ASSERT_NEAR(y[i], x[i], 1e-4 * (1 + std::fabs(x[i])));
  for (size_t i = rows * cols; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]);
  // Before the start step: the raw values.
  auto late = make("powersgd:rank=2,start=5");
  y = roundTrip(*late, 0, x, shapes);
  EXPECT_EQ(0, std::memcmp(y.data(), x.data(), x.size() * 4));
  // Shapes that do not add up are an error.
  EXPECT_FALSE(c->encode(0, x.data(), x.size(), {{rows, cols}}, 1.0f, wire.data(), wire.size()).isOk());
}

TEST(PowerSgd, WarmStartImprovesTheApproximation) {
  // A full-rank matrix: repeated power iterations with warm start (the same input each step,
  // error feedback off) approach the best rank-1 approximation, so the error shrinks.
  const size_t rows = 64, cols = 64;
  auto x = randomVector(rows * cols, 11);
  for (size_t a = 0; a < rows; ++a) {
    for (size_t b = 0; b < cols; ++b) x[a * cols + b] += 3.0f * std::sin(a * 0.1f) * std::cos(b * 0.2f);
  }
  auto c = make("powersgd:rank=1,start=0,ef=0");
  double first = 0, last = 0;
  for (int step = 0; step < 8; ++step) {
    auto y = roundTrip(*c, 0, x, {{rows, cols}});
    double err = 0;
    for (size_t i = 0; i < x.size(); ++i) err += (y[i] - x[i]) * (y[i] - x[i]);
    if (step == 0) first = err;
    last = err;
  }
  EXPECT_LE(last, first);
}

TEST(Residual, MovesAcrossBuckets) {
  auto c = make("sign");
  auto x = randomVector(100, 1);
  roundTrip(*c, 9, x);
  std::vector<float> r(100), r2(100);
  ASSERT_TRUE(c->getResidual(9, r.data(), 100).isOk());
  ASSERT_TRUE(c->setResidual(10, r.data(), 100).isOk());
  ASSERT_TRUE(c->getResidual(10, r2.data(), 100).isOk());
  EXPECT_EQ(r, r2);
  EXPECT_FALSE(c->getResidual(9, r.data(), 99).isOk());
  c->dropState(9);
  ASSERT_TRUE(c->getResidual(9, r.data(), 100).isOk());
  EXPECT_EQ(r, std::vector<float>(100, 0.0f));
}

TEST(Kernels, EveryIsaAgreesBitForBit) {
  const auto* portable = detail::codecKernelsForIsa(0);
  const auto* avx2 = detail::codecKernelsForIsa(1);
  if (avx2 == nullptr) GTEST_SKIP() << "no AVX2/F16C on this CPU: only the portable kernels";
  for (size_t n : {size_t{0}, size_t{5}, size_t{64}, size_t{1001}}) {
    auto x = randomVector(n, 77, 100.0f);
    if (n > 4) {
      x[1] = 1e9f;
      x[2] = NAN;
      x[3] = -INFINITY;
      x[4] = 1e-9f;
    }
    std::vector<uint16_t> a(n), b(n);
    portable->toHalf(a.data(), x.data(), n, 0.25f, 8000.0f);
    avx2->toHalf(b.data(), x.data(), n, 0.25f, 8000.0f);
    EXPECT_EQ(a, b) << n;
    portable->toBf16(a.data(), x.data(), n, 0.25f);
    avx2->toBf16(b.data(), x.data(), n, 0.25f);
    EXPECT_EQ(a, b) << n;
    std::vector<float> fa(n), fb(n);
    portable->fromHalf(fa.data(), a.data(), n, 2.0f);
    avx2->fromHalf(fb.data(), a.data(), n, 2.0f);
    EXPECT_TRUE(n == 0 || std::memcmp(fa.data(), fb.data(), n * 4) == 0) << n;  // bits, NaN too
    auto y = randomVector(n, 78);
    std::vector<int8_t> qa(n), qb(n);
    portable->quantizeInt8(qa.data(), y.data(), n, 30.0f, 1234u, 17u);
    avx2->quantizeInt8(qb.data(), y.data(), n, 30.0f, 1234u, 17u);
    EXPECT_EQ(qa, qb) << n;
    const size_t n8 = n / 8 * 8;
    std::vector<uint8_t> sa(n8 / 8), sb(n8 / 8);
    portable->packSigns(sa.data(), y.data(), n8);
    avx2->packSigns(sb.data(), y.data(), n8);
    EXPECT_EQ(sa, sb) << n;
    std::fill(fa.begin(), fa.end(), 1.0f);
    std::fill(fb.begin(), fb.end(), 1.0f);
    portable->addSigns(fa.data(), sa.data(), n8, 0.5f);
    avx2->addSigns(fb.data(), sa.data(), n8, 0.5f);
    EXPECT_TRUE(n == 0 || std::memcmp(fa.data(), fb.data(), n * 4) == 0) << n;  // bits, NaN too
    EXPECT_EQ(portable->absSum(y.data(), n), avx2->absSum(y.data(), n));
    const float da = portable->dot(y.data(), y.data(), n), db = avx2->dot(y.data(), y.data(), n);
    EXPECT_EQ(da, db) << n;
    const float ma = portable->maxAbs(x.data(), n), mb = avx2->maxAbs(x.data(), n);
    EXPECT_TRUE(ma == mb || (std::isnan(ma) && std::isnan(mb))) << n;
    if (n > 4) {
      EXPECT_TRUE(std::isnan(ma)) << "a NaN must not vanish from max|x|, n=" << n;
    }
    EXPECT_EQ(portable->maxAbs(y.data(), n), avx2->maxAbs(y.data(), n)) << n;
  }
}

TEST(Factory, NamesAndSpecs) {
  for (const char* name : {"none", "fp16", "bf16", "powersgd", "topk", "int8", "sign"}) {
    auto c = createCodec(name);
    ASSERT_TRUE(c.isOk()) << name;
    EXPECT_STREQ((*c)->info().name, name);
  }
  auto bad = createCodec("zip");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("powersgd"), std::string::npos);
  std::string name;
  CodecOptions o;
  ASSERT_TRUE(parseCodecSpec("powersgd:rank=4,start=100,ef=0,min_rate=3", &name, &o).isOk());
  EXPECT_EQ(name, "powersgd");
  EXPECT_EQ(o.powerSgdRank, 4);
  EXPECT_EQ(o.startStep, 100u);
  EXPECT_EQ(o.errorFeedback, false);
  EXPECT_EQ(o.minCompressionRate, 3.0);
  EXPECT_FALSE(parseCodecSpec("topk:ratio=2", &name, &o).isOk());
  EXPECT_FALSE(parseCodecSpec("topk:bogus=1", &name, &o).isOk());
  EXPECT_FALSE(parseCodecSpec("topk:ratio", &name, &o).isOk());
  EXPECT_EQ(createCodec("topk")->get()->info().collective, WireCollective::kAllGather);
  EXPECT_EQ(createCodec("powersgd")->get()->info().collective, WireCollective::kAllReduce);
}

}  // namespace
}  // namespace braid
