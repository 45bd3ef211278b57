// The selector: for each collective call, the algorithm (and pipelining chunk) to run, and why.
//
// Precedence: an algorithm forced through the API (Communicator::setAlgorithm), then
// BRAID_ALGO, then the first matching rule of BRAID_TUNING_FILE, then the cost model's cheapest
// candidate among the table's rows of the collective that can run here (ties go to the row
// listed first). Every input is identical on every rank (the model is rank 0's calibration, agreed
// through the store; the overrides and file are required to be the same), so every rank decides
// the same. BRAID_EXPLAIN=1 logs each distinct decision once: the candidates with their predicted
// times, the winner and the reason.
#pragma once

#include <cstddef>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/selector/cost_model.h"
#include "collectives/selector/rules.h"

namespace braid::detail {

struct Decision {
  const Algorithm* row = nullptr;  ///< the table's row (null only for a collective without any)
  std::string algorithm;           ///< its name
  size_t chunkBytes = 0;  ///< 0 = BRAID_CHUNK_BYTES
  double predictedUs = -1;
  std::string reason;  ///< "model[, ...]", "BRAID_ALGO=...", "tuning file F:L", "forced by the API"
};

/// On one host, a segment row priced within this share above the best transport row is chosen
/// instead (selector.cc says why).
inline constexpr double kSegmentPreference = 0.5;

class Selector {
 public:
  Selector(const FabricModel& model, const Placement& placement, AlgoOverrides overrides,
           std::vector<TuningRule> rules, bool explain);

  /// `forced`: an algorithm forced through the API (null = none).
  Decision decide(SelCollective c, size_t bytes, const Algorithm* forced = nullptr) const;
  /// The same with `forced` by name or alias ("" = none; a name the table does not have is
  /// ignored).
  Decision decide(SelCollective c, size_t bytes, const std::string& forced) const;
  /// Every available candidate with its predicted µs (at its best chunk), in table order.
  std::vector<std::pair<const Algorithm*, double>> candidates(SelCollective c, size_t bytes) const;
  /// The decision as one explanation line.
  std::string explain(SelCollective c, size_t bytes, const Decision& d) const;

  const CostModel& costModel() const { return cost_; }
  /// See CostModel::setCallUs; before the selector is shared between threads.
  void setCallUs(double us) { cost_.setCallUs(us); }
  const AlgoOverrides& overrides() const { return overrides_; }

 private:
  CostModel cost_;
  AlgoOverrides overrides_;
  std::vector<TuningRule> rules_;
  bool explain_;
  mutable std::mutex mu_;
  mutable std::set<std::tuple<int, size_t, const Algorithm*, std::string>> explained_;
};

}  // namespace braid::detail
