// The selector's pieces without a communicator: tuning-file and BRAID_ALGO parsing, the cost
// model's picks for fixed α/β/γ, and the calibration cache.
#include "collectives/selector/selector.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "collectives/selector/calibration.h"
#include "collectives/selector/cost_model.h"
#include "collectives/selector/rules.h"
#include "collectives/shm_segment.h"
#include "core/params.h"

namespace braid::detail {
namespace {

// Substring check without gmock.
#define EXPECT_CONTAINS(hay, needle) \
  EXPECT_NE(std::string(hay).find(needle), std::string::npos) << "in: " << (hay)

// ---------------------------------------------------------------------------------------------
// Tuning files

TEST(TuningFile, ParsesRulesRangesAliasesAndComments) {
  const std::string text =
      "# a comment\n"
      "\n"
      "allreduce bytes=0-64K ranks=2-8 hosts=1 algo=shm   # trailing comment\n"
      "allreduce bytes=64K-* hosts=2-* algo=hier chunk=512K\n"
      "broadcast algo=tree\n"
      "allreduce algo=hd\n";
  auto rules = parseTuningRules(text, "t.txt");
  ASSERT_TRUE(rules.isOk()) << rules.status().toString();
  ASSERT_EQ(rules->size(), 4u);
  EXPECT_EQ((*rules)[0].algorithm, "shm");
  EXPECT_EQ((*rules)[0].bytes.hi, 65536u);
  EXPECT_EQ((*rules)[0].where, "t.txt:3");
  EXPECT_EQ((*rules)[1].algorithm, "hierarchical");
  EXPECT_EQ((*rules)[1].chunkBytes, 512u * 1024);
  EXPECT_EQ((*rules)[3].algorithm, "halving_doubling");

  // First match wins; ranges are inclusive.
  const TuningRule* r = matchRule(*rules, SelCollective::kAllReduce, 65536, 4, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->algorithm, "shm");
  r = matchRule(*rules, SelCollective::kAllReduce, 65537, 4, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->algorithm, "halving_doubling");  // hosts=1 misses rule 2
  r = matchRule(*rules, SelCollective::kAllReduce, 1 << 20, 16, 2);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->algorithm, "hierarchical");
  EXPECT_EQ(matchRule(*rules, SelCollective::kAllGather, 8, 2, 1), nullptr);

  // What formatRule writes parses back to the same rule.
  auto again = parseTuningRules(formatRule((*rules)[1]), "again");
  ASSERT_TRUE(again.isOk()) << again.status().toString();
  EXPECT_EQ((*again)[0].bytes.lo, (*rules)[1].bytes.lo);
  EXPECT_EQ((*again)[0].bytes.hi, (*rules)[1].bytes.hi);
  EXPECT_EQ((*again)[0].hosts.lo, 2u);
  EXPECT_EQ((*again)[0].chunkBytes, (*rules)[1].chunkBytes);
}

TEST(TuningFile, MalformedLinesNameFileAndLine) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"allreduce algo=ring\nallgatherx algo=ring\n", "f.txt:2: unknown collective 'allgatherx'"},
      {"\n\nallreduce bytes=9-1 algo=ring\n", "f.txt:3: bad bytes range '9-1'"},
      {"allreduce bytes=1-2\n", "f.txt:1: missing algo=NAME"},
      {"allreduce speed=3 algo=ring\n", "f.txt:1: unknown key 'speed'"},
      {"allreduce algo=ring algo=tree\n", "f.txt:1: 'algo' given twice"},
      {"allreduce ring\n", "f.txt:1: 'ring' is not key=value"},
      {"allreduce algo=ring chunk=12\n", "f.txt:1: bad chunk '12'"},
      {"# ok\nallreduce algo=bogus\n",
       "f.txt:2: unknown allreduce algorithm 'bogus'; valid: ring, tree, halving_doubling, shm, "
       "hierarchical, hierarchical_leader"},
      {"broadcast algo=ring\n", "f.txt:1: unknown broadcast algorithm 'ring'; valid: tree"},
  };
  for (const Case& c : cases) {
    auto r = parseTuningRules(c.text, "f.txt");
    ASSERT_FALSE(r.isOk()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_CONTAINS(r.status().message(), c.expect) << c.text;
  }
}

