// The tuner plugin's one implementation; tuner_v5.cc .. tuner_v2.cc are thin adapters.
//
// Decisions come from a model of NCCL's own schedules over p = nNodes hosts (the intra-node steps
// are NCCL's business), priced with the inter-host link of braid's calibrated fabric model
// (collectives/selector/):
//
//   ring  T = 2(p-1)·α + 2(p-1)/p · n/B     reduce-scatter + all-gather around the nodes
//   tree  T = 2·⌈log2 p⌉·α + 2 · n/B        pipelined reduce up / broadcast down NCCL's double
//                                           binary tree (each node interior in one tree only)
//
// α and B come from BRAID_TUNER_MODEL (a braid calibration file of the same fabric: a braid job's
// calibration cache or braid-tune's output; its `model` line, inter-host link), else from
// BRAID_TUNER_NET_LATENCY_NS and BRAID_TUNER_NET_GBITS. The cheaper algorithm wins when NCCL still
// allows it (a -1 entry is never revived); the protocol is the one NCCL's own table rates cheapest
// within that algorithm's row, and the chosen entry is set to 0. Messages below
// 8 × BRAID_TUNER_CHANNEL_BYTES get ⌈n / BRAID_TUNER_CHANNEL_BYTES⌉ channels; larger ones leave the
// count to NCCL. On one node, for collectives other than all-reduce, and when nothing applies, the
// table is left untouched (no opinion) and the call still succeeds.
//
// Rules take precedence over the model, in this order:
//  1. BRAID_TUNER_FILE, NCCL-specific: one per line, '#' starts a comment,
//       collective,minBytes,maxBytes,algorithm,protocol,channels[,nNodes[,nRanks]]
//     collective in broadcast|reduce|allgather|reducescatter|allreduce; algorithm in tree|ring|
//     collnet_direct|collnet_chain|nvls|nvls_tree|pat; protocol ll|ll128|simple or * (NCCL's
//     cheapest in that row); channels, nNodes, nRanks -1 = any/keep. The first matching rule
//     applies.
//  2. BRAID_TUNING_FILE, braid's own tuning file (docs/tuning-file.md): its first matching rule
//     whose algorithm NCCL also has (ring, tree) applies, with `hosts` matched against nNodes and
//     `ranks` against nRanks; rules naming braid-only algorithms are skipped (logged once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/status.h"
#include "plugin/nccl_abi.h"

namespace braid::plugin::tuner {

struct Rule {
  int coll = -1;
  uint64_t minBytes = 0;
  uint64_t maxBytes = UINT64_MAX;
  int algo = -1;
  int proto = -1;  ///< -1: NCCL's cheapest protocol of the row
  int channels = -1;
  int64_t nNodes = -1;
  int64_t nRanks = -1;
  uint64_t nodesLo = 0, nodesHi = UINT64_MAX;  ///< ranges, from braid's tuning file
  uint64_t ranksLo = 0, ranksHi = UINT64_MAX;
};

/// Parses a rules file's text; errors name the line.
Result<std::vector<Rule>> parseRules(const std::string& text);

struct ModelParams {
  double latencyUs = 8.0;
  double bytesPerUs = 12500.0;  ///< 100 Gbit/s
  uint64_t channelBytes = 262144;
};

/// BRAID_TUNING_FILE rules translated to NCCL's indices (only ring and tree exist in both).
Result<std::vector<Rule>> rulesFromBraidTuningFile(const std::string& path, size_t* skipped);

/// The inter-host link of the `model` line of a braid calibration file (α in µs, bytes per µs).
Result<ModelParams> modelParamsFromCalibrationFile(const std::string& path);

/// What getCollInfo did, for logs and tests.
struct Decision {
  int algo = -1;  ///< -1: no opinion
  int proto = -1;
  int channels = 0;
  double ringUs = 0, treeUs = 0;
  const char* source = "none";  ///< "model", "rule", "tuning file" or "none"
};

class Tuner {
 public:
  /// Reads the BRAID_TUNER_* parameters and the rules file. A bad file is logged (TUNING, WARN)
  /// and ignored: a tuner that fails init would fail NCCL's communicator creation.
  static std::unique_ptr<Tuner> create(size_t nRanks, size_t nNodes);
  Tuner(size_t nRanks, size_t nNodes, ModelParams params, std::vector<Rule> rules,
        std::vector<Rule> braidRules = {});

  /// table: numAlgo rows of numProto floats (NCCL's contiguous [7][3]). Only lowers entries
  /// that are >= 0; *nChannels only written with a deliberate count.
  Decision getCollInfo(int coll, size_t nBytes, float* table, int numAlgo, int numProto,
                       int* nChannels);

  /// The model's costs in µs for n bytes (for tests and braid-info).
  double ringUs(size_t nBytes) const;
  double treeUs(size_t nBytes) const;

 private:
  const size_t nRanks_;
  const size_t nNodes_;
  const ModelParams params_;
  const std::vector<Rule> rules_;
  const std::vector<Rule> braidRules_;
  int lastAlgo_[5] = {-2, -2, -2, -2, -2};  ///< per collective: log only changes of decision
  int lastProto_[5] = {-2, -2, -2, -2, -2};
};

/// NCCL's names of its algorithms (NCCL_ALGO_TREE is tree, ...), protocols and collectives, or
/// "?".
const char* algoName(int algo);
const char* protoName(int proto);
const char* collName(int coll);

}  // namespace braid::plugin::tuner
