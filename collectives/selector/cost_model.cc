#include "collectives/selector/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "collectives/shm_segment.h"
#include "core/copy.h"

namespace braid::detail {

// ---------------------------------------------------------------------------------------------
// FabricModel

double LinkCost::beta(bool symmetric, double messageBytes, double outOfCache) const {
  const double big = symmetric ? sym() : betaUsPerByte;
  const double midRaw = symmetric ? betaSymMidUsPerByte : betaMidUsPerByte;
  const double mid = midRaw > 0 ? midRaw : big;
  const double w = std::clamp(std::log2(std::max(messageBytes, 1.0) / kMidBytes) /
                                  std::log2(kLargeMessageBytes / kMidBytes),
                              0.0, 1.0);
  double b = (1 - w) * mid + w * big;
  const double smallRaw = symmetric ? betaSymSmallUsPerByte : betaSmallUsPerByte;
  if (messageBytes < kMidBytes && smallRaw > 0) {
    const double v = std::clamp(
        std::log2(std::max(messageBytes, 1.0) / kSmallBytes) / std::log2(kMidBytes / kSmallBytes),
        0.0, 1.0);
    b = (1 - v) * smallRaw + v * mid;
  }
  // Out of cache, memory (and the transport's flow control) bound both directions alike.
  return (1 - outOfCache) * b + outOfCache * std::max(b, symLarge());
}

double FabricModel::segmentCopyUsPerByte(double bytes) const {
  return bytes < static_cast<double>(kCopyStreamMinBytes) && copySmallUsPerByte > 0
             ? copySmallUsPerByte
             : copyUsPerByte;
}

std::string FabricModel::serialize() const {
  char buf[2048];
  std::snprintf(buf, sizeof(buf),
                "intra_alpha_us=%.6g intra_beta_us_per_byte=%.6g intra_beta_sym_us_per_byte=%.6g "
                "intra_beta_sym_large_us_per_byte=%.6g inter_alpha_us=%.6g "
                "inter_beta_us_per_byte=%.6g inter_beta_sym_us_per_byte=%.6g "
                "inter_beta_sym_large_us_per_byte=%.6g gamma_us_per_byte=%.6g "
                "copy_us_per_byte=%.6g sync_us=%.6g cores_per_host=%d llc_bytes=%.0f "
                "intra_beta_mid_us_per_byte=%.6g intra_beta_sym_mid_us_per_byte=%.6g "
                "inter_beta_mid_us_per_byte=%.6g inter_beta_sym_mid_us_per_byte=%.6g call_us=%.6g "
                "intra_alpha_one_way_us=%.6g inter_alpha_one_way_us=%.6g "
                "intra_beta_small_us_per_byte=%.6g intra_beta_sym_small_us_per_byte=%.6g "
                "inter_beta_small_us_per_byte=%.6g inter_beta_sym_small_us_per_byte=%.6g "
                "copy_small_us_per_byte=%.6g copy_alone_us_per_byte=%.6g stream_shared=%d "
                "cma_us_per_byte=%.6g",
                intra.alphaUs, intra.betaUsPerByte, intra.sym(), intra.symLarge(), inter.alphaUs,
                inter.betaUsPerByte, inter.sym(), inter.symLarge(), gammaUsPerByte, copyUsPerByte,
                syncUs, coresPerHost, llcBytes, intra.betaMidUsPerByte, intra.betaSymMidUsPerByte,
                inter.betaMidUsPerByte, inter.betaSymMidUsPerByte, callUs, intra.alphaOneWayUs,
                inter.alphaOneWayUs, intra.betaSmallUsPerByte, intra.betaSymSmallUsPerByte,
                inter.betaSmallUsPerByte, inter.betaSymSmallUsPerByte, copySmallUsPerByte,
                copyAloneUsPerByte, streamShared ? 1 : 0, cmaUsPerByte);
  return buf;
}

Result<FabricModel> FabricModel::parse(const std::string& text) {
  constexpr int kMaxCoresPerHost = 1 << 20;
  constexpr double kMaxLlcBytes = 1125899906842624.0;  // 2^50
  FabricModel m;
  std::istringstream in(text);
  std::string item;
  int seen = 0;
  while (in >> item) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return invalidArgument("fabric model: '" + item + "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) {
      return invalidArgument("fabric model: bad value in '" + item + "'");
    }
    if (key == "intra_alpha_us") m.intra.alphaUs = v;
    else if (key == "intra_beta_us_per_byte") m.intra.betaUsPerByte = v;
    else if (key == "intra_beta_sym_us_per_byte") m.intra.betaSymUsPerByte = v;
    else if (key == "inter_beta_sym_us_per_byte") m.inter.betaSymUsPerByte = v;
    else if (key == "intra_beta_sym_large_us_per_byte") m.intra.betaSymLargeUsPerByte = v;
    else if (key == "inter_beta_sym_large_us_per_byte") m.inter.betaSymLargeUsPerByte = v;
    else if (key == "inter_alpha_us") m.inter.alphaUs = v;
    else if (key == "inter_beta_us_per_byte") m.inter.betaUsPerByte = v;
    else if (key == "gamma_us_per_byte") m.gammaUsPerByte = v;
    else if (key == "copy_us_per_byte") m.copyUsPerByte = v;
    else if (key == "sync_us") m.syncUs = v;
    else if (key == "cores_per_host") {
      // An int: a value past its range would be undefined to convert (and a nonsense model).
      if (v > kMaxCoresPerHost || v != std::floor(v)) {
        return invalidArgument("fabric model: cores_per_host in '" + item +
                               "' is not a whole number of cores up to " +
                               std::to_string(kMaxCoresPerHost));
      }
      m.coresPerHost = static_cast<int>(v);
    }
    else if (key == "intra_beta_mid_us_per_byte") m.intra.betaMidUsPerByte = v;
    else if (key == "intra_beta_sym_mid_us_per_byte") m.intra.betaSymMidUsPerByte = v;
    else if (key == "inter_beta_mid_us_per_byte") m.inter.betaMidUsPerByte = v;
    else if (key == "inter_beta_sym_mid_us_per_byte") m.inter.betaSymMidUsPerByte = v;
    else if (key == "call_us") m.callUs = v;
    else if (key == "intra_alpha_one_way_us") m.intra.alphaOneWayUs = v;
    else if (key == "inter_alpha_one_way_us") m.inter.alphaOneWayUs = v;
    else if (key == "intra_beta_small_us_per_byte") m.intra.betaSmallUsPerByte = v;
    else if (key == "intra_beta_sym_small_us_per_byte") m.intra.betaSymSmallUsPerByte = v;
    else if (key == "inter_beta_small_us_per_byte") m.inter.betaSmallUsPerByte = v;
    else if (key == "inter_beta_sym_small_us_per_byte") m.inter.betaSymSmallUsPerByte = v;
    else if (key == "copy_small_us_per_byte") m.copySmallUsPerByte = v;
    else if (key == "copy_alone_us_per_byte") m.copyAloneUsPerByte = v;
    else if (key == "cma_us_per_byte") m.cmaUsPerByte = v;
    else if (key == "stream_shared") {
      if (v != 0 && v != 1) {
        return invalidArgument("fabric model: stream_shared in '" + item + "' is not 0 or 1");
      }
      m.streamShared = v == 1;
    }
    else if (key == "llc_bytes") {
      // Whole bytes (serialize prints no fraction): below one byte is unknown, as 0 is.
      if (v > kMaxLlcBytes) {
        return invalidArgument("fabric model: llc_bytes in '" + item + "' is over 2^50");
      }
      m.llcBytes = v >= 1 ? std::floor(v) : kDefaultLlcBytes;
    }
    else return invalidArgument("fabric model: unknown key '" + key + "'");
    ++seen;
  }
  if (seen < 12) return invalidArgument("fabric model: incomplete ('" + text + "')");
  return m;
}

