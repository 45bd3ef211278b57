#include "plugin/tuner/model.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "collectives/selector/cost_model.h"  // FabricModel: the calibration file's model line
#include "collectives/selector/rules.h"
#include "core/params.h"
#include "core/text.h"
#include "plugin/plugin_log.h"

namespace braid::plugin::tuner {
namespace {

const char* const kAlgoNames[abi::kNumAlgorithms] = {
    "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
const char* const kProtoNames[abi::kNumProtocols] = {"ll", "ll128", "simple"};
const char* const kCollNames[5] = {"broadcast", "reduce", "allgather", "reducescatter",
                                   "allreduce"};

int indexOf(const char* const* names, int count, const std::string& s) {
  for (int i = 0; i < count; ++i) {
    if (s == names[i]) return i;
  }
  return -1;
}

bool parseNumber(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0') return false;
  *out = v;
  return true;
}

/// The protocol of row `algo` with the smallest non-negative cost, or -1 when the row is empty.
int cheapestProto(const float* table, int numProto, int algo) {
  int best = -1;
  for (int p = 0; p < numProto; ++p) {
    const float c = table[algo * numProto + p];
    if (c >= 0 && (best < 0 || c < table[algo * numProto + best])) best = p;
  }
  return best;
}

}  // namespace

const char* algoName(int algo) {
  return algo >= 0 && algo < abi::kNumAlgorithms ? kAlgoNames[algo] : "?";
}
const char* protoName(int proto) {
  return proto >= 0 && proto < abi::kNumProtocols ? kProtoNames[proto] : "?";
}
const char* collName(int coll) { return coll >= 0 && coll < 5 ? kCollNames[coll] : "?"; }

Result<std::vector<Rule>> parseRules(const std::string& text) {
  std::vector<Rule> rules;
  BRAID_RETURN_IF_ERROR(detail::forEachRuleLine(text, [&](int lineNo, const std::string& line) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, ',')) f.push_back(trimBlanks(field));
    auto bad = [&](const std::string& why) {
      return invalidArgument("tuner rules line " + std::to_string(lineNo) + ": " + why +
                             " (expected collective,minBytes,maxBytes,algorithm,protocol,"
                             "channels[,nNodes[,nRanks]])");
    };
    if (f.size() < 6 || f.size() > 8) return bad("has " + std::to_string(f.size()) + " fields");
    Rule r;
    r.coll = indexOf(kCollNames, 5, f[0]);
    if (r.coll < 0) return bad("unknown collective '" + f[0] + "'");
    int64_t lo, hi, ch;
    if (!parseNumber(f[1], &lo) || !parseNumber(f[2], &hi) || lo < 0 || (hi < lo && hi != -1)) {
      return bad("bad byte range '" + f[1] + "'..'" + f[2] + "'");
    }
    r.minBytes = static_cast<uint64_t>(lo);
    r.maxBytes = hi == -1 ? UINT64_MAX : static_cast<uint64_t>(hi);
    r.algo = indexOf(kAlgoNames, abi::kNumAlgorithms, f[3]);
    if (r.algo < 0) return bad("unknown algorithm '" + f[3] + "'");
    if (f[4] != "*") {
      r.proto = indexOf(kProtoNames, abi::kNumProtocols, f[4]);
      if (r.proto < 0) return bad("unknown protocol '" + f[4] + "'");
    }
    if (!parseNumber(f[5], &ch) || ch < -1 || ch > 1024) return bad("bad channels '" + f[5] + "'");
    r.channels = static_cast<int>(ch);
    if (f.size() > 6 && !parseNumber(f[6], &r.nNodes)) return bad("bad nNodes '" + f[6] + "'");
    if (f.size() > 7 && !parseNumber(f[7], &r.nRanks)) return bad("bad nRanks '" + f[7] + "'");
    rules.push_back(r);
    return Status::ok();
  }));
  return rules;
}

