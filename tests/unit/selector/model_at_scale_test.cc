// The cost model and the selector at scale, without a communicator: world sizes 2…16384 (powers
// of two and odd sizes) on 1, 2 and 8 ranks per host (host-major; an odd world leaves the last
// host short), on a "textbook" fabric (one α and one β per link class, no cache or core effects)
// and on one shaped like a probe's calibration (size-dependent β, out-of-cache β, crowded cores,
// a call cost). braid-tune simulate prints these same Selector decisions.
//
//   - the selector's choice is the cheapest available row of the table (brute force over every
//     row, and over every chunk a row with a chunk search may take);
//   - the ring/tree all-reduce crossover is the closed-form α-β one;
//   - ring's and the double binary tree's large-message predictions are their textbook terms;
//   - every prediction is finite, positive and monotone in size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"
#include "collectives/selector/selector.h"

namespace braid::detail {
namespace {

// 1 GB/s = 1000 bytes per µs.
constexpr double usPerByte(double gbytesPerSecond) { return 1e-3 / gbytesPerSecond; }

FabricModel textbookFabric() {
  FabricModel f;
  const double bi = usPerByte(25), be = usPerByte(12.5);
  f.intra = LinkCost{1.0, bi, bi};
  f.inter = LinkCost{5.0, be, be};
  f.gammaUsPerByte = usPerByte(8);
  f.copyUsPerByte = usPerByte(10);
  f.syncUs = 0.5;
  f.coresPerHost = 0;
  f.source = "test";
  return f;
}

FabricModel calibratedFabric() {
  FabricModel f;
  f.intra.alphaUs = 2.1;
  f.intra.alphaOneWayUs = 1.6;
  f.intra.betaUsPerByte = usPerByte(6);
  f.intra.betaSymUsPerByte = usPerByte(3.5);
  f.intra.betaSymLargeUsPerByte = usPerByte(2.2);
  f.intra.betaMidUsPerByte = usPerByte(3);
  f.intra.betaSymMidUsPerByte = usPerByte(2);
  f.intra.betaSmallUsPerByte = usPerByte(4);
  f.intra.betaSymSmallUsPerByte = usPerByte(2.5);
  f.inter.alphaUs = 28;
  f.inter.alphaOneWayUs = 24;
  f.inter.betaUsPerByte = usPerByte(1.1);
  f.inter.betaSymUsPerByte = usPerByte(0.9);
  f.inter.betaSymLargeUsPerByte = usPerByte(0.8);
  f.inter.betaMidUsPerByte = usPerByte(0.7);
  f.inter.betaSymMidUsPerByte = usPerByte(0.6);
  f.gammaUsPerByte = usPerByte(7);
  f.copyUsPerByte = usPerByte(9);
  f.copySmallUsPerByte = usPerByte(20);
  f.syncUs = 1.3;
  f.callUs = 3.5;
  f.coresPerHost = 4;  // 8 ranks per host crowd them
  f.llcBytes = 16.0 * 1024 * 1024;
  f.source = "test";
  return f;
}

std::vector<int> worldSizes() {
  std::vector<int> w;
  for (int p = 2; p <= 16384; p *= 2) w.push_back(p);
  for (int p : {3, 5, 7, 9, 15, 17, 33, 63, 127, 255, 257, 1023, 1025, 4095, 16383}) w.push_back(p);
  return w;
}

// Host-major: rank r on host r / perHost.
Placement placementOf(int p, int perHost, size_t chunkBytes = 1u << 20) {
  Placement pl;
  for (int r = 0; r < p; ++r) pl.hostOf.push_back(r / perHost);
  pl.segment = perHost > 1 && p > 1;
  pl.chunkBytes = chunkBytes;
  return pl;
}

// 8 B … 4 GiB: every power of two and the odd size three quarters of the way to the next.
std::vector<size_t> sizes() {
  std::vector<size_t> s;
  for (size_t b = 8; b <= (size_t{4} << 30); b *= 2) {
    s.push_back(b);
    if (b < (size_t{4} << 30)) s.push_back(b + b / 2 + b / 4 + 1);
  }
  return s;
}

std::vector<Collective> collectives() {
  std::vector<Collective> c;
  for (int i = 0; i < kSelectableCollectives; ++i) c.push_back(static_cast<Collective>(i));
  c.push_back(Collective::kBarrier);
  return c;
}

std::string where(const char* fabric, int p, int perHost, Collective c, size_t bytes) {
  return std::string(fabric) + " fabric, " + std::to_string(p) + " ranks, " +
         std::to_string(perHost) + " per host, " + collectiveName(c) + " " + std::to_string(bytes) +
         " B";
}

// Reports the first few failures of a sweep, then counts the rest.
struct Failures {
  int n = 0;
  void add(const std::string& what) {
    if (++n <= 15 || getenv("MODEL_AT_SCALE_ALL")) ADD_FAILURE() << what;
  }
  ~Failures() {
    if (n > 15) ADD_FAILURE() << "... and " << n - 15 << " more";
  }
};

struct NamedFabric {
  const char* name;
  FabricModel model;
};
std::vector<NamedFabric> fabrics() {
  return {{"textbook", textbookFabric()}, {"calibrated", calibratedFabric()}};
}

// ---------------------------------------------------------------------------------------------

TEST(ModelAtScale, SelectorPicksTheCheapestAvailableRow) {
  Failures fail;
  for (const NamedFabric& fab : fabrics()) {
    for (int perHost : {1, 2, 8}) {
      for (int p : worldSizes()) {
        const Selector sel(fab.model, placementOf(p, perHost), {}, {}, false);
        const CostModel& m = sel.costModel();
        for (Collective c : collectives()) {
          for (size_t bytes : c == Collective::kBarrier ? std::vector<size_t>{0} : sizes()) {
            const std::string at = where(fab.name, p, perHost, c, bytes);
            // Brute force: every row, at the chunk the model prices it with, and the cheapest
            // of every chunk it could be given.
            const Algorithm *best = nullptr, *segment = nullptr;
            double bestUs = -1, segmentUs = -1, anyChunkUs = -1;
            for (const Algorithm* a : algorithmsOf(c)) {
              const bool available = m.unavailableWhy(*a).empty();
              const double t = m.predictUs(*a, bytes, m.bestChunk(*a, bytes));
              if (!available) {
                if (t >= 0) fail.add(at + ": " + a->name + " unavailable but priced");
                continue;
              }
              if (best == nullptr || t < bestUs) {
                best = a;
                bestUs = t;
              }
              if (runsOnSegment(*a) && (segment == nullptr || t < segmentUs)) {
                segment = a;
                segmentUs = t;
              }
              std::vector<size_t> chunks = {0};
              for (size_t ch = a->chunkSearchFrom; ch != 0 && ch <= (size_t{16} << 20); ch *= 2) {
                chunks.push_back(ch);
              }
              for (size_t ch : chunks) {
                const double u = m.predictUs(*a, bytes, ch);
                if (anyChunkUs < 0 || u < anyChunkUs) anyChunkUs = u;
              }
            }
            const Decision d = sel.decide(c, bytes);
            if (best == nullptr) {
              fail.add(at + ": no available row");
              continue;
            }
            // On one host a segment row within kSegmentPreference of the cheapest runs instead.
            std::string reason = "model";
            if (segment != nullptr && segment != best &&
                segmentUs <= bestUs * (1 + kSegmentPreference)) {
              best = segment;
              bestUs = segmentUs;
              reason = "model, the segment's row within " +
                       std::to_string(static_cast<int>(kSegmentPreference * 100)) + "%";
            }
            if (d.row != best) {
              fail.add(at + ": selector chose " + d.algorithm + " (" +
                       std::to_string(d.predictedUs) + " us), the cheapest is " + best->name +
                       " (" + std::to_string(bestUs) + " us)");
            }
            if (d.predictedUs != bestUs) {
              fail.add(at + ": decision predicts " + std::to_string(d.predictedUs) +
                       " us, its row at its chunk " + std::to_string(bestUs));
            }
            // The chunk search moves off the default only for a 2% gain.
            const double slack = reason == "model" ? 1 : 1 + kSegmentPreference;
            if (d.predictedUs > anyChunkUs * slack / 0.98 * (1 + 1e-12)) {
              fail.add(at + ": " + d.algorithm + " at " + std::to_string(d.predictedUs) +
                       " us, but some row at some chunk takes " + std::to_string(anyChunkUs));
            }
            if (d.reason != reason) fail.add(at + ": reason " + d.reason + ", expected " + reason);
          }
        }
      }
    }
  }
}

// Where a schedule switches at a fixed size to a different way of running, its price may step
// down there: the model prices what runs, and the larger message really takes the cheaper way.
// (Such a step is a threshold the schedule could take from the model instead; it is listed here,
// one line per switch, so that any other drop fails.) Whether `row` switches between sizes a < b.
bool scheduleSwitchesBetween(const Algorithm& row, const CostModel& m, size_t a, size_t b) {
  const std::string name = row.name;
  auto crosses = [&](size_t t) { return a <= t && t < b; };
  // reduce_scatter/shm.cc: past a half slot (the whole input) the ring over the transport.
  // (The segment's all-gather and broadcast run any size in pieces.)
  const size_t half = m.placement().segmentHalfBytes;
  if (name == "shm" && row.collective == Collective::kReduceScatter) return crosses(half);
  if (row.collective != Collective::kAllReduce) return false;
  // allreduce/shm.cc: one hand-off up to 16 KiB (64 KiB on crowded cores), then reduce-scatter
  // form.
  if (name == "shm") return crosses(16 << 10) || crosses(64 << 10);
  // allreduce/hierarchical.cc, one piece: a shard under 256 KiB is one exchange (two hosts) or
  // halving/doubling, from 256 KiB the ring.
  if (name == "hierarchical" || name == "hierarchical_leader") {
    const size_t k = name == "hierarchical" ? static_cast<size_t>(m.minLocal()) : 1;
    return crosses(k * (size_t{256} << 10) - 1);
  }
  // allreduce/double_binary_tree.cc: each tree's half in c equal chunks, the chunk searched from
  // 64 KiB (algorithms.cc): up to two of those a half is one chunk and the trees do not
  // pipeline; past it, they do.
  if (name == "double_binary_tree") return crosses(2 * row.chunkSearchFrom);
  return false;
}

TEST(ModelAtScale, PredictionsAreFinitePositiveAndMonotoneInSize) {
  Failures fail;
  int switches = 0;
  for (const NamedFabric& fab : fabrics()) {
    for (int perHost : {1, 2, 8}) {
      for (int p : worldSizes()) {
        const Selector sel(fab.model, placementOf(p, perHost), {}, {}, false);
        const CostModel& m = sel.costModel();
        for (Collective c : collectives()) {
          const auto rows = algorithmsOf(c);
          if (c == Collective::kBarrier) {
            for (const Algorithm* a : rows) {
              const double t = m.predictUs(*a, 0);
              if (m.unavailableWhy(*a).empty() && !(std::isfinite(t) && t > 0)) {
                fail.add(where(fab.name, p, perHost, c, 0) + ": " + a->name + " predicts " +
                         std::to_string(t));
              }
            }
            continue;
          }
          // Each row at the chunk the selector prices it with (a chunk is only taken for a 2%
          // gain, so that price may dip by 2% where the chunk changes), and the decision.
          std::vector<double> last(rows.size(), 0);
          double lastDecision = 0;
          size_t lastBytes = 0;
          for (size_t bytes : sizes()) {
            const std::string at = where(fab.name, p, perHost, c, bytes);
            for (size_t i = 0; i < rows.size(); ++i) {
              if (!m.unavailableWhy(*rows[i]).empty()) continue;
              const double t = m.predictUs(*rows[i], bytes, m.bestChunk(*rows[i], bytes));
              if (!(std::isfinite(t) && t > 0)) {
                fail.add(at + ": " + rows[i]->name + " predicts " + std::to_string(t));
              }
              if (t < last[i] * 0.98 * (1 - 1e-9)) {
                if (scheduleSwitchesBetween(*rows[i], m, lastBytes, bytes)) {
                  ++switches;
                } else {
                  fail.add(at + ": " + rows[i]->name + " predicts " + std::to_string(t) +
                           " us, less than " + std::to_string(last[i]) + " us for " +
                           std::to_string(lastBytes) + " B");
                }
              }
              last[i] = t;
            }
            // A decision that preferred the segment's row (up to kSegmentPreference above the
            // cheapest) may be followed by a cheaper transport row: compare with the cheapest.
            const Decision d = sel.decide(c, bytes);
            if (d.predictedUs < lastDecision * 0.98 * (1 - 1e-9) &&
                !scheduleSwitchesBetween(*d.row, m, lastBytes, bytes)) {
              fail.add(at + ": the decision (" + d.algorithm + ") predicts " +
                       std::to_string(d.predictedUs) + " us, less than " +
                       std::to_string(lastDecision) + " us for " + std::to_string(lastBytes) +
                       " B");
            }
            lastDecision = d.predictedUs;
            if (d.reason != "model") {
              for (size_t i = 0; i < rows.size(); ++i) {
                if (m.unavailableWhy(*rows[i]).empty())
                  lastDecision = std::min(lastDecision, last[i]);
              }
            }
            lastBytes = bytes;
          }
        }
      }
    }
  }
  // The listed switches do show (else the list is stale).
  EXPECT_GT(switches, 0);
}

// ---------------------------------------------------------------------------------------------
// Closed forms on the textbook fabric (one α and β per link class; host-major placement).
//
// Tree all-reduce (binomial reduce + broadcast, one chunk): every level of the tree is one edge
// α + S·β (+ S·γ on the way up), intra-host for the levels below log2(ranks per host):
//   T_tree = 2·Σ_levels α_l + S·(2·Σ_levels β_l + L·γ),  L = ⌈log2 p⌉.
// Ring: 2(p−1) steps of S/p over the slowest link class the ring uses (the network when it
// spans hosts; one ring edge leaves each host):
//   T_ring = 2(p−1)·α_x + S·(p−1)/p·(2·β_x + γ).
// Both are linear in S, so they cross at S* = (A_ring − A_tree) / (B_tree − B_ring).

struct Linear {
  double a = 0, b = 0;  // a + b·S
};

int ceilLog2(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}

Linear treeClosedForm(const FabricModel& f, int p, int perHost) {
  const int levels = ceilLog2(p);
  int intraLevels = 0;
  while ((1 << intraLevels) < perHost && intraLevels < levels) ++intraLevels;
  if (p <= perHost) intraLevels = levels;
  const int interLevels = levels - intraLevels;
  Linear t;
  t.a = 2 * (intraLevels * f.intra.alphaUs + interLevels * f.inter.alphaUs);
  t.b = 2 * (intraLevels * f.intra.betaUsPerByte + interLevels * f.inter.betaUsPerByte) +
        levels * f.gammaUsPerByte;
  return t;
}

Linear ringClosedForm(const FabricModel& f, int p, int perHost) {
  const LinkCost& x = p > perHost ? f.inter : f.intra;
  const double dp = p;
  return {2 * (dp - 1) * x.alphaUs, (dp - 1) / dp * (2 * x.betaUsPerByte + f.gammaUsPerByte)};
}

TEST(ModelAtScale, RingTreeCrossoverIsTheClosedForm) {
  const FabricModel f = textbookFabric();
  const Algorithm* ring = findAlgorithm(Collective::kAllReduce, "ring");
  const Algorithm* tree = findAlgorithm(Collective::kAllReduce, "tree");
  ASSERT_NE(ring, nullptr);
  ASSERT_NE(tree, nullptr);
  int checked = 0;
  for (int perHost : {1, 2, 8}) {
    for (int p : worldSizes()) {
      const Linear r = ringClosedForm(f, p, perHost), t = treeClosedForm(f, p, perHost);
      // One chunk whatever the size (the closed form is unpipelined), and the default 1 MiB.
      for (size_t chunk : {size_t{1} << 40, size_t{1} << 20}) {
        const CostModel m(f, placementOf(p, perHost, chunk));
        const std::string at = std::to_string(p) + " ranks, " + std::to_string(perHost) +
                               " per host, chunk " + std::to_string(chunk);
        // The closed forms are the model's predictions (one chunk).
        for (size_t s : {size_t{8}, size_t{4096}, size_t{100000}}) {
          if (s > chunk) continue;
          EXPECT_NEAR(m.predictUs(*ring, s), r.a + r.b * s, 1e-9 * (r.a + r.b * s)) << at;
          EXPECT_NEAR(m.predictUs(*tree, s), t.a + t.b * s, 1e-9 * (t.a + t.b * s)) << at;
        }
        if (!(r.a > t.a && t.b > r.b)) {
          // No crossover: ring is cheaper at every size (p ≤ 3, or one host of two ranks).
          EXPECT_LE(m.predictUs(*ring, 8), m.predictUs(*tree, 8) * (1 + 1e-12)) << at;
          continue;
        }
        const double crossover = (r.a - t.a) / (t.b - r.b);
        if (crossover > static_cast<double>(chunk)) continue;  // pipelined there: not this form
        // The model's crossover: the first size at which ring is no dearer than tree.
        size_t lo = 1, hi = static_cast<size_t>(crossover) * 2 + 16;
        ASSERT_GT(m.predictUs(*ring, lo), m.predictUs(*tree, lo)) << at;
        ASSERT_LE(m.predictUs(*ring, hi), m.predictUs(*tree, hi)) << at;
        while (hi - lo > 1) {
          const size_t mid = lo + (hi - lo) / 2;
          (m.predictUs(*ring, mid) > m.predictUs(*tree, mid) ? lo : hi) = mid;
        }
        EXPECT_NEAR(static_cast<double>(hi), crossover, 1 + 1e-9 * crossover)
            << at << ": ring/tree cross at " << hi << " B in the model, at " << crossover
            << " B in closed form";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 40);
}

// Large messages: ring moves 2(p−1)/p·S over each link and reduces (p−1)/p·S; the double binary
// tree moves 2·S per rank (every rank is interior in one tree: its two children's halves in, the
// parent's half down, the other tree's half down as a leaf) and reduces S, plus 4·α per chunk.
TEST(ModelAtScale, RingAndDoubleBinaryTreeMeetTheirTextbookBandwidthTerms) {
  const FabricModel f = textbookFabric();
  const Algorithm* ring = findAlgorithm(Collective::kAllReduce, "ring");
  const Algorithm* dbt = findAlgorithm(Collective::kAllReduce, "double_binary_tree");
  ASSERT_NE(ring, nullptr);
  ASSERT_NE(dbt, nullptr);
  const double beta = f.inter.betaUsPerByte, gamma = f.gammaUsPerByte;
  for (int perHost : {1, 8}) {
    for (int p : worldSizes()) {
      if (p <= perHost) continue;  // the network's terms: the ranks span hosts
      const CostModel m(f, placementOf(p, perHost));
      const std::string at = std::to_string(p) + " ranks, " + std::to_string(perHost) + " per host";
      const double dp = p;
      // Ring: exactly the textbook form, and its slope is the bandwidth term (one ring edge
      // leaves each host, so the host link is not shared).
      for (size_t s : {size_t{1} << 30, size_t{4} << 30}) {
        const double want = 2 * (dp - 1) * f.inter.alphaUs + 2 * (dp - 1) / dp * s * beta +
                            (dp - 1) / dp * s * gamma;
        EXPECT_NEAR(m.predictUs(*ring, s), want, 1e-9 * want) << at << ", " << s << " B";
      }
      const double s1 = double(size_t{1} << 30), s2 = double(size_t{4} << 30);
      const double slope =
          (m.predictUs(*ring, size_t{4} << 30) - m.predictUs(*ring, size_t{1} << 30)) / (s2 - s1);
      EXPECT_NEAR(slope, (dp - 1) / dp * (2 * beta + gamma), 1e-9 * slope) << at;
      // One rank per host, every tree edge its own host link; from 8 ranks some rank is interior
      // with two children in one tree (fewer ranks move less than 2·S).
      if (perHost != 1 || p < 8) continue;
      // Double binary tree at its best chunk, 4 GiB: c chunks per tree; c − 1 full rounds move
      // (c − 1)/c of 2·S·β + S·γ, and the pipeline fill (2·⌊log2 p⌋ rounds) at most that many
      // further full rounds: within 6% of the textbook term at 16384 ranks.
      const size_t big = size_t{4} << 30;
      const size_t chunk = m.bestChunk(*dbt, big) ? m.bestChunk(*dbt, big) : size_t{1} << 20;
      const double t = m.predictUs(*dbt, big, chunk);
      const double textbook = 2 * big * beta + big * gamma;
      const double chunks = std::ceil(static_cast<double>(big / 2) / chunk);
      int fill = 0;
      while ((2 << fill) <= p) ++fill;
      fill *= 2;
      const double round = textbook / chunks + 4 * f.inter.alphaUs;
      EXPECT_GE(t, (chunks - 1) * round * (1 - 1e-9)) << at;
      EXPECT_LE(t, (chunks - 1 + fill) * round * (1 + 1e-9)) << at;
      EXPECT_LE(t, textbook * 1.06) << at << ": " << t << " us, textbook " << textbook;
      // Its bandwidth term does not grow with p (ring's approaches the same 2·S·β from below).
      const double dbtSlope = (m.predictUs(*dbt, big, size_t{16} << 20) -
                               m.predictUs(*dbt, big / 4, size_t{16} << 20)) /
                              (0.75 * static_cast<double>(big));
      // (c − 1) further rounds of 4·α + 4·b·β + 2·b·γ, b = 16 MiB: c = S / 32 MiB.
      EXPECT_NEAR(dbtSlope, 2 * beta + gamma + 4 * f.inter.alphaUs / double(size_t{32} << 20),
                  1e-6 * dbtSlope)
          << at;
    }
  }
}

}  // namespace
}  // namespace braid::detail