std::string FabricModel::describe() const {
  auto gbps = [](double beta) { return beta > 0 ? 1e-3 / beta : 0.0; };
  auto link = [&](const LinkCost& l) {
    // The β in effect at each size (an unmeasured one falls back as LinkCost::beta does).
    auto mid = [](double raw, double big) { return raw > 0 ? raw : big; };
    const double oneMid = mid(l.betaMidUsPerByte, l.betaUsPerByte);
    const double symMid = mid(l.betaSymMidUsPerByte, l.sym());
    char b[256];
    std::snprintf(b, sizeof(b),
                  "α %.2f us (one way %.2f) β %.3f GB/s (16 KiB %.3f, 8 KiB %.3f; exchange %.3f, "
                  "16 KiB %.3f, 8 KiB %.3f; out of cache %.3f)",
                  l.alphaUs, l.oneWay(), gbps(l.betaUsPerByte), gbps(oneMid),
                  gbps(mid(l.betaSmallUsPerByte, oneMid)), gbps(l.sym()), gbps(symMid),
                  gbps(mid(l.betaSymSmallUsPerByte, symMid)), gbps(l.symLarge()));
    return std::string(b);
  };
  char buf[448];
  std::snprintf(buf, sizeof(buf),
                "; γ %.2f GB/s; copy %.2f GB/s (8 KiB %.2f; one core alone %.2f; %s stores); "
                "single copy %.2f GB/s; sync %.2f us; call %.2f us; %d cores/host; LLC %.0f MiB; "
                "from %s",
                gbps(gammaUsPerByte), gbps(copyUsPerByte),
                gbps(copySmallUsPerByte > 0 ? copySmallUsPerByte : copyUsPerByte),
                gbps(copyAloneUsPerByte > 0 ? copyAloneUsPerByte : copyUsPerByte),
                streamShared ? "non-temporal" : "plain", gbps(cmaUsPerByte), syncUs, callUs,
                coresPerHost, llcBytes / (1 << 20), source.c_str());
  return "intra " + link(intra) + "; inter " + link(inter) + buf;
}