TEST(TuningFile, MissingFileIsAnError) {
  auto r = readTuningFile("/nonexistent/braid-tuning.txt");
  ASSERT_FALSE(r.isOk());
  EXPECT_CONTAINS(r.status().message(), "/nonexistent/braid-tuning.txt");
}

// ---------------------------------------------------------------------------------------------
// BRAID_ALGO

TEST(AlgoOverrides, BareNameMeansAllReduce) {
  auto o = parseAlgoOverrideSpec("ring");
  ASSERT_TRUE(o.isOk());
  EXPECT_EQ(o->get(SelCollective::kAllReduce), "ring");
  EXPECT_EQ(o->get(SelCollective::kBroadcast), "");
}

TEST(AlgoOverrides, PerCollectiveListAndAliases) {
  auto o = parseAlgoOverrideSpec("allreduce:hd; broadcast:tree;;reducescatter:ring");
  ASSERT_TRUE(o.isOk()) << o.status().toString();
  EXPECT_EQ(o->get(SelCollective::kAllReduce), "halving_doubling");
  EXPECT_EQ(o->get(SelCollective::kBroadcast), "tree");
  EXPECT_EQ(o->get(SelCollective::kReduceScatter), "ring");
  EXPECT_EQ(o->get(SelCollective::kAllGather), "");
  auto cleared = parseAlgoOverrideSpec("allreduce:tree;allreduce:auto");
  ASSERT_TRUE(cleared.isOk());
  EXPECT_EQ(cleared->get(SelCollective::kAllReduce), "");
  EXPECT_TRUE(parseAlgoOverrideSpec("").isOk());
}

TEST(AlgoOverrides, UnknownNamesListTheValidOnes) {
  auto a = parseAlgoOverrideSpec("allreduce:bogus");
  ASSERT_FALSE(a.isOk());
  EXPECT_CONTAINS(a.status().message(), "unknown allreduce algorithm 'bogus'; valid: ring, tree, "
                        "halving_doubling, shm, hierarchical, hierarchical_leader");
  auto c = parseAlgoOverrideSpec("allreduce:ring;gather:ring");
  ASSERT_FALSE(c.isOk());
  EXPECT_CONTAINS(c.status().message(), "unknown collective 'gather'; valid: allreduce, reducescatter, "
                        "allgather, broadcast, reduce, alltoall");
  auto b = parseAlgoOverrideSpec("broadcast:ring");
  ASSERT_FALSE(b.isOk());
  EXPECT_CONTAINS(b.status().message(), "valid: tree");
  auto bare = parseAlgoOverrideSpec("rings");
  ASSERT_FALSE(bare.isOk());
  EXPECT_CONTAINS(bare.status().message(), "'rings'");
}

// ---------------------------------------------------------------------------------------------
// The model

FabricModel testModel() {
  FabricModel m;
  m.intra = {1.0, 1.0 / 8000};   // 1 µs, 8 GB/s
  m.inter = {25.0, 1.0 / 125};   // 25 µs, 125 MB/s (1 Gbit/s)
  m.gammaUsPerByte = 1.0 / 16000;
  m.copyUsPerByte = 1.0 / 16000;
  m.syncUs = 0.5;
  m.coresPerHost = 64;
  m.source = "test";
  return m;
}

std::string pick(const Selector& s, size_t bytes) {
  return s.decide(SelCollective::kAllReduce, bytes).algorithm;
}

TEST(CostModel, OneHostPrefersTheSegment) {
  Selector s(testModel(), Placement::uniform(1, 4, true), {}, {}, false);
  for (size_t bytes : {size_t{8}, size_t{4096}, size_t{1} << 20, size_t{64} << 20}) {
    EXPECT_EQ(pick(s, bytes), "shm") << bytes;
  }
  // Without the segment (BRAID_TRANSPORT=tcp): no shm, and no hierarchical on one host.
  Selector tcp(testModel(), Placement::uniform(1, 4, false), {}, {}, false);
  EXPECT_LT(tcp.costModel().predictUs(SelCollective::kAllReduce, "shm", 8), 0);
  EXPECT_LT(tcp.costModel().predictUs(SelCollective::kAllReduce, "hierarchical", 8), 0);
  EXPECT_NE(pick(tcp, 8), "shm");
}

