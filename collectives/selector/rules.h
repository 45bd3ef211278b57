// What can override the model: a tuning file (BRAID_TUNING_FILE, docs/tuning-file.md) and
// per-collective forced algorithms (BRAID_ALGO, in the style of NCCL_ALGO).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "braid/status.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {

/// An inclusive range; hi = max means unbounded.
struct Range {
  uint64_t lo = 0;
  uint64_t hi = UINT64_MAX;
  bool contains(uint64_t v) const { return v >= lo && v <= hi; }
};

/// One line of a tuning file: collective, size/ranks/hosts ranges → algorithm [, chunk].
struct TuningRule {
  SelCollective collective = SelCollective::kAllReduce;
  Range bytes, ranks, hosts;
  std::string algorithm;
  size_t chunkBytes = 0;  ///< 0 = BRAID_CHUNK_BYTES
  std::string where;      ///< "FILE:LINE", for explanations
};

/// Parses tuning-file text; `name` is used in error messages ("name:line: ...").
Result<std::vector<TuningRule>> parseTuningRules(const std::string& text, const std::string& name);
/// Reads and parses a tuning file.
Result<std::vector<TuningRule>> readTuningFile(const std::string& path);
/// The first rule matching (collective, bytes, ranks, hosts), or null.
const TuningRule* matchRule(const std::vector<TuningRule>& rules, SelCollective c, uint64_t bytes,
                            int ranks, int hosts);
/// Formats one rule as a tuning-file line (braid-tune writes these).
std::string formatRule(const TuningRule& rule);

/// Canonical algorithm name for `name` (aliases: hd, rabenseifner → halving_doubling; hier →
/// hierarchical; leader → hierarchical_leader), or an error listing the valid names.
Result<std::string> canonicalAlgorithm(SelCollective c, const std::string& name);

/// BRAID_ALGO: "ring" (all-reduce, as before) or "allreduce:ring;broadcast:tree". Per
/// collective, the forced algorithm ("" = none).
struct AlgoOverrides {
  std::string forced[6];
  std::string spec;  ///< the text they came from
  const std::string& get(SelCollective c) const { return forced[static_cast<int>(c)]; }
};
/// Unknown collectives or algorithms are errors that list the valid names; "auto" clears.
Result<AlgoOverrides> parseAlgoOverrideSpec(const std::string& spec);

}  // namespace braid::detail