// ---------------------------------------------------------------------------------------------
// Names

const char* selCollectiveName(SelCollective c) { return collectiveName(c); }

Result<SelCollective> parseSelCollective(const std::string& name) {
  for (int i = 0; i < kSelectableCollectives; ++i) {
    const auto c = static_cast<SelCollective>(i);
    if (name == selCollectiveName(c)) return c;
  }
  return invalidArgument("unknown collective '" + name +
                         "'; valid: allreduce, reducescatter, allgather, broadcast, reduce, "
                         "alltoall");
}

const std::vector<std::string>& modelAlgorithms(SelCollective c) {
  static const std::vector<std::vector<std::string>> kNames = [] {
    std::vector<std::vector<std::string>> names(static_cast<size_t>(Collective::kRecv) + 1);
    for (const Algorithm& a : algorithmTable()) {
      names[static_cast<size_t>(a.collective)].push_back(a.name);
    }
    return names;
  }();
  static const std::vector<std::string> kNone;
  const size_t i = static_cast<size_t>(c);
  return i < kNames.size() ? kNames[i] : kNone;
}

// ---------------------------------------------------------------------------------------------
// Placement

int Placement::numHosts() const {
  int h = 0;
  for (int x : hostOf) h = std::max(h, x + 1);
  return std::max(h, 1);
}

Placement Placement::uniform(int hosts, int perHost, bool segment) {
  Placement p;
  for (int h = 0; h < hosts; ++h) {
    for (int l = 0; l < perHost; ++l) p.hostOf.push_back(h);
  }
  p.segment = segment && perHost > 1;
  return p;
}

// ---------------------------------------------------------------------------------------------
// CostModel

CostModel::CostModel(const FabricModel& model, const Placement& placement)
    : model_(model), placement_(placement) {
  const int p = placement_.size();
  hosts_ = placement_.numHosts();
  std::vector<int> perHost(static_cast<size_t>(hosts_), 0);
  for (int h : placement_.hostOf) ++perHost[h];
  minLocal_ = *std::min_element(perHost.begin(), perHost.end());
  maxLocal_ = *std::max_element(perHost.begin(), perHost.end());
  if (placement_.ranksPerMachine <= 0) placement_.ranksPerMachine = maxLocal_;  // "unknown"
  hostsPerMachine_ = std::max(1, placement_.ranksPerMachine / std::max(maxLocal_, 1));
  layout_.ranks = p;
  layout_.hosts = hosts_;
  layout_.minLocal = minLocal_;
  layout_.maxLocal = maxLocal_;
  layout_.segment = placement_.segment;
  plans_.resize(algorithmTable().size());
  if (p <= 1) return;
  // Each algorithm's schedule over this placement (its file's plan function).
  for (const Algorithm& a : algorithmTable()) a.plan(*this, &plans_[algorithmIndex(a)]);
}