TEST(CostModel, LatencyBoundAvoidsRingBandwidthBoundAvoidsTree) {
  FabricModel m = testModel();
  m.intra = {20.0, 1.0 / 1000};
  Selector s(m, Placement::uniform(1, 8, false), {}, {}, false);
  const std::string small = pick(s, 8);
  EXPECT_TRUE(small == "halving_doubling" || small == "tree") << small;
  const std::string large = pick(s, 64 << 20);
  EXPECT_TRUE(large == "ring" || large == "halving_doubling") << large;
  const CostModel& cm = s.costModel();
  EXPECT_GT(cm.predictUs(SelCollective::kAllReduce, "ring", 8),
            2 * cm.predictUs(SelCollective::kAllReduce, "halving_doubling", 8));
  EXPECT_GT(cm.predictUs(SelCollective::kAllReduce, "tree", 64 << 20),
            cm.predictUs(SelCollective::kAllReduce, "halving_doubling", 64 << 20));
}

TEST(CostModel, TwoHostsPreferTheHierarchyForLargeMessages) {
  Selector s(testModel(), Placement::uniform(2, 2, true), {}, {}, false);
  const std::string large = pick(s, 16 << 20);
  EXPECT_EQ(large, "hierarchical");
  const CostModel& cm = s.costModel();
  // The flat ring pushes (p−1)/p of S over the shared host link twice per rank pair.
  EXPECT_GT(cm.predictUs(SelCollective::kAllReduce, "ring", 16 << 20),
            1.3 * cm.predictUs(SelCollective::kAllReduce, "hierarchical", 16 << 20));
  EXPECT_LT(cm.predictUs(SelCollective::kAllReduce, "shm", 8), 0);
  const std::string small = pick(s, 8);
  EXPECT_TRUE(small == "hierarchical_leader" || small == "hierarchical") << small;
}

TEST(CostModel, DeterministicAndMonotoneInSize) {
  Selector a(testModel(), Placement::uniform(2, 3, true), {}, {}, false);
  Selector b(testModel(), Placement::uniform(2, 3, true), {}, {}, false);
  for (const std::string& algo : modelAlgorithms(SelCollective::kAllReduce)) {
    double prev = 0;
    for (size_t bytes = 8; bytes <= (size_t{256} << 20); bytes *= 4) {
      const double t = a.costModel().predictUs(SelCollective::kAllReduce, algo, bytes);
      EXPECT_EQ(t, b.costModel().predictUs(SelCollective::kAllReduce, algo, bytes));
      if (t < 0) continue;
      EXPECT_GE(t, prev) << algo << " " << bytes;
      prev = t;
    }
  }
  for (size_t bytes = 8; bytes <= (size_t{256} << 20); bytes *= 4) EXPECT_EQ(pick(a, bytes), pick(b, bytes));
  // The other collectives are priced too.
  for (SelCollective c : {SelCollective::kReduceScatter, SelCollective::kAllGather,
                          SelCollective::kBroadcast, SelCollective::kReduce,
                          SelCollective::kAllToAll}) {
    EXPECT_GT(a.costModel().predictUs(c, modelAlgorithms(c)[0], 1 << 20), 0) << selCollectiveName(c);
  }
}

// Below 16 KiB, β moves to the 8 KiB measurement (copies that stay in the writer's cache).
TEST(LinkCostTest, SmallMessagesTakeTheSmallBeta) {
  LinkCost l;
  l.alphaUs = 1;
  l.betaUsPerByte = 0.5;
  l.betaMidUsPerByte = 1;
  l.betaSmallUsPerByte = 4;
  EXPECT_DOUBLE_EQ(l.beta(false, 4096, 0), 4);
  EXPECT_DOUBLE_EQ(l.beta(false, 8192, 0), 4);
  EXPECT_DOUBLE_EQ(l.beta(false, 16384, 0), 1);
  EXPECT_NEAR(l.beta(false, 8192 * std::sqrt(2.0), 0), 2.5, 1e-9);  // halfway in log2
  EXPECT_DOUBLE_EQ(l.beta(false, 256 * 1024, 0), 0.5);
  // Not measured: the mid-size β all the way down (and the exchange has none of its own here).
  l.betaSmallUsPerByte = 0;
  EXPECT_DOUBLE_EQ(l.beta(false, 4096, 0), 1);
}

