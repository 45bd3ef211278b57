// The selector: for each collective call, the algorithm (and pipelining chunk) to run, and why.
//
// Precedence: an algorithm forced through the API (Communicator::setAllReduceAlgorithm), then
// BRAID_ALGO, then the first matching rule of BRAID_TUNING_FILE, then the cost model's cheapest
// candidate. Every input is identical on every rank (the model is rank 0's calibration, agreed
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
  std::string algorithm;
  size_t chunkBytes = 0;  ///< 0 = BRAID_CHUNK_BYTES
  double predictedUs = -1;
  std::string reason;  ///< "model", "BRAID_ALGO=...", "tuning file F:L", "forced by the API"
};

class Selector {
 public:
  Selector(const FabricModel& model, const Placement& placement, AlgoOverrides overrides,
           std::vector<TuningRule> rules, bool explain);

  /// `forced`: an algorithm forced through the API ("" = none).
  Decision decide(SelCollective c, size_t bytes, const std::string& forced = "") const;
  /// Every available candidate with its predicted µs, in modelAlgorithms order.
  std::vector<std::pair<std::string, double>> candidates(SelCollective c, size_t bytes) const;
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
  mutable std::set<std::tuple<int, size_t, std::string, std::string>> explained_;
};

}  // namespace braid::detail
