// The braid-perf harness's checking machinery, without ranks: the patterns are exact, a single
// wrong or unwritten element is counted, and sizes parse as --help says. (tests/bench/perf_check.sh
// runs every benchmark on real ranks.)
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bench/perf/harness.h"
#include "bench/perf/options.h"

namespace braid::perf {
namespace {

TEST(PerfPattern, ReducedIsTheReductionOfTheContributions) {
  for (int ranks : {1, 2, 3, 8}) {
    Pattern p(DataType::kInt32, ReduceOp::kSum, ranks);
    ASSERT_TRUE(p.limitation().empty());
    for (size_t j = 0; j < p.period(); ++j) {
      int32_t sum = 0;
      for (int r = 0; r < ranks; ++r) {
        int32_t v;
        std::memcpy(&v, p.contribution(r) + j * sizeof(v), sizeof(v));
        sum += v;
      }
      int32_t want;
      std::memcpy(&want, p.reduced() + j * sizeof(want), sizeof(want));
      ASSERT_EQ(sum, want) << "ranks " << ranks << " element " << j;
    }
  }
}

TEST(PerfPattern, ContributionsDifferBetweenRanks) {
  Pattern p(DataType::kFloat32, ReduceOp::kSum, 4);
  EXPECT_NE(std::memcmp(p.contribution(0), p.contribution(1), p.period() * p.elemSize()), 0);
}

TEST(PerfPattern, LimitationIsStatedWhenTheTypeCannotHoldTheSums) {
  EXPECT_TRUE(Pattern(DataType::kInt8, ReduceOp::kSum, 8).limitation().empty());
  EXPECT_FALSE(Pattern(DataType::kInt8, ReduceOp::kSum, 64).limitation().empty());
}

TEST(PerfCheck, CountsOneWrongElementAtAnyPhase) {
  Pattern p(DataType::kFloat64, ReduceOp::kSum, 3);
  const size_t count = 1000, phase = 17;
  std::vector<uint8_t> buf(count * p.elemSize());
  fillPeriodic(buf.data(), p.reduced(), p.period(), p.elemSize(), count, phase);
  EXPECT_EQ(countMismatches(buf.data(), p.reduced(), p.period(), p.elemSize(), count, phase), 0u);
  EXPECT_EQ(countMismatches(buf.data(), p.reduced(), p.period(), p.elemSize(), count, phase + 1),
            count);  // the right values in the wrong place are wrong
  buf[523 * p.elemSize() + 7] ^= 0x01;  // one bit of element 523
  EXPECT_EQ(countMismatches(buf.data(), p.reduced(), p.period(), p.elemSize(), count, phase), 1u);
}

TEST(PerfCheck, PoisonIsNoVerifiableValueAndWritesAreSeen) {
  for (DataType t : {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kInt64}) {
    Pattern p(t, ReduceOp::kSum, 2);
    std::vector<uint8_t> buf(p.period() * p.elemSize());
    poison(buf.data(), buf.size());
    EXPECT_EQ(countMismatches(buf.data(), p.reduced(), p.period(), p.elemSize(), p.period()),
              p.period());
    EXPECT_EQ(countUnpoisoned(buf.data(), p.elemSize(), p.period()), 0u);
    buf[5 * p.elemSize()] = 0;
    EXPECT_EQ(countUnpoisoned(buf.data(), p.elemSize(), p.period()), 1u);
  }
}

TEST(PerfOptions, SizesParseAsTheHelpSays) {
  EXPECT_EQ(parseSize("8").value(), 8u);
  EXPECT_EQ(parseSize("4K").value(), 4096u);
  EXPECT_EQ(parseSize("128m").value(), size_t{128} << 20);
  EXPECT_EQ(parseSize("1GiB").value(), size_t{1} << 30);
  EXPECT_FALSE(parseSize("-1").isOk());
  EXPECT_FALSE(parseSize("12Q").isOk());
  EXPECT_FALSE(parseSize("99999999999999999999").isOk());
}

TEST(PerfOptions, SweepStepsInWholeElementsWithoutDuplicates) {
  Options o;
  o.type = DataType::kFloat32;
  o.minBytes = 2;
  o.maxBytes = 64;
  o.stepFactor = 2;
  EXPECT_EQ(sweepCounts(o), (std::vector<size_t>{0, 1, 2, 4, 8, 16}));
  o.minBytes = 8;
  o.stepBytes = 24;
  EXPECT_EQ(sweepCounts(o), (std::vector<size_t>{2, 8, 14}));
}

// The ceiling's traffic per collective, as README's table states it (S = 4096 B, n = 4, root 1).
TEST(PerfCeiling, TrafficMatchesTheStatedFormulas) {
  Pattern p(DataType::kFloat32, ReduceOp::kSum, 4);
  BenchContext ctx;
  ctx.ranks = 4;
  ctx.root = 1;
  ctx.pattern = &p;
  const size_t count = 1024;  // S = 4096 B
  auto work = [&](const CollectiveBench& b, int rank) {
    ctx.rank = rank;
    return b.ceilingWork(ctx, count);
  };
  EXPECT_EQ(work(allReduceBench(), 0).copyBytes, 3072);
  EXPECT_EQ(work(allReduceBench(), 0).reduceBytes, 3072);
  EXPECT_EQ(work(reduceScatterBench(), 2).copyBytes, 0);
  EXPECT_EQ(work(reduceScatterBench(), 2).reduceBytes, 3072);
  EXPECT_EQ(work(allGatherBench(), 3).copyBytes, 3072);
  EXPECT_EQ(work(allGatherBench(), 3).reduceBytes, 0);
  // Copy-only collectives publish nothing (a single copy reads private buffers), and the
  // broadcast's n − 1 copies of S are shared by all n ranks, the root included.
  EXPECT_EQ(work(allGatherBench(), 3).publishBytes, 0);
  EXPECT_EQ(work(allToAllBench(), 0).publishBytes, 0);
  EXPECT_EQ(work(broadcastBench(), 1).copyBytes, 3072);  // the root
  EXPECT_EQ(work(broadcastBench(), 0).copyBytes, 3072);
  EXPECT_EQ(work(broadcastBench(), 1).publishBytes, 0);
  EXPECT_EQ(work(reduceScatterBench(), 2).publishBytes, 3072);  // reductions still publish
  EXPECT_EQ(work(reduceBench(), 1).copyBytes, 3072);  // the root gathers the slices
  EXPECT_EQ(work(reduceBench(), 2).copyBytes, 0);
  EXPECT_EQ(work(reduceBench(), 2).reduceBytes, 3072);
  EXPECT_EQ(work(allToAllBench(), 0).copyBytes, 3072);
  for (const CollectiveBench* b : {&allReduceBench(), &reduceScatterBench(), &allGatherBench(),
                                   &broadcastBench(), &reduceBench(), &allToAllBench()}) {
    EXPECT_STRNE(b->ceilingFormula, "") << b->name;
  }
}

}  // namespace
}  // namespace braid::perf