// A tree edge pays the one-way latency (the receiver waits for the sender); a ring step the
// exchange latency, which on shm costs more (both sides copy at once).
TEST(CostModel, TreeEdgesPayOneWayRingStepsPayTheExchange) {
  FabricModel m = testModel();
  m.intra.alphaUs = 10;
  m.intra.alphaOneWayUs = 1;
  Selector s(m, Placement::uniform(1, 2, false), {}, {}, false);
  const CostModel& cm = s.costModel();
  // Two ranks: the tree reduces over one edge and broadcasts over it; the ring takes two steps.
  EXPECT_NEAR(cm.predictUs(SelCollective::kAllReduce, "tree", 8), 2.0, 0.1);
  EXPECT_NEAR(cm.predictUs(SelCollective::kAllReduce, "ring", 8), 20.0, 0.1);
  EXPECT_EQ(pick(s, 8), "tree");
  m.intra.alphaOneWayUs = 0;  // unknown: the exchange α for both
  Selector same(m, Placement::uniform(1, 2, false), {}, {}, false);
  EXPECT_NEAR(same.costModel().predictUs(SelCollective::kAllReduce, "tree", 8), 20.0, 0.1);
}

// The per-call cost is the same for every algorithm: it moves every prediction by itself and
// never changes a pick.
TEST(CostModel, CallCostShiftsEveryPredictionAlike) {
  Selector plain(testModel(), Placement::uniform(2, 2, true), {}, {}, false);
  Selector costly(testModel(), Placement::uniform(2, 2, true), {}, {}, false);
  costly.setCallUs(7.5);
  for (SelCollective c :
       {SelCollective::kAllReduce, SelCollective::kReduceScatter, SelCollective::kBroadcast}) {
    for (const std::string& algo : modelAlgorithms(c)) {
      for (size_t bytes : {size_t{8}, size_t{1} << 20}) {
        const double t = plain.costModel().predictUs(c, algo, bytes);
        if (t < 0) {
          EXPECT_LT(costly.costModel().predictUs(c, algo, bytes), 0) << algo;
          continue;
        }
        EXPECT_DOUBLE_EQ(costly.costModel().predictUs(c, algo, bytes), t + 7.5) << algo;
      }
    }
    for (size_t bytes = 8; bytes <= (size_t{64} << 20); bytes *= 8) {
      EXPECT_EQ(plain.decide(c, bytes).algorithm, costly.decide(c, bytes).algorithm) << bytes;
    }
  }
}

TEST(Selector, PrecedenceApiThenEnvThenFileThenModel) {
  auto rules = parseTuningRules("allreduce bytes=0-1K algo=tree chunk=64K\n", "rules");
  ASSERT_TRUE(rules.isOk());
  auto env = parseAlgoOverrideSpec("broadcast:tree");
  ASSERT_TRUE(env.isOk());
  Selector s(testModel(), Placement::uniform(1, 4, true), *env, *rules, false);
  Decision d = s.decide(SelCollective::kAllReduce, 512);
  EXPECT_EQ(d.algorithm, "tree");
  EXPECT_EQ(d.chunkBytes, 64u * 1024);
  EXPECT_EQ(d.reason, "tuning file rules:1");
  d = s.decide(SelCollective::kAllReduce, 4096);
  EXPECT_EQ(d.algorithm, "shm");
  EXPECT_EQ(d.reason, "model");
  d = s.decide(SelCollective::kAllReduce, 512, "ring");
  EXPECT_EQ(d.algorithm, "ring");
  EXPECT_EQ(d.reason, "forced by the API");
  auto env2 = parseAlgoOverrideSpec("allreduce:halving_doubling");
  Selector s2(testModel(), Placement::uniform(1, 4, true), *env2, *rules, false);
  d = s2.decide(SelCollective::kAllReduce, 512);
  EXPECT_EQ(d.algorithm, "halving_doubling");
  EXPECT_EQ(d.reason, "BRAID_ALGO=allreduce:halving_doubling");
  const std::string line = s2.explain(SelCollective::kAllReduce, 512, d);
  EXPECT_CONTAINS(line, "explain: allreduce 512 B on 4 ranks / 1 host(s): candidates ring=");
  EXPECT_CONTAINS(line, "halving_doubling=");
  EXPECT_CONTAINS(line, "-> halving_doubling (BRAID_ALGO=allreduce:halving_doubling)");
}