Result<std::vector<Rule>> rulesFromBraidTuningFile(const std::string& path, size_t* skipped) {
  BRAID_ASSIGN_OR_RETURN(std::vector<detail::TuningRule> braidRules, detail::readTuningFile(path));
  static const struct {
    detail::SelCollective braid;
    int nccl;
  } kColls[] = {{detail::SelCollective::kBroadcast, abi::kFuncBroadcast},
                {detail::SelCollective::kReduce, abi::kFuncReduce},
                {detail::SelCollective::kAllGather, abi::kFuncAllGather},
                {detail::SelCollective::kReduceScatter, abi::kFuncReduceScatter},
                {detail::SelCollective::kAllReduce, abi::kFuncAllReduce}};
  std::vector<Rule> rules;
  size_t skip = 0;
  for (const detail::TuningRule& br : braidRules) {
    Rule r;
    for (const auto& c : kColls) {
      if (c.braid == br.collective) r.coll = c.nccl;
    }
    // NCCL has an algorithm of the same name (of those two; NCCL's own names, kAlgoNames).
    r.algo = indexOf(kAlgoNames, abi::kNumAlgorithms, br.algorithm);
    if (r.algo != abi::kAlgoRing && r.algo != abi::kAlgoTree) r.algo = -1;
    if (r.coll < 0 || r.algo < 0) {
      ++skip;
      continue;
    }
    r.minBytes = br.bytes.lo;
    r.maxBytes = br.bytes.hi;
    r.nodesLo = br.hosts.lo;
    r.nodesHi = br.hosts.hi;
    r.ranksLo = br.ranks.lo;
    r.ranksHi = br.ranks.hi;
    rules.push_back(r);
  }
  if (skipped != nullptr) *skipped = skip;
  return rules;
}

Result<ModelParams> modelParamsFromCalibrationFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalidArgument("cannot read " + path);
  std::string line, modelLine;
  while (std::getline(in, line)) {
    if (line.rfind("model ", 0) == 0) modelLine = line.substr(6);
  }
  if (modelLine.empty()) return invalidArgument(path + ": no 'model' line (not a calibration file)");
  Result<detail::FabricModel> m = detail::FabricModel::parse(modelLine);
  if (!m.isOk()) return m.status().withContext(path);
  ModelParams p;
  p.latencyUs = m->inter.alphaUs;
  const double beta = m->inter.sym();
  if (!(p.latencyUs >= 0) || !(beta > 0)) return invalidArgument(path + ": no inter-host link");
  p.bytesPerUs = 1.0 / beta;
  return p;
}

std::unique_ptr<Tuner> Tuner::create(size_t nRanks, size_t nNodes) {
  ModelParams p;
  const int64_t latencyNs = paramInt("BRAID_TUNER_NET_LATENCY_NS");
  const int64_t gbits = paramInt("BRAID_TUNER_NET_GBITS");
  const int64_t channelBytes = paramInt("BRAID_TUNER_CHANNEL_BYTES");
  if (latencyNs > 0) p.latencyUs = static_cast<double>(latencyNs) * 1e-3;
  if (gbits > 0) p.bytesPerUs = static_cast<double>(gbits) * 1e9 / 8 / 1e6;
  const char* modelSource = "BRAID_TUNER_NET_*";
  const std::string modelPath = paramString("BRAID_TUNER_MODEL");
  if (!modelPath.empty()) {
    Result<ModelParams> fromFile = modelParamsFromCalibrationFile(modelPath);
    if (fromFile.isOk()) {
      p.latencyUs = fromFile->latencyUs;
      p.bytesPerUs = fromFile->bytesPerUs;
      modelSource = "BRAID_TUNER_MODEL";
    } else {
      BRAID_PLUGIN_WARN(abi::kSubsysTuning, "TUNER/braid: ignoring BRAID_TUNER_MODEL: %s",
                        fromFile.status().toString().c_str());
    }
  }
  p.channelBytes = channelBytes > 0 ? static_cast<uint64_t>(channelBytes) : 0;
  std::vector<Rule> rules;
  const std::string path = paramString("BRAID_TUNER_FILE");
  if (!path.empty()) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    Result<std::vector<Rule>> parsed =
        in ? parseRules(text.str()) : Result<std::vector<Rule>>(systemError("cannot read it"));
    if (parsed.isOk()) {
      rules = std::move(parsed.value());
    } else {
      BRAID_PLUGIN_WARN(abi::kSubsysTuning, "TUNER/braid: ignoring BRAID_TUNER_FILE=%s: %s",
                        path.c_str(), parsed.status().toString().c_str());
    }
  }
  std::vector<Rule> braidRules;
  const std::string tuningPath = paramString("BRAID_TUNING_FILE");
  if (!tuningPath.empty()) {
    size_t skipped = 0;
    Result<std::vector<Rule>> parsed = rulesFromBraidTuningFile(tuningPath, &skipped);
    if (parsed.isOk()) {
      braidRules = std::move(parsed.value());
      if (skipped > 0) {
        BRAID_PLUGIN_INFO(abi::kSubsysTuning,
                          "TUNER/braid: %zu rules of %s name algorithms NCCL does not have; "
                          "skipped",
                          skipped, tuningPath.c_str());
      }
    } else {
      BRAID_PLUGIN_WARN(abi::kSubsysTuning, "TUNER/braid: ignoring BRAID_TUNING_FILE: %s",
                        parsed.status().toString().c_str());
    }
  }
  BRAID_PLUGIN_INFO(abi::kSubsysTuning | abi::kSubsysInit,
                    "TUNER/braid: %zu ranks on %zu nodes; model alpha %.2f us, %.0f MB/s (%s), "
                    "channel bytes %llu; %zu rules from '%s', %zu from '%s'",
                    nRanks, nNodes, p.latencyUs, p.bytesPerUs, modelSource,
                    static_cast<unsigned long long>(p.channelBytes), rules.size(), path.c_str(),
                    braidRules.size(), tuningPath.c_str());
  return std::make_unique<Tuner>(nRanks, nNodes, p, std::move(rules), std::move(braidRules));
}

