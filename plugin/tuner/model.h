// The tuner plugin's one implementation; tuner_v6.cc .. tuner_v2.cc are thin adapters.
//
// Decisions come from a model of NCCL's own schedules over p = nNodes hosts (the intra-node steps
// are NCCL's business), priced with the inter-host link of braid's calibrated fabric model
// (collectives/selector/). n is NCCL's nBytes: the vector for all-reduce, the full buffer (all p
// blocks) for all-gather and reduce-scatter.
//
//   all-reduce
//     ring  T = 2(p-1)·α + 2(p-1)/p · n/B    reduce-scatter + all-gather around the nodes
//     tree  T = 2·⌈log2 p⌉·α + 2 · n/B       pipelined reduce up / broadcast down NCCL's double
//                                            binary tree (each node interior in one tree only)
//   all-gather, reduce-scatter (priced only at one GPU per node, nRanks == nNodes, the only
//   placement where NCCL offers PAT)
//     ring  T = (p-1)·α + (p-1)/p · n/B
//     pat   T = (⌈p/R⌉ - 1 + ⌈log2 R⌉)·α + (p-1)/p · n/B
//           R = min(2^⌈log2 p⌉, max(1, 2^⌊log2(W·p/n)⌋))
//     PAT (Jeaugey, arXiv:2506.20252) is a Bruck all-gather with its dimensions reversed whose
//     aggregation is bounded by an intermediate buffer W: one transfer carries the blocks of at
//     most R ranks, so it takes ⌈log2 R⌉ aggregated steps for each of ⌈p/R⌉ groups, joined by
//     ⌈p/R⌉ - 1 more. Both ends are the known ones: R >= p gives Bruck's ⌈log2 p⌉ steps, R = 1
//     (one block fills W) the ring's p - 1. Every rank still receives (p-1)/p · n either way, so
//     the bandwidth term is the ring's: the model prefers PAT on p >= 4 nodes while one transfer
//     can carry two blocks or more (n <= p·W/2), and the ring on a tie (p <= 3, where
//     ⌈log2 p⌉ = p - 1, or n > p·W/2). W = ModelParams::patBufferBytes (4 MiB, NCCL_BUFFSIZE's
//     default: an assumption, NCCL does not publish PAT's buffer).
//
// α and B come from BRAID_TUNER_MODEL (a braid calibration file of the same fabric: a braid job's
// calibration cache or braid-tune's output; its `model` line, inter-host link), else from
// BRAID_TUNER_NET_LATENCY_NS and BRAID_TUNER_NET_GBITS. The cheaper algorithm wins when NCCL still
// allows it (a -1 entry is never revived); the protocol is the one NCCL's own table rates cheapest
// within that algorithm's row, and the chosen entry is set to 0. Messages below
// 8 × BRAID_TUNER_CHANNEL_BYTES get ⌈n / BRAID_TUNER_CHANNEL_BYTES⌉ channels; larger ones leave the
// count to NCCL. On one node, for broadcast and reduce, for all-gather/reduce-scatter with more
// than one GPU per node, and when nothing applies, the table is left untouched (no opinion) and
// the call still succeeds.
//
// Chunk size (tuner v6 getChunkSize, called per channel once algorithm and protocol are chosen):
// only for NCCL's tree all-reduce with the SIMPLE protocol across nodes. A channel's c-byte
// chunks flow through D = 2·⌈log2 p⌉ tree edges (up, then down); as in braid's own pipelined
// tree (CostModel::pipelinedTreeUs) the first chunk crosses every edge and every further one
// adds one edge:
//     T(c) = (D - 1 + n/c) · (α + c/B)   minimal at   c* = sqrt(n · α · B / (D - 1))
// c* is rounded down to SIMPLE's 512-byte grain and at least one grain. It only ever lowers
// NCCL's chunk (a shorter pipeline fill on mid-size messages over many nodes); where c* is
// larger, and for every other algorithm or protocol (ring and PAT steps gain nothing from
// smaller pieces in this model; LL/LL128 chunks are tied to their flag lines), NCCL's value
// stays.
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
  double patBufferBytes = 4.0 * 1024 * 1024;  ///< W of the PAT price (see the top of this file)
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
  double ringUs = 0, treeUs = 0, patUs = 0;  ///< the prices compared (0 = not priced)
  const char* source = "none";               ///< "model", "rule", "tuning file" or "none"
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

  /// The chunk for one channel's nBytes once NCCL chose algo/proto (getChunkSize): NCCL's own
  /// `ncclChunk` where the model has no better answer.
  size_t chunkSize(int coll, size_t nBytes, int algo, int proto, int nChannels,
                   size_t ncclChunk) const;

  /// The model's costs in µs for n bytes (for tests and braid-info): all-reduce's ring and tree,
  /// all-gather/reduce-scatter's ring and PAT.
  double ringUs(size_t nBytes) const;
  double treeUs(size_t nBytes) const;
  double ringGatherUs(size_t nBytes) const;
  double patUs(size_t nBytes) const;

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