// A message step on a machine whose ranks outnumber its cores: the peer must be scheduled
// first, which costs at least a segment hand-off (timed with every local rank running), even when
// only `cpu` = 1 rank per core takes part in the step (the others wait, yielding, but still get
// their turns); with more active ranks, α stretches by their share.
double CostModel::stepAlpha(double alphaUs, double cpu) const {
  return crowded() ? std::max(alphaUs * cpu, model_.syncUs) : alphaUs;
}

namespace {
// The push and the all-gather's single copy pay where they are priced at under this share of
// the segment copies they replace: the probe's rates flatter the single copy. 2 ranks on the
// EPYC VM: the push, single copy 7.9 GB/s against 15.3, priced at 0.96: 256 KiB 34 us against
// 23 through the segment, 1 MiB 119 against 86, 2 MiB 247 against 200; the all-gather's, 6.6
// against 15.6, priced at 1.18: 4 MiB 276-444 us against 203-267. On the Intel VM the push,
// priced at 0.67, won by 1.3x. (The broadcast keeps the bare comparison: no measurement has
// shown it losing where the rates say it wins. The tiled all-reduce runs only where forced.)
constexpr double kSingleCopyMargin = 0.7;
}  // namespace

ShmPlan makeShmPlan(const FabricModel& m, int localRanks, bool crowded, bool force) {
  ShmPlan s;
  if (m.llcBytes > 0 && localRanks > 0) {
    const double L = localRanks;
    s.oneChunkMaxBytes = static_cast<size_t>(m.llcBytes / (8 * L)) / 4096 * 4096;
    s.pieceMaxBytes =
        std::max<size_t>(64 << 10, static_cast<size_t>(m.llcBytes / (64 * L)) / 4096 * 4096);
  }
  // The tiled all-reduce only where forced: the probe's rates do not tell where it pays. Priced
  // at 0.89 of the pipelined copies on the Intel VM it won 1.35-1.7x (16 MiB); priced at 0.85 on
  // the EPYC VM (single copy 8.28 GB/s against 10.52) it lost 3x: 8 MiB 5.4-5.7 ms against
  // 1.5-1.9, 16 MiB 10.4-10.9 against 3.7-3.9 (braid-perf --ranks 2 --rounds 2, BRAID_SHM_CMA
  // on against off, alternated). With 4 ranks on 2 cores it lost too (8 MiB 6.0 ms against 5.2).
  s.tiled = force && !crowded;
  if (force || m.cmaUsPerByte <= 0 || localRanks < 2) {
    s.push = force || !crowded;
    s.gather = s.broadcast = true;
    return s;
  }
  const double L = localRanks;
  const double cma = m.cmaUsPerByte, copy = m.copyUsPerByte;
  s.push = !crowded && cma * (L - 1) / L < kSingleCopyMargin * copy;
  s.gather = cma * (L - 1) < kSingleCopyMargin * copy * L;
  s.broadcast = cma < copy;
  return s;
}

ShmPlan CostModel::shmPlan() const {
  // Where the host has a segment its agreed single-copy threshold tells crowded apart (what
  // Communicator passes at run time: !ShmSegment::singleCopyUncrowded()).
  const bool agreed = placement_.singleCopyMinBytes != ~size_t{0};
  const bool crowdedHere =
      agreed ? placement_.singleCopyMinBytes != kSingleCopyMinBytes : crowded();
  return makeShmPlan(model_, placement_.size(), crowdedHere, placement_.singleCopyForced);
}

bool CostModel::crowded() const {
  return model_.coresPerHost > 0 && placement_.ranksPerMachine > model_.coresPerHost;
}

// The fraction of a collective's data that misses the last-level cache: every rank of the machine
// holds an input and an output of S bytes in the cache they share. A smooth share rather than a
// step, because the transport's buffers and other tenants take part of the cache too (measured
// here: a 2-rank ring slows from in-cache speed already at 2–8 MiB).
double CostModel::outOfCache(double bytes) const {
  const double ranks = std::max(maxLocal_, placement_.ranksPerMachine);
  const double w = 2 * bytes * ranks;
  return w / (w + std::max(model_.llcBytes, 1.0));
}

