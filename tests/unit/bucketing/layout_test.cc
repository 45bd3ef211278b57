#include "bucketing/layout.h"

#include <gtest/gtest.h>

#include <set>

namespace braid::detail {
namespace {

std::vector<ParamSpec> floats(std::vector<size_t> counts) {
  std::vector<ParamSpec> p;
  for (size_t i = 0; i < counts.size(); ++i) {
    ParamSpec s;
    s.id = static_cast<uint32_t>(i);
    s.count = counts[i];
    s.type = DataType::kFloat32;
    s.name = "p" + std::to_string(i);
    p.push_back(s);
  }
  return p;
}

TEST(LayoutTest, ReverseOrderFirstBucketSmall) {
  // 8 params of 1 KiB each, cap 4 KiB, first cap 1 KiB: [7], [6 5 4 3], [2 1 0].
  auto p = floats(std::vector<size_t>(8, 256));
  BucketPlan plan = planBuckets(p, reverseOrder(8), 4096, 1024);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0], (std::vector<int>{7}));
  EXPECT_EQ(plan[1], (std::vector<int>{6, 5, 4, 3}));
  EXPECT_EQ(plan[2], (std::vector<int>{2, 1, 0}));
}

TEST(LayoutTest, IsolateLargeGivesAFullParameterItsOwnBucket) {
  // Bytes 16K 1K 1K 2K 2K; backward order 4 3 2 1 0; cap 4 KiB. DDP's rule lets the 16 KiB
  // parameter 0 join 2 and 1; isolated, it gets a bucket of its own.
  auto p = floats({4096, 256, 256, 512, 512});
  EXPECT_EQ(planBuckets(p, reverseOrder(5), 4096, 4096), (BucketPlan{{4, 3}, {2, 1, 0}}));
  EXPECT_EQ(planBuckets(p, reverseOrder(5), 4096, 4096, true), (BucketPlan{{4, 3}, {2, 1}, {0}}));
  // The limit is the open bucket's own cap: against the 4 KiB first cap, 0 closes {1} and then
  // opens the second bucket, whose 1 MiB cap it does not fill.
  EXPECT_EQ(planBuckets(p, {1, 0, 2, 3, 4}, 1 << 20, 4096), (BucketPlan{{1, 0}, {2, 3, 4}}));
  EXPECT_EQ(planBuckets(p, {1, 0, 2, 3, 4}, 1 << 20, 4096, true), (BucketPlan{{1}, {0, 2, 3, 4}}));
}

// A large gradient that is ready last (BERT's word embedding) must not drag the parameters
// before it into the tail. 61 gradients of 3 MiB come early, a 96 MiB one 54 ms later; buckets
// are expensive (2 ms each), so many small ones cannot keep up, and without isolation every cap
// leaves some of the 3 MiB gradients in the last bucket or needs too many buckets (the best such
// tail is ~37 ms). Isolated, the tail is the 96 MiB all-reduce alone (27.2 ms).
TEST(LayoutTest, AutoIsolatesALargeLastGradient) {
  std::vector<size_t> counts(62, 786432);  // 3 MiB
  counts[0] = 24 << 20;                    // 96 MiB, ready last
  auto p = floats(counts);
  std::vector<int> order = reverseOrder(p.size());
  std::vector<double> ready(p.size());
  for (size_t j = 0; j + 1 < order.size(); ++j) {
    ready[static_cast<size_t>(order[j])] = 1e5 * static_cast<double>(j + 1);
  }
  ready[0] = 60e6;
  AlphaBeta m;
  m.aNs = 2e6;
  m.nsPerByte = 0.25;
  AutoChoice c = chooseCaps(p, order, ready, m);
  const double alone = m.aNs + static_cast<double>(p[0].bytes()) * m.nsPerByte;
  EXPECT_TRUE(c.isolateLarge) << "cap " << c.cap << " first " << c.firstCap;
  EXPECT_LT(c.predictedNs - ready[0], alone * 1.02 + 2 * m.aNs) << "cap " << c.cap;
  const BucketPlan plan = planBuckets(p, order, c.cap, c.firstCap, c.isolateLarge);
  EXPECT_EQ(plan.back(), (std::vector<int>{0}));
}

TEST(LayoutTest, PerTensorWithTinyCap) {
  auto p = floats({3, 0, 5, 7});
  BucketPlan plan = planBuckets(p, {2, 0, 1, 3}, 1, 1);
  // A zero-byte parameter never reaches the cap on its own: it joins the next one.
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0], (std::vector<int>{2}));
  EXPECT_EQ(plan[1], (std::vector<int>{0}));
  EXPECT_EQ(plan[2], (std::vector<int>{1, 3}));
}

TEST(LayoutTest, SeparatesDtypesAndCoversEveryParam) {
  auto p = floats({100, 100, 100, 100, 100, 100});
  p[1].type = DataType::kFloat64;
  p[4].type = DataType::kInt32;
  BucketPlan plan = planBuckets(p, reverseOrder(6), 1 << 20, 1 << 20);
  std::set<int> seen;
  for (const auto& b : plan) {
    for (int idx : b) {
      EXPECT_EQ(p[static_cast<size_t>(idx)].type, p[static_cast<size_t>(b.front())].type);
      EXPECT_TRUE(seen.insert(idx).second);
    }
  }
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_EQ(plan.size(), 3u);
}

TEST(LayoutTest, EncodeDecodeRoundTripAndRejectsGarbage) {
  auto p = floats(std::vector<size_t>(10, 1000));
  BucketPlan plan = planBuckets(p, reverseOrder(10), 8000, 4000);
  std::vector<uint32_t> enc = encodePlan(plan, 10);
  BucketPlan back;
  ASSERT_TRUE(decodePlan(enc, 10, &back));
  EXPECT_EQ(back, plan);
  enc[0] = enc[1];  // duplicate parameter
  EXPECT_FALSE(decodePlan(enc, 10, &back));
  EXPECT_FALSE(decodePlan(std::vector<uint32_t>(3, 0), 10, &back));
}