Tuner::Tuner(size_t nRanks, size_t nNodes, ModelParams params, std::vector<Rule> rules,
             std::vector<Rule> braidRules)
    : nRanks_(nRanks),
      nNodes_(nNodes),
      params_(params),
      rules_(std::move(rules)),
      braidRules_(std::move(braidRules)) {}

// NCCL's own schedules, priced with the calibrated link (not braid's algorithms: NCCL's tree is
// a double binary tree, in which every node is interior in at most one of the two trees).
double Tuner::ringUs(size_t nBytes) const {
  const double p = static_cast<double>(nNodes_);
  if (p < 2) return 0;
  return 2 * (p - 1) * params_.latencyUs +
         2 * (p - 1) / p * static_cast<double>(nBytes) / params_.bytesPerUs;
}

double Tuner::treeUs(size_t nBytes) const {
  const double p = static_cast<double>(nNodes_);
  if (p < 2) return 0;
  return 2 * std::ceil(std::log2(p)) * params_.latencyUs +
         2 * static_cast<double>(nBytes) / params_.bytesPerUs;
}

double Tuner::ringGatherUs(size_t nBytes) const {
  const double p = static_cast<double>(nNodes_);
  if (p < 2) return 0;
  return (p - 1) * params_.latencyUs +
         (p - 1) / p * static_cast<double>(nBytes) / params_.bytesPerUs;
}

// PAT's steps: ⌈log2 R⌉ aggregated ones for each of ⌈p/R⌉ groups of R ranks, plus ⌈p/R⌉ - 1
// joining them, R the most blocks its buffer holds (a power of two, 1..2^⌈log2 p⌉). See model.h.
double Tuner::patUs(size_t nBytes) const {
  const uint64_t p = nNodes_;
  if (p < 2) return 0;
  uint64_t full = 1;  // 2^⌈log2 p⌉: every block fits one transfer
  while (full < p) full <<= 1;
  const double pd = static_cast<double>(p);
  const double blocks = nBytes == 0 ? static_cast<double>(full)
                                    : params_.patBufferBytes * pd / static_cast<double>(nBytes);
  uint64_t r = 1;
  int logR = 0;
  while (r < full && static_cast<double>(r * 2) <= blocks) r <<= 1, ++logR;
  const double steps = static_cast<double>((p + r - 1) / r - 1) + logR;
  return steps * params_.latencyUs +
         (pd - 1) / pd * static_cast<double>(nBytes) / params_.bytesPerUs;
}

size_t Tuner::chunkSize(int coll, size_t nBytes, int algo, int proto, int nChannels,
                        size_t ncclChunk) const {
  (void)nChannels;  // NCCL passes one channel's range (nChannels 1) outside CollNet
  if (coll != abi::kFuncAllReduce || algo != abi::kAlgoTree || proto != abi::kProtoSimple) {
    return ncclChunk;
  }
  if (nNodes_ < 2 || nBytes == 0 || !(params_.latencyUs > 0) || !(params_.bytesPerUs > 0)) {
    return ncclChunk;
  }
  const size_t grain = abi::kChunkGrainBytes[abi::kProtoSimple];
  int levels = 0;  // ⌈log2 p⌉
  while ((uint64_t{1} << levels) < nNodes_) ++levels;
  const double edges = 2.0 * levels;  // D: up the tree, then down
  const double best =
      std::sqrt(static_cast<double>(nBytes) * params_.latencyUs * params_.bytesPerUs / (edges - 1));
  size_t chunk = best >= 1e15 ? ncclChunk : static_cast<size_t>(best) / grain * grain;
  if (chunk < grain) chunk = grain;
  return chunk < ncclChunk ? chunk : ncclChunk;
}