// How much slower memory-bound work (copies, reductions) runs on data that misses the cache,
// taken from the intra-host link's out-of-cache probe.
double CostModel::memoryFactor(double bytes) const {
  const double slow = model_.intra.symLarge() / std::max(model_.intra.sym(), 1e-12);
  return 1 + outOfCache(bytes) * std::max(0.0, slow - 1);
}

double CostModel::cpuShare(int activeOnHost) const {
  // Emulated hosts on one machine: the same step runs on each of them at once, so the ranks that
  // share the machine's cores are the active ones of every host there (ranks that wait yield).
  const int active =
      std::min(std::max(activeOnHost, 1) * hostsPerMachine_, placement_.ranksPerMachine);
  if (model_.coresPerHost <= 0 || active <= model_.coresPerHost) return 1;
  return static_cast<double>(active) / model_.coresPerHost;
}

CostModel::Phase CostModel::makePhase(const Messages& m, double frac, double repeat,
                                      double gammaFrac) const {
  Phase ph;
  ph.repeat = repeat;
  ph.frac = frac;
  ph.gammaFrac = gammaFrac;
  const Step st = makeStep({}, m);
  ph.intra = st.intra;
  ph.inter = st.inter;
  ph.interShare = st.share;
  ph.intraShare = cpuShare(st.active);
  std::vector<uint8_t> sends(placement_.hostOf.size(), 0);
  for (const auto& [s, d] : m) sends[s] = 1;
  ph.symmetric = true;
  for (const auto& [s, d] : m) {
    if (!sends[d]) ph.symmetric = false;
  }
  return ph;
}

double CostModel::sumUs(const std::vector<Phase>& phases, double bytes) const {
  double t = 0;
  for (const Phase& ph : phases) {
    const double b = ph.frac * bytes;
    double u = 0;
    const double miss = outOfCache(bytes);
    const double bIntra = model_.intra.beta(ph.symmetric, b, miss);
    const double bInter = model_.inter.beta(ph.symmetric, b, miss);
    if (ph.intra) {
      const double a = ph.symmetric ? model_.intra.alphaUs : model_.intra.oneWay();
      u = std::max(u, stepAlpha(a, ph.intraShare) + ph.intraShare * b * bIntra);
    }
    if (ph.inter) {
      // Shared cores delay the start of a step (the peer must be scheduled), not the wire: the
      // link's bytes are priced by how many messages share it. (An unshaped link between
      // emulated hosts is CPU-bound instead, and so priced low when ranks outnumber cores.)
      const double a = ph.symmetric ? model_.inter.alphaUs : model_.inter.oneWay();
      u = std::max(u, stepAlpha(a, ph.intraShare) + b * bInter * ph.interShare);
    }
    u += ph.intraShare * ph.gammaFrac * bytes * model_.gammaUsPerByte * memoryFactor(bytes);
    t += ph.repeat * u;
  }
  return t;
}

CostModel::Step CostModel::makeStep(const Messages& reduced, const Messages& copied) const {
  Step st;
  const size_t h = static_cast<size_t>(hosts_), p = placement_.hostOf.size();
  std::vector<int> out(h, 0), in(h, 0), active(h, 0);
  std::vector<int> ops(p, 0), recvs(p, 0), reduces(p, 0);
  std::vector<uint8_t> seen(p, 0);
  for (const Messages* m : {&reduced, &copied}) {
    for (const auto& [s, d] : *m) {
      const int hs = placement_.hostOf[s], hd = placement_.hostOf[d];
      if (hs != hd) {
        st.inter = true;
        ++out[hs];
        ++in[hd];
      } else {
        st.intra = true;
      }
      ++ops[s];
      ++ops[d];
      ++recvs[d];
      if (m == &reduced) ++reduces[d];
      for (int r : {s, d}) {
        if (!seen[r]) {
          seen[r] = 1;
          ++active[placement_.hostOf[r]];
        }
      }
    }
  }
  for (size_t i = 0; i < h; ++i) {
    st.share = std::max({st.share, out[i], in[i]});
    st.active = std::max(st.active, active[i]);
  }
  for (size_t r = 0; r < p; ++r) {
    st.ops = std::max(st.ops, ops[r]);
    st.in = std::max(st.in, recvs[r]);
    st.reduces = std::max(st.reduces, reduces[r]);
  }
  return st;
}