// ---------------------------------------------------------------------------------------------
// The algorithm table

TEST(AlgorithmTable, NamesAreUniquePerCollectiveAndAliasesResolve) {
  for (const Algorithm& a : algorithmTable()) {
    EXPECT_EQ(findAlgorithm(a.collective, a.name), &a) << a.name;
    ASSERT_NE(a.run, nullptr) << a.name;
    ASSERT_NE(a.plan, nullptr) << a.name;
    ASSERT_NE(a.cost, nullptr) << a.name;
  }
  EXPECT_EQ(findAlgorithm(Collective::kAllReduce, "hd"),
            findAlgorithm(Collective::kAllReduce, "rabenseifner"));
  EXPECT_EQ(findAlgorithm(Collective::kAllReduce, "h"), nullptr);  // no prefix matching
  EXPECT_EQ(findAlgorithm(Collective::kSend, "ring"), nullptr);
  auto bad = lookupAlgorithm(Collective::kAllGather, "tree");
  ASSERT_FALSE(bad.isOk());
  EXPECT_CONTAINS(bad.status().message(), "unknown allgather algorithm 'tree'; valid: ring, ");
  // Every collective has a row that runs anywhere, listed first: what the selector falls back to.
  for (int c = 0; c <= static_cast<int>(Collective::kBarrier); ++c) {
    const auto rows = algorithmsOf(static_cast<Collective>(c));
    ASSERT_FALSE(rows.empty()) << c;
    EXPECT_STREQ(rows.front()->unavailable(AlgoLayout{}), "") << rows.front()->name;
  }
}

// Every algorithm is priced on every layout where it can run, and the model's pick can run.
TEST(AlgorithmTable, EveryRowIsPricedWhereItRuns) {
  for (const Placement& pl : {Placement::uniform(1, 1, false), Placement::uniform(1, 3, true),
                              Placement::uniform(1, 8, false), Placement::uniform(2, 2, true),
                              Placement::uniform(3, 1, false), Placement::uniform(5, 2, true)}) {
    Selector s(testModel(), pl, {}, {}, false);
    for (const Algorithm& a : algorithmTable()) {
      const bool runs = s.costModel().unavailableWhy(a).empty();
      for (size_t bytes : {size_t{0}, size_t{8}, size_t{1} << 20}) {
        const double t = s.costModel().predictUs(a, bytes);
        EXPECT_EQ(t >= 0, runs) << a.name << " on " << pl.size() << " ranks, " << bytes << " B";
      }
    }
    for (int c = 0; c <= static_cast<int>(Collective::kBarrier); ++c) {
      const Decision d = s.decide(static_cast<Collective>(c), 4096);
      ASSERT_NE(d.row, nullptr);
      EXPECT_EQ(d.algorithm, d.row->name);
      EXPECT_TRUE(s.costModel().unavailableWhy(*d.row).empty()) << d.algorithm;
    }
  }
}

// The double binary tree: every rank forwards in at most one tree, so on rank counts that are
// not powers of two (where halving/doubling folds and the binomial tree is deeper than the
// binary one) it wins latency-bound messages when a one-way step costs what an exchange does.
TEST(CostModel, DoubleBinaryTreeWinsSmallMessagesOnFiveHosts) {
  Selector s(testModel(), Placement::uniform(5, 1, false), {}, {}, false);
  EXPECT_EQ(pick(s, 8), "double_binary_tree");
  const CostModel& cm = s.costModel();
  EXPECT_LT(cm.predictUs(SelCollective::kAllReduce, "dbt", 8),
            cm.predictUs(SelCollective::kAllReduce, "tree", 8));
  // Bandwidth-bound, the ring moves less per rank (2(p−1)/p·S against about 2·S).
  EXPECT_EQ(pick(s, 64 << 20), "ring");
  // Where the one-way step is cheaper, the binomial tree's edges win small messages back.
  FabricModel oneWay = testModel();
  oneWay.inter.alphaOneWayUs = 12.5;
  Selector t(oneWay, Placement::uniform(5, 1, false), {}, {}, false);
  EXPECT_EQ(pick(t, 8), "tree");
}