TEST(LayoutTest, HashDependsOnEveryField) {
  ParamSpec a;
  a.id = 1;
  a.count = 10;
  a.name = "w";
  ParamSpec b = a;
  EXPECT_EQ(hashParam(a), hashParam(b));
  b.count = 11;
  EXPECT_NE(hashParam(a), hashParam(b));
  b = a;
  b.type = DataType::kFloat16;
  EXPECT_NE(hashParam(a), hashParam(b));
  b = a;
  b.name = "v";
  EXPECT_NE(hashParam(a), hashParam(b));
  b = a;
  b.id = 2;
  EXPECT_NE(hashParam(a), hashParam(b));
}

// Compute-bound: gradients arrive slowly relative to the link; the auto choice must finish within
// a bucket's time of the last gradient, i.e. far better than one bucket of everything.
TEST(LayoutTest, AutoCapsComputeBoundFinishesSoonAfterBackward) {
  const size_t n = 200;
  auto p = floats(std::vector<size_t>(n, 64 * 1024));  // 256 KiB each, 50 MiB total
  std::vector<int> order = reverseOrder(n);
  std::vector<double> ready(n);
  for (size_t j = 0; j < n; ++j) ready[static_cast<size_t>(order[j])] = 1e6 * static_cast<double>(j + 1) / 2;  // 100 ms
  AlphaBeta m;
  m.aNs = 50e3;
  m.nsPerByte = 0.2;  // 5 GB/s: 50 MiB in ~10 ms << 100 ms backward
  AutoChoice c = chooseCaps(p, order, ready, m);
  const double lastReady = ready[0];
  EXPECT_LT(c.predictedNs - lastReady, 1.5e6) << "cap " << c.cap;
  const double oneBucket = simulatePlan(p, planBuckets(p, order, SIZE_MAX, SIZE_MAX), ready, m);
  EXPECT_LT(c.predictedNs, oneBucket);
}

// Communication-bound: per-tensor messages pay α each; the auto choice beats both extremes.
TEST(LayoutTest, AutoCapsCommBoundBeatsExtremes) {
  const size_t n = 300;
  auto p = floats(std::vector<size_t>(n, 16 * 1024));  // 64 KiB each
  std::vector<int> order = reverseOrder(n);
  std::vector<double> ready(n);
  for (size_t j = 0; j < n; ++j) ready[static_cast<size_t>(order[j])] = 1e4 * static_cast<double>(j + 1);
  AlphaBeta m;
  m.aNs = 100e3;
  m.nsPerByte = 1.0;
  AutoChoice c = chooseCaps(p, order, ready, m);
  const double perTensor = simulatePlan(p, planBuckets(p, order, 1, 1), ready, m);
  const double one = simulatePlan(p, planBuckets(p, order, SIZE_MAX, SIZE_MAX), ready, m);
  EXPECT_LE(c.predictedNs, perTensor);
  EXPECT_LE(c.predictedNs, one);
}

// The engine sends a bucket in pieces and copies piece j back while piece j+1 is on the wire: with
// a window of 2 only the last piece's copy back follows the last all-reduce; with a window of 1
// every copy back holds up the next piece (the simulation runs the engine's loop).
TEST(LayoutTest, SimulationOverlapsPiecesCopyBackWithTheWindow) {
  auto p = floats({size_t{8} << 20, size_t{8} << 20});  // one 64 MiB bucket, ready at 1 ms
  const BucketPlan plan = {{0, 1}};
  const std::vector<double> ready = {1e6, 1e6};
  const double bytes = static_cast<double>(p[0].bytes() + p[1].bytes());
  AlphaBeta m;
  m.aNs = 0;
  m.collectiveNs = [](size_t b) { return static_cast<double>(b); };  // 1 ns per byte
  m.copyNsPerByte = 0.5;
  m.pieceBytes = size_t{8} << 20;
  m.window = 2;
  EXPECT_DOUBLE_EQ(simulatePlan(p, plan, ready, m), 1e6 + bytes + bytes / 8 * 0.5);
  m.window = 1;
  EXPECT_DOUBLE_EQ(simulatePlan(p, plan, ready, m), 1e6 + bytes * 1.5);
  m.window = 2;
  m.pieceBytes = 0;  // one piece: its whole copy back is in the tail
  EXPECT_DOUBLE_EQ(simulatePlan(p, plan, ready, m), 1e6 + bytes * 1.5);
  // Each gradient alone in its bucket: reduced where it lies, nothing to copy back.
  EXPECT_DOUBLE_EQ(simulatePlan(p, {{0}, {1}}, ready, m), 1e6 + bytes);
}

// A later bucket waits for the communicator, not for the earlier bucket's copy back.
TEST(LayoutTest, SimulationQueuesBucketsOnOneCommunicator) {
  auto p = floats({512, 512, 512, 512});  // two buckets of 4 KiB, all ready at 0
  const BucketPlan plan = {{0, 1}, {2, 3}};
  AlphaBeta m;
  m.aNs = 100;
  m.collectiveNs = [](size_t) { return 1000.0; };
  m.copyNsPerByte = 1.0;  // 4096 ns per copy back
  m.window = 2;
  // Both launched at 0; the second all-reduce runs 1100–2200; copies 1100–5196 and 5196–9292.
  EXPECT_DOUBLE_EQ(simulatePlan(p, plan, {0, 0, 0, 0}, m), 1100 + 2 * 4096);
}

}  // namespace
}  // namespace braid::detail