// The schedule cuts the vector into c chunks of `chunk` bytes, the last one shorter (reduce/
// tree.cc, broadcast/tree.cc); the first chunk crosses every level (inter-host if any of its
// edges crosses hosts), every further chunk one more edge of the slowest level. (Priced as c equal
// chunks of S/c, a vector just over one chunk came out cheaper than one of exactly a chunk: two
// half-size chunks where the schedule sends a full one and a sliver.) Waiting ranks poll (spin,
// then yield), so a level whose active ranks outnumber the cores pays the shared cores.
double CostModel::pipelinedTreeUs(const std::vector<Step>& levels, bool reduce, size_t bytes,
                                  size_t chunk) const {
  const int p = placement_.size();
  if (p <= 1) return 0;
  const size_t c = bytes <= chunk ? 1 : (bytes + chunk - 1) / chunk;
  const double full = static_cast<double>(std::min(bytes, chunk));
  const double last = static_cast<double>(bytes - (c - 1) * std::min(bytes, chunk));
  const double miss = outOfCache(static_cast<double>(bytes));
  const double mem = memoryFactor(static_cast<double>(bytes));
  auto edge = [&](const Step& level, double cb) {
    const bool inter = level.inter;
    const LinkCost& l = inter ? model_.inter : model_.intra;
    const double cpu = cpuShare(level.active);
    // The wire of an inter-host edge is not slowed by shared cores; a copy through memory is.
    return stepAlpha(l.oneWay(), cpu) + cb * l.beta(false, cb, miss) * (inter ? 1 : cpu) +
           (reduce ? cpu * cb * model_.gammaUsPerByte * mem : 0);
  };
  double first = 0, slowestFull = 0, slowestLast = 0;
  for (const Step& level : levels) {
    const double e = edge(level, full);
    first += e;
    slowestFull = std::max(slowestFull, e);
    slowestLast = std::max(slowestLast, edge(level, last));
  }
  // The sends of one node to its children overlap (separate connections, all posted at once), so
  // a further chunk costs one edge, not one per child (measured: 4 ranks on shm).
  if (c == 1) return first;
  return first + static_cast<double>(c - 2) * slowestFull + slowestLast;
}

std::string CostModel::unavailableWhy(const Algorithm& algo) const {
  return algo.unavailable(layout_);
}

std::string CostModel::unavailableWhy(SelCollective c, const std::string& algo) const {
  const Algorithm* a = findAlgorithm(c, algo);
  if (a == nullptr) return std::string("not an algorithm of ") + selCollectiveName(c);
  return unavailableWhy(*a);
}

size_t CostModel::bestChunk(const Algorithm& algo, size_t bytes) const {
  if (algo.chunkSearchFrom == 0 || !unavailableWhy(algo).empty()) return 0;
  size_t best = 0;
  double bestUs = predictUs(algo, bytes);
  for (size_t chunk = algo.chunkSearchFrom; chunk <= size_t{16} << 20; chunk *= 2) {
    const double t = predictUs(algo, bytes, chunk);
    if (t >= 0 && t < bestUs * 0.98) {  // only a clear gain moves it off the default
      bestUs = t;
      best = chunk;
    }
  }
  return best;
}

double CostModel::predictUs(const Algorithm& algo, size_t bytes, size_t chunkBytes) const {
  if (!unavailableWhy(algo).empty()) return -1;
  if (placement_.size() <= 1) return 0;
  const size_t chunk = std::max<size_t>(chunkBytes ? chunkBytes : placement_.chunkBytes, 4096);
  const double t = algo.cost(*this, plans_[algorithmIndex(algo)], bytes, chunk);
  return t < 0 ? t : t + model_.callUs;
}

double CostModel::predictUs(SelCollective c, const std::string& algo, size_t bytes,
                            size_t chunkBytes) const {
  const Algorithm* a = findAlgorithm(c, algo);
  return a != nullptr ? predictUs(*a, bytes, chunkBytes) : -1;
}

}  // namespace braid::detail