// ---------------------------------------------------------------------------------------------
// Calibration cache

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/braid-selector-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    setParamForTesting("BRAID_CALIBRATION_CACHE", "");
    std::string cmd = "rm -rf '" + dir_ + "'";
    (void)!system(cmd.c_str());
  }
  std::string dir_;
};

TEST_F(CacheTest, ModelRoundTripsThroughTheCacheFile) {
  setParamForTesting("BRAID_CALIBRATION_CACHE", dir_ + "/nested/dir");
  const std::string fp = fabricFingerprint(Placement::uniform(2, 2, true), "auto", "nics=x cores=2");
  const std::string path = cachePathFor(fp);
  ASSERT_EQ(path.rfind(dir_ + "/nested/dir/fabric-", 0), 0u) << path;
  EXPECT_NE(cachePathFor(fabricFingerprint(Placement::uniform(1, 4, true), "auto", "nics=x")),
            path);
  EXPECT_FALSE(readCachedModel(path, fp).isOk());  // not written yet

  FabricModel m = testModel();
  ASSERT_TRUE(writeCachedModel(path, fp, m).isOk());
  auto back = readCachedModel(path, fp);
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back->source, "cache");
  EXPECT_NEAR(back->inter.alphaUs, m.inter.alphaUs, 1e-9);
  EXPECT_NEAR(back->inter.betaUsPerByte / m.inter.betaUsPerByte, 1, 1e-5);
  EXPECT_NEAR(back->gammaUsPerByte / m.gammaUsPerByte, 1, 1e-5);
  EXPECT_EQ(back->coresPerHost, m.coresPerHost);

  // Another fabric with a colliding path, or a damaged file, is a miss, not a wrong model.
  EXPECT_FALSE(readCachedModel(path, fp + " changed").isOk());
  std::ofstream(path) << "fingerprint " << fp << "\nmodel intra_alpha_us=abc\n";
  EXPECT_FALSE(readCachedModel(path, fp).isOk());
}

TEST_F(CacheTest, CanBeTurnedOff) {
  setParamForTesting("BRAID_CALIBRATION_CACHE", "off");
  EXPECT_EQ(cachePathFor("anything"), "");
}

TEST(FabricModelText, SerializeParseRoundTripAndErrors) {
  FabricModel m = testModel();
  m.callUs = 0.25;
  m.intra.alphaOneWayUs = 0.4;
  m.inter.betaSymSmallUsPerByte = 0.002;
  m.copySmallUsPerByte = 0.0015;
  m.copyAloneUsPerByte = 0.0004;
  m.cmaUsPerByte = 0.00013;
  auto back = FabricModel::parse(m.serialize());
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->serialize(), m.serialize());
  EXPECT_DOUBLE_EQ(back->callUs, 0.25);
  EXPECT_DOUBLE_EQ(back->copyAloneUsPerByte, 0.0004);
  EXPECT_DOUBLE_EQ(back->cmaUsPerByte, 0.00013);
  EXPECT_TRUE(back->streamShared);
  // The kind of stores into shared memory travels (and only 0 or 1 is one).
  m.streamShared = false;
  back = FabricModel::parse(m.serialize());
  ASSERT_TRUE(back.isOk());
  EXPECT_FALSE(back->streamShared);
  EXPECT_NE(back->describe().find("plain stores"), std::string::npos);
  EXPECT_FALSE(FabricModel::parse(m.serialize() + " stream_shared=2").isOk());
  EXPECT_FALSE(FabricModel::parse("intra_alpha_us=1").isOk());
  EXPECT_FALSE(FabricModel::parse(m.serialize() + " bogus=1").isOk());
  EXPECT_FALSE(FabricModel::parse("intra_alpha_us=-1 " + m.serialize()).isOk());
}

