// The choice between plain and non-temporal stores into shared memory (collectives/
// shared_stores.h): which calls explore, when the kind in use changes and when it must not.
#include "collectives/shared_stores.h"

#include <gtest/gtest.h>

#include "core/copy.h"

namespace braid::detail {
namespace {

constexpr size_t k8MiB = size_t{8} << 20;

// Runs `calls` eligible calls of `bytes`; each takes `plain` or `stream` times its price by the
// kind it uses. Returns how many of them explored.
int runCalls(StoreKindPolicy& p, int calls, size_t bytes, double plain, double stream) {
  int explored = 0;
  for (int i = 0; i < calls; ++i) {
    const StoreKindPolicy::Pick pick = p.next();
    explored += pick.explore ? 1 : 0;
    p.record(pick, bytes, pick.stream ? stream : plain);
  }
  return explored;
}

TEST(StoreKindPolicy, ExploresTheOtherKindEveryKExploreEveryCalls) {
  StoreKindPolicy p(false);
  for (uint64_t i = 1; i <= 3 * StoreKindPolicy::kExploreEvery; ++i) {
    const StoreKindPolicy::Pick pick = p.next();
    EXPECT_EQ(pick.explore, i % StoreKindPolicy::kExploreEvery == 0) << "call " << i;
    EXPECT_EQ(pick.stream, pick.explore) << "call " << i;
    p.record(pick, k8MiB, 1.0);
  }
}

TEST(StoreKindPolicy, KeepsTheKindInUseWhileItIsQuicker) {
  StoreKindPolicy p(false);
  // The other kind takes 1.4x (the near placement streaming at 8 MiB: 2.01 ms against 1.41).
  EXPECT_EQ(runCalls(p, 200, k8MiB, 1.0, 1.4), 200 / static_cast<int>(StoreKindPolicy::kExploreEvery));
  EXPECT_FALSE(p.stream());
  EXPECT_EQ(p.switches(), 0u);
  // Within the margin (0.9x): noise, not a reason to switch.
  runCalls(p, 200, k8MiB, 1.0, 0.9);
  EXPECT_FALSE(p.stream());
}

TEST(StoreKindPolicy, SwitchesAfterTwoQuickerExplorationsInARowAndBack) {
  StoreKindPolicy p(false);
  runCalls(p, 40, k8MiB, 1.0, 1.4);
  ASSERT_FALSE(p.stream());
  // The vCPUs move apart: plain takes 2.0x, streaming 1.0x. Two explorations later (at most
  // 2·kExploreEvery calls) the policy streams.
  runCalls(p, 2 * static_cast<int>(StoreKindPolicy::kExploreEvery), k8MiB, 2.0, 1.0);
  EXPECT_TRUE(p.stream());
  EXPECT_EQ(p.switches(), 1u);
  // And back once plain is the quicker one again.
  runCalls(p, 2 * static_cast<int>(StoreKindPolicy::kExploreEvery), k8MiB, 1.0, 1.4);
  EXPECT_FALSE(p.stream());
  EXPECT_EQ(p.switches(), 2u);
}

TEST(StoreKindPolicy, OneQuickExplorationIsNotEnough) {
  StoreKindPolicy p(false);
  runCalls(p, 15, k8MiB, 1.0, 1.0);
  StoreKindPolicy::Pick pick = p.next();
  ASSERT_TRUE(pick.explore);
  p.record(pick, k8MiB, 0.5);  // one quick exploring call
  EXPECT_FALSE(p.stream());
  runCalls(p, 15, k8MiB, 1.0, 1.0);
  pick = p.next();
  ASSERT_TRUE(pick.explore);
  p.record(pick, k8MiB, 1.0);  // the next one is not quicker: the vote starts over
  runCalls(p, 15, k8MiB, 1.0, 1.0);
  pick = p.next();
  ASSERT_TRUE(pick.explore);
  p.record(pick, k8MiB, 0.5);
  EXPECT_FALSE(p.stream());
  EXPECT_EQ(p.switches(), 0u);
}

TEST(StoreKindPolicy, ComparesAnExplorationWithCallsOfItsOwnSizeOnly) {
  StoreKindPolicy p(false);
  // Large calls run at 1.0x their price with plain stores, small ones at 3.0x (a model that
  // prices small calls loosely); streaming takes 1.5x as long at either size. Explorations land
  // on large calls (1.5x), after small ones (3.0x): no switch, ever.
  for (int i = 0; i < 200; ++i) {
    const StoreKindPolicy::Pick pick = p.next();
    const bool large = pick.explore || i % 4 == 0;
    p.record(pick, large ? k8MiB : size_t{512} << 10,
             (large ? 1.0 : 3.0) * (pick.stream ? 1.5 : 1.0));
  }
  EXPECT_EQ(p.switches(), 0u);
  // An exploration of a size no call of the kind in use had yet is not counted.
  StoreKindPolicy q(false);
  for (int i = 0; i < 64; ++i) {
    const StoreKindPolicy::Pick pick = q.next();
    q.record(pick, pick.explore ? size_t{64} << 20 : k8MiB, pick.explore ? 0.1 : 1.0);
  }
  EXPECT_EQ(q.switches(), 0u);
}

TEST(SharedStores, ConfigureFixesOrAdaptsTheProcessWideKind) {
  SharedStores::configure(true, false);
  EXPECT_TRUE(streamToShared());
  // Fixed: no call is timed, whatever its price.
  SharedStores::Call c = SharedStores::begin(true, k8MiB, 1e6);
  EXPECT_FALSE(c.timed);
  SharedStores::configure(false, true);
  EXPECT_FALSE(streamToShared());
  c = SharedStores::begin(true, k8MiB, SharedStores::kEligibleUs);
  EXPECT_TRUE(c.timed);
  SharedStores::end(c, true);
  // Not timed: another host's peers, or calls whose hand-offs weigh as much as their copies.
  EXPECT_FALSE(SharedStores::begin(false, k8MiB, 1e6).timed);
  EXPECT_FALSE(SharedStores::begin(true, k8MiB, SharedStores::kEligibleUs / 2).timed);
  // An exploring call sets the other kind while it runs and restores the kind in use after.
  bool sawExploration = false;
  for (uint64_t i = 0; i < StoreKindPolicy::kExploreEvery && !sawExploration; ++i) {
    c = SharedStores::begin(true, k8MiB, 1e6);
    ASSERT_TRUE(c.timed);
    if (c.pick.explore) {
      sawExploration = true;
      EXPECT_TRUE(streamToShared());
    }
    SharedStores::end(c, false);  // failed calls are not recorded
    EXPECT_FALSE(streamToShared());
  }
  EXPECT_TRUE(sawExploration);
  // A later communicator of the same process keeps the adapting state; a forced kind wins.
  SharedStores::configure(true, true);
  EXPECT_FALSE(SharedStores::streaming());
  SharedStores::configure(true, false);
  EXPECT_TRUE(SharedStores::streaming());
  EXPECT_TRUE(streamToShared());
}

}  // namespace
}  // namespace braid::detail
