// What can override the model: a tuning file (BRAID_TUNING_FILE, docs/tuning-file.md) and
// per-collective forced algorithms (BRAID_ALGO, in the style of NCCL_ALGO).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

/// Reads rule-file text line by line: '#' starts a comment, blanks around a line are dropped,
/// empty lines are skipped; `line(number, text)` gets the others (numbered from 1) and the first
/// error it returns ends the reading. Both rule files (this tuning file and the tuner plugin's
/// BRAID_TUNER_FILE) are read with it.
Status forEachRuleLine(const std::string& text,
                       const std::function<Status(int number, const std::string& line)>& line);

/// Parses tuning-file text; `name` is used in error messages ("name:line: ...").
Result<std::vector<TuningRule>> parseTuningRules(const std::string& text, const std::string& name);
/// Reads and parses a tuning file.
Result<std::vector<TuningRule>> readTuningFile(const std::string& path);
/// The first rule matching (collective, bytes, ranks, hosts), or null.
const TuningRule* matchRule(const std::vector<TuningRule>& rules, SelCollective c, uint64_t bytes,
                            int ranks, int hosts);
/// Formats one rule as a tuning-file line (braid-tune writes these).
std::string formatRule(const TuningRule& rule);

/// Canonical algorithm name for `name` (a name or an alias of the table's rows of `c`), or an
/// error listing the valid names.
Result<std::string> canonicalAlgorithm(SelCollective c, const std::string& name);

/// BRAID_ALGO: a bare algorithm name (all-reduce, as before) or COLLECTIVE:NAME entries joined
/// by ';'. Per collective, the forced algorithm (null = none).
struct AlgoOverrides {
  const Algorithm* forced[kSelectableCollectives] = {};
  std::string spec;  ///< the text they came from
  const Algorithm* row(SelCollective c) const {
    const int i = static_cast<int>(c);
    return i >= 0 && i < kSelectableCollectives ? forced[i] : nullptr;
  }
  /// The forced algorithm's name ("" = none).
  std::string get(SelCollective c) const { return row(c) != nullptr ? row(c)->name : ""; }
};
/// Unknown collectives or algorithms are errors that list the valid names; "auto" clears.
Result<AlgoOverrides> parseAlgoOverrideSpec(const std::string& spec);

}  // namespace braid::detail