// Instrumented runs are named so that their probes stay out of the cache (calibration.cc).
TEST(CalibrationCache, InstrumentedRunsAreNamed) {
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_STREQ(instrumentedRun(), "AddressSanitizer");
#elif defined(__SANITIZE_THREAD__)
  EXPECT_STREQ(instrumentedRun(), "ThreadSanitizer");
#else
  const char* was = getenv("LD_PRELOAD");
  const std::string saved = was != nullptr ? was : "";
  unsetenv("LD_PRELOAD");
  EXPECT_EQ(instrumentedRun(), nullptr);
  setenv("LD_PRELOAD", "/usr/lib/libfoo.so", 1);
  EXPECT_EQ(instrumentedRun(), nullptr);
  setenv("LD_PRELOAD",
         "/usr/libexec/valgrind/vgpreload_core-amd64-linux.so:"
         "/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so",
         1);
  EXPECT_STREQ(instrumentedRun(), "valgrind");
  if (was != nullptr) {
    setenv("LD_PRELOAD", saved.c_str(), 1);
  } else {
    unsetenv("LD_PRELOAD");
  }
#endif
}

// The shm collectives' single copies, from the two rates the probe measured (rates as on the
// two VMs: EPYC, a single copy 7.5 GB/s against 12.9 through the segment; Intel, 0.75x).
TEST(ShmPlanPolicy, FollowsTheMeasuredRates) {
  FabricModel m;
  m.copyUsPerByte = 1e-3 / 12.9;
  m.cmaUsPerByte = 1e-3 / 7.5;  // 0.58x a segment copy
  ShmPlan s = makeShmPlan(m, 2, false, false);
  EXPECT_FALSE(s.push);   // half a single copy is priced at 0.86 of a copy: not under 0.7
  EXPECT_FALSE(s.tiled);  // never from the rates (here 2 single copies, 3.4, against 3)
  EXPECT_FALSE(s.gather);  // one single copy (1.72) is priced at 0.86 of two: not under 0.7
  EXPECT_FALSE(s.broadcast);   // loses to one segment copy
  m.cmaUsPerByte = 1e-3 / 10.0;  // 0.78x: one single copy (1.29) at 0.65 of two segment copies
  EXPECT_TRUE(makeShmPlan(m, 2, false, false).gather);
  EXPECT_FALSE(makeShmPlan(m, 2, false, false).broadcast);  // 1.29 against 1
  m.cmaUsPerByte = 1e-3 / 7.5;
  s = makeShmPlan(m, 4, false, false);
  EXPECT_FALSE(s.push);  // 3/4 of a single copy (1.29) loses to one copy
  EXPECT_FALSE(s.tiled);
  m.cmaUsPerByte = m.copyUsPerByte / 0.75;
  s = makeShmPlan(m, 2, false, false);
  EXPECT_TRUE(s.push);
  EXPECT_FALSE(s.tiled);  // priced at 2.67 against 3, but the rates do not predict it: forced only
  EXPECT_TRUE(s.gather);
  // More ranks than cores: no push whatever the rates, unless forced; never the tiled path.
  EXPECT_FALSE(makeShmPlan(m, 2, true, false).push);
  EXPECT_TRUE(makeShmPlan(m, 2, true, true).push);
  EXPECT_FALSE(makeShmPlan(m, 2, true, false).tiled);
  EXPECT_FALSE(makeShmPlan(m, 2, true, true).tiled);
  // Not measured (the default model, an older cache's fields): all but the tiled path, the push
  // only uncrowded.
  m.cmaUsPerByte = 0;
  s = makeShmPlan(m, 4, false, false);
  EXPECT_TRUE(s.push);
  EXPECT_FALSE(s.tiled);
  EXPECT_TRUE(s.gather);
  EXPECT_TRUE(s.broadcast);
  EXPECT_FALSE(makeShmPlan(m, 4, true, false).push);
  // Forced: both, even where the rates say no.
  m.cmaUsPerByte = 10 * m.copyUsPerByte;
  s = makeShmPlan(m, 2, false, true);
  EXPECT_TRUE(s.push);
  EXPECT_TRUE(s.tiled);
  EXPECT_TRUE(s.gather);
  EXPECT_TRUE(s.broadcast);
}

