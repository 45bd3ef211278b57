// Codecs over a real Communicator between real processes (this binary re-launched as ranks with
// transport/bootstrap/local_launch.h, file store, shm): every codec's allReduce gives
// bit-identical results on every rank; error feedback accounts for every input across ranks
// (Σ_r (x_r + e_old,r − e_new,r) = p × the average); the casts and int8 stay within their
// bounds of the exact average; fp16 keeps
// values near 65504 on every rank (sum ~65504·p) and 1e-6 at p = 64.
//
// Worker mode: multirank_test --worker [spec ...] (RANK/WORLD_SIZE/BRAID_FILE_STORE from the
// launcher); exits 0 when every check passed on this rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "braid/comm.hpp"
#include "compression/codec.h"
#include "transport/bootstrap/local_launch.h"

namespace braid {
namespace {

int failures = 0;

#define WCHECK(cond, ...)                                                        \
  do {                                                                           \
    if (!(cond)) {                                                               \
      ++failures;                                                                \
      if (failures < 20) {                                                       \
        std::fprintf(stderr, "rank %d: check failed: %s: ", rank, #cond);        \
        std::fprintf(stderr, __VA_ARGS__);                                       \
        std::fprintf(stderr, "\n");                                              \
      }                                                                          \
    }                                                                            \
  } while (0)

uint64_t fnv(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

struct Bucket {
  BucketId id;
  size_t count;
  std::vector<TensorShape> shapes;
};

std::vector<float> input(int rank, int step, BucketId b, size_t n) {
  std::mt19937 rng(static_cast<uint32_t>(rank * 7919 + step * 104729 + b * 31));
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

int worker(std::vector<std::string> specs) {
  // --range-only: just fp16's range buckets (the 64-rank launch, kept short).
  const bool rangeOnly = !specs.empty() && specs[0] == "--range-only";
  if (rangeOnly) specs.erase(specs.begin());
  auto created = Communicator::createFromEnvironment();
  if (!created.isOk()) {
    std::fprintf(stderr, "communicator: %s\n", created.status().toString().c_str());
    return 2;
  }
  Communicator& comm = **created;
  const int rank = comm.rank();
  const int p = comm.size();
  const std::vector<Bucket> buckets = {
      {0, 0, {}}, {1, 1, {}}, {2, 4099, {}}, {3, 48 * 40 + 40, {{48, 40}, {40, 1}}}};

  for (const std::string& spec : specs) {
    std::string name;
    CodecOptions o;
    if (!parseCodecSpec(spec, &name, &o).isOk()) return 3;
    auto made = createCodec(name, o);
    if (!made.isOk()) return 3;
    Codec& codec = **made;
    const bool ef = codec.info().errorFeedback;
    for (int step = 0; step < (rangeOnly ? 0 : 4); ++step) {
      codec.setStep(static_cast<uint64_t>(step));
      for (const Bucket& b : buckets) {
        const auto x = input(rank, step, b.id, b.count);
        std::vector<float> eOld(b.count), eNew(b.count), data = x;
        (void)codec.getResidual(b.id, eOld.data(), b.count);
        Status s = codec.allReduce(comm, b.id, data.data(), b.count, b.shapes);
        WCHECK(s.isOk(), "%s bucket %llu: %s", spec.c_str(), (unsigned long long)b.id,
               s.toString().c_str());
        if (!s.isOk()) return 1;
        (void)codec.getResidual(b.id, eNew.data(), b.count);
        // Bit-identical on every rank.
        uint64_t h = fnv(data.data(), b.count * 4);
        std::vector<uint64_t> all(static_cast<size_t>(p));
        if (!comm.allGather(&h, all.data(), 1, DataType::kUint64).isOk()) return 1;
        for (int r = 0; r < p; ++r) {
          WCHECK(all[r] == all[0], "%s step %d bucket %llu: rank %d's result differs from rank 0's",
                 spec.c_str(), step, (unsigned long long)b.id, r);
        }
        // Accounting: Σ_r (x + e_old − e_new) = p·average (exact arithmetic in f64).
        std::vector<double> acc(b.count), exact(b.count);
        for (size_t i = 0; i < b.count; ++i) {
          acc[i] = static_cast<double>(x[i]) + eOld[i] - eNew[i];
          exact[i] = x[i];
        }
        if (!comm.allReduce(acc.data(), acc.data(), b.count, DataType::kFloat64, ReduceOp::kSum).isOk() ||
            !comm.allReduce(exact.data(), exact.data(), b.count, DataType::kFloat64, ReduceOp::kSum).isOk()) {
          return 1;
        }
        const double div = o.average ? p : 1;
        double worst = 0, worstExact = 0;
        for (size_t i = 0; i < b.count; ++i) {
          worst = std::max(worst, std::fabs(acc[i] / div - data[i]));
          worstExact = std::max(worstExact, std::fabs(exact[i] / div - data[i]));
        }
        double tol = 1e-4 * (o.average ? 1 : p);  // EF codecs: f32 rounding of residuals and of the 1/p scaling
        if (!ef) {
          // No residual: the average itself, within the codec's own error.
          if (name == "fp16") tol = 5.0 * (p + 1) * 0x1p-11;
          if (name == "bf16") tol = 5.0 * (p + 1) * 0x1p-8;
          if (name == "int8") tol = 5.0 / 127;
          if (name == "none") tol = 1e-5;
          if (name == "sign" || name == "topk" || name == "powersgd") tol = 1e30;  // no bound
        }
        WCHECK(worst <= tol, "%s step %d bucket %llu: accounting off by %g (tolerance %g)",
               spec.c_str(), step, (unsigned long long)b.id, worst, tol);
        if (name == "none") {
          WCHECK(worstExact <= 1e-5, "none: off the exact average by %g", worstExact);
        }
      }
    }
    const CodecStats& st = codec.stats();
    WCHECK(rangeOnly || st.buckets == 4 * buckets.size(), "%s: %llu buckets counted", spec.c_str(),
           (unsigned long long)st.buckets);
    if (name == "fp16" || name == "bf16") {
      WCHECK(st.wireBytes <= st.denseBytes / 2 + 64 * st.buckets, "%s: %llu wire bytes for %llu dense",
             spec.c_str(), (unsigned long long)st.wireBytes, (unsigned long long)st.denseBytes);
    }
    // fp16's range: values near 65504 on every rank (the sum is ~65504·p), one far above, and
    // one far below the static scaling's reach (1e-6/p at p = 64 is under 2^-25).
    if (name == "fp16") {
      // Large: near 65504 on every rank (sum ~65504·p) and far above.
      std::vector<float> big = {65504.0f, -65504.0f, 60000.0f, 1e6f, 0.0f, 1.0f};
      // Small: one bucket of tiny values; the shared scale is per bucket, so a bucket that mixes
      // 1e6 and 1e-6 keeps only about 2^-24 of its largest value's range (documented).
      std::vector<float> small = {1e-6f, -3e-6f, 2.5e-7f, 0.0f};
      const bool dynamic = o.dynamicScale.value_or(true);
      Status s = codec.allReduce(comm, 98, big.data(), big.size());
      WCHECK(s.isOk(), "fp16 range bucket: %s", s.toString().c_str());
      s = codec.allReduce(comm, 99, small.data(), small.size());
      WCHECK(s.isOk(), "fp16 range bucket: %s", s.toString().c_str());
      for (size_t i = 0; i < 4; ++i) WCHECK(std::isfinite(big[i]), "fp16 overflowed at %zu: %g", i, big[i]);
      // Half an ulp (16) per addition, and static mode's limit rounded down by < 1 ulp per rank.
      WCHECK(std::fabs(big[0] - 65504.0f) <= 32.0f * p && std::fabs(big[1] + 65504.0f) <= 32.0f * p,
             "fp16 near 65504: %g %g", big[0], big[1]);
      WCHECK(std::fabs(big[2] - 60000.0f) <= 16.0f * p, "fp16 60000 -> %g", big[2]);
      WCHECK(big[4] == 0.0f, "fp16 0 -> %g", big[4]);
      if (dynamic) {
        WCHECK(std::fabs(big[3] - 1e6f) <= 1e6f * p * 0x1p-11f, "fp16 1e6 -> %g", big[3]);
        WCHECK(std::fabs(small[0] - 1e-6f) <= 1e-6f * p * 0x1p-11f, "fp16 1e-6 at p=%d -> %g", p, small[0]);
        WCHECK(std::fabs(small[1] + 3e-6f) <= 3e-6f * p * 0x1p-11f, "fp16 -3e-6 at p=%d -> %g", p, small[1]);
        WCHECK(std::fabs(small[2] - 2.5e-7f) <= 2.5e-7f * p * 0x1p-11f, "fp16 2.5e-7 at p=%d -> %g", p, small[2]);
      } else {
        WCHECK(big[3] <= 65504.0f && big[3] >= 65504.0f * 0.98f, "static fp16 1e6 saturates: %g", big[3]);
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

#ifndef BRAID_SELF_BINARY
#error "BRAID_SELF_BINARY must name this test binary"
#endif

void launch(int ranks, std::vector<std::string> specs, int deadlineMs = 20000) {
  launch::LaunchOptions options;
  options.ranks = ranks;
  options.argv = {BRAID_SELF_BINARY, "--worker"};
  options.argv.insert(options.argv.end(), specs.begin(), specs.end());
  options.fileStore = true;
  options.env = {{"BRAID_TIMEOUT_MS", std::to_string(deadlineMs)}, {"BRAID_TRANSPORT", "shm"}};
  options.timeoutMs = 3 * deadlineMs;
  auto result = launch::launchLocalRanks(options);
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  ASSERT_FALSE(result->timedOut) << "a rank hung";
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(result->exitCodes[r], 0) << "rank " << r;
}

const std::vector<std::string> kAllSpecs = {
    "none",          "fp16",        "fp16:dynamic=0", "bf16",
    "int8",          "int8:ef=1",   "sign",           "topk:ratio=0.02",
    "powersgd:start=2,rank=2",      "powersgd:start=0,rank=1,ef=0,warm=0", "sign:average=0"};

class EveryWorldSize : public ::testing::TestWithParam<int> {};

TEST_P(EveryWorldSize, BitIdenticalAndAccounted) { launch(GetParam(), kAllSpecs); }

INSTANTIATE_TEST_SUITE_P(Ranks, EveryWorldSize, ::testing::Values(1, 2, 3, 4));

TEST(Fp16, SixtyFourRanksKeepSmallValues) { launch(64, {"--range-only", "fp16"}, 90000); }

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--worker") {
    std::vector<std::string> specs(argv + 2, argv + argc);
    return braid::worker(specs);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