Decision Tuner::getCollInfo(int coll, size_t nBytes, float* table, int numAlgo, int numProto,
                            int* nChannels) {
  Decision d;
  if (table == nullptr || numAlgo <= 0 || numProto <= 0) return d;
  auto choose = [&](int algo, int proto) {
    if (algo < 0 || algo >= numAlgo) return false;
    if (proto < 0) proto = cheapestProto(table, numProto, algo);
    if (proto < 0 || proto >= numProto || table[algo * numProto + proto] < 0) return false;
    table[algo * numProto + proto] = 0.0f;  // lowest possible cost: NCCL takes it
    d.algo = algo;
    d.proto = proto;
    return true;
  };

  auto applyRules = [&](const std::vector<Rule>& rules, const char* source) {
    for (const Rule& r : rules) {
      if (r.coll != coll || nBytes < r.minBytes || nBytes > r.maxBytes) continue;
      if (r.nNodes >= 0 && static_cast<size_t>(r.nNodes) != nNodes_) continue;
      if (r.nRanks >= 0 && static_cast<size_t>(r.nRanks) != nRanks_) continue;
      if (nNodes_ < r.nodesLo || nNodes_ > r.nodesHi) continue;
      if (nRanks_ < r.ranksLo || nRanks_ > r.ranksHi) continue;
      if (!choose(r.algo, r.proto)) continue;  // filtered by NCCL: the next rule may fit
      d.source = source;
      if (r.channels > 0 && nChannels != nullptr) *nChannels = d.channels = r.channels;
      return;
    }
  };
  applyRules(rules_, "rule");
  if (d.algo < 0) applyRules(braidRules_, "tuning file");

  // The model: the cheaper of two priced algorithms, the other when NCCL filtered the first.
  auto applyModel = [&](int a, double aUs, int b, double bUs) {
    const int first = bUs < aUs ? b : a;  // a wins ties
    const int second = first == a ? b : a;
    if (!choose(first, -1) && !choose(second, -1)) return;
    d.source = "model";
    const uint64_t cb = params_.channelBytes;
    if (cb > 0 && nBytes < 8 * cb && nChannels != nullptr) {
      *nChannels = d.channels = static_cast<int>(std::max<uint64_t>(1, (nBytes + cb - 1) / cb));
    }
  };
  if (d.algo < 0 && nNodes_ >= 2 && coll == abi::kFuncAllReduce) {
    d.ringUs = ringUs(nBytes);
    d.treeUs = treeUs(nBytes);
    applyModel(abi::kAlgoRing, d.ringUs, abi::kAlgoTree, d.treeUs);
  } else if (d.algo < 0 && nNodes_ >= 2 && nRanks_ == nNodes_ &&
             (coll == abi::kFuncAllGather || coll == abi::kFuncReduceScatter)) {
    d.ringUs = ringGatherUs(nBytes);
    d.patUs = patUs(nBytes);
    applyModel(abi::kAlgoRing, d.ringUs, abi::kAlgoPat, d.patUs);
  }

  if (coll >= 0 && coll < 5 && (d.algo != lastAlgo_[coll] || d.proto != lastProto_[coll])) {
    lastAlgo_[coll] = d.algo;
    lastProto_[coll] = d.proto;
    if (d.algo < 0) {
      BRAID_PLUGIN_INFO(abi::kSubsysTuning,
                        "TUNER/braid: %s %zu bytes on %zu nodes: no opinion, NCCL decides",
                        collName(coll), nBytes, nNodes_);
    } else {
      BRAID_PLUGIN_INFO(abi::kSubsysTuning,
                        "TUNER/braid: %s %zu bytes on %zu nodes: %s/%s channels %d (%s; ring "
                        "%.1f us, tree %.1f us, pat %.1f us)",
                        collName(coll), nBytes, nNodes_, algoName(d.algo), protoName(d.proto),
                        d.channels, d.source, d.ringUs, d.treeUs, d.patUs);
    }
  }
  return d;
}

}  // namespace braid::plugin::tuner