// The cost functions price the plan the communicator runs: the segment's agreed view of crowding
// (its single-copy threshold) and BRAID_SHM_CMA=on's force, not the model's core count alone.
TEST(ShmPlanPolicy, CostModelPlansAsTheSegmentAgreed) {
  FabricModel m;
  m.coresPerHost = 2;
  m.copyUsPerByte = 1e-3 / 12.9;
  m.cmaUsPerByte = m.copyUsPerByte / 0.75;  // the push pays (Intel VM)
  Placement pl = Placement::uniform(1, 2, true);
  pl.singleCopyMinBytes = kSingleCopyMinBytes;  // every rank has a core
  EXPECT_TRUE(CostModel(m, pl).shmPlan().push);
  pl.singleCopyMinBytes = kSingleCopyMinBytesCrowded;  // the segment saw more ranks than cores
  EXPECT_FALSE(CostModel(m, pl).shmPlan().push);
  pl.singleCopyForced = true;
  EXPECT_TRUE(CostModel(m, pl).shmPlan().push);
  m.cmaUsPerByte = 10 * m.copyUsPerByte;  // forced: even where the rates say no
  EXPECT_TRUE(CostModel(m, pl).shmPlan().broadcast);
  pl.singleCopyForced = false;
  EXPECT_FALSE(CostModel(m, pl).shmPlan().broadcast);
}

// The shm all-reduce's working set stays in the cache the ranks share: one chunk up to LLC/8L,
// pipelined pieces of LLC/64L (64 KiB at least), the same whatever the rates.
TEST(ShmPlanPolicy, KeepsTheWorkingSetInTheCache) {
  FabricModel m;
  m.llcBytes = 32.0 * 1024 * 1024;
  ShmPlan s = makeShmPlan(m, 2, false, false);
  EXPECT_EQ(s.oneChunkMaxBytes, size_t{2} << 20);
  EXPECT_EQ(s.pieceMaxBytes, size_t{256} << 10);
  s = makeShmPlan(m, 4, true, false);
  EXPECT_EQ(s.oneChunkMaxBytes, size_t{1} << 20);
  EXPECT_EQ(s.pieceMaxBytes, size_t{128} << 10);
  m.llcBytes = 4.0 * 1024 * 1024;
  s = makeShmPlan(m, 8, false, false);
  EXPECT_EQ(s.oneChunkMaxBytes, size_t{64} << 10);
  EXPECT_EQ(s.pieceMaxBytes, size_t{64} << 10);
}

TEST(LocalKernels, MeasureSomethingPlausible) {
  const KernelRates r = measureKernelRates();
  EXPECT_GT(r.reduceUsPerByte, 0);
  EXPECT_LT(r.reduceUsPerByte, 1e-2);  // faster than 100 MB/s
  EXPECT_GT(r.copyUsPerByte, 0);
  EXPECT_LT(r.copyUsPerByte, 1e-2);
  // An idle core's own timings pass the check that keeps a busy machine's out of the cache
  // (the suite may run beside this test: take the kernels again before calling it implausible).
  // Not in an instrumented or unoptimized build, whose reduction kernel the check is meant to
  // reject (ASan+UBSan: 16x the copy's time per byte).
#if !defined(__OPTIMIZE__)
  GTEST_SKIP() << "unoptimized build: its reduction kernel is slow beside libc's memcpy";
#endif
  if (instrumentedRun() != nullptr) GTEST_SKIP() << "instrumented build: " << instrumentedRun();
  bool plausible = kernelRatesPlausible(r);
  for (int i = 0; i < 3 && !plausible; ++i) plausible = kernelRatesPlausible(measureKernelRates());
  EXPECT_TRUE(plausible) << "reduce " << r.reduceUsPerByte << " us/B, copy " << r.copyUsPerByte;
}

TEST(LocalKernels, ReductionSlowerThanTheCheckAllowsIsNotPlausible) {
  // The 3-rank model the 2-core EPYC VM cached from an ASan+UBSan build (before such probes were
  // kept out of the cache): γ 1.29 GB/s, the copy alone 13.2 GB/s. Its neighbours: γ 16-21 GB/s,
  // the copy 23-25.
  EXPECT_FALSE(kernelRatesPlausible({7.73575e-4, 7.57437e-5}));
  EXPECT_TRUE(kernelRatesPlausible({6.23322e-5, 4.37646e-5}));
  EXPECT_TRUE(kernelRatesPlausible({kMaxReducePerCopy * 4e-5, 4e-5}));
  EXPECT_FALSE(kernelRatesPlausible({kMaxReducePerCopy * 4.1e-5, 4e-5}));
  EXPECT_FALSE(kernelRatesPlausible({0, 4e-5}));
  EXPECT_FALSE(kernelRatesPlausible({4e-5, 0}));
}

}  // namespace
}  // namespace braid::detail
