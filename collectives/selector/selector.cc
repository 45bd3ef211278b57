#include "collectives/selector/selector.h"

#include <cstdio>

#include "core/log.h"

namespace braid::detail {

Selector::Selector(const FabricModel& model, const Placement& placement, AlgoOverrides overrides,
                   std::vector<TuningRule> rules, bool explain)
    : cost_(model, placement),
      overrides_(std::move(overrides)),
      rules_(std::move(rules)),
      explain_(explain) {}

std::vector<std::pair<std::string, double>> Selector::candidates(SelCollective c,
                                                                 size_t bytes) const {
  std::vector<std::pair<std::string, double>> out;
  for (const std::string& a : modelAlgorithms(c)) {
    const double t = cost_.predictUs(c, a, bytes, cost_.bestChunk(c, a, bytes));
    if (t >= 0) out.push_back({a, t});
  }
  return out;
}

Decision Selector::decide(SelCollective c, size_t bytes, const std::string& forced) const {
  Decision d;
  const Placement& pl = cost_.placement();
  if (!forced.empty()) {
    d.algorithm = forced;
    d.reason = "forced by the API";
  } else if (!overrides_.get(c).empty()) {
    d.algorithm = overrides_.get(c);
    d.reason = "BRAID_ALGO=" + overrides_.spec;
  } else if (const TuningRule* r = matchRule(rules_, c, bytes, pl.size(), pl.numHosts())) {
    d.algorithm = r->algorithm;
    d.chunkBytes = r->chunkBytes;
    d.reason = "tuning file " + r->where;
  } else {
    double best = -1;
    for (const auto& [name, t] : candidates(c, bytes)) {
      if (best < 0 || t < best) {
        best = t;
        d.algorithm = name;
      }
    }
    d.chunkBytes = cost_.bestChunk(c, d.algorithm, bytes);
    d.reason = "model";
  }
  d.predictedUs = cost_.predictUs(c, d.algorithm, bytes, d.chunkBytes);
  if (explain_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (explained_.insert({static_cast<int>(c), bytes, d.algorithm, d.reason}).second) {
      logMessage(LogLevel::kWarn, __FILE__, __LINE__, "%s", explain(c, bytes, d).c_str());
    }
  }
  return d;
}

std::string Selector::explain(SelCollective c, size_t bytes, const Decision& d) const {
  const Placement& pl = cost_.placement();
  std::string s = "explain: " + std::string(selCollectiveName(c)) + " " + std::to_string(bytes) +
                  " B on " + std::to_string(pl.size()) + " ranks / " +
                  std::to_string(pl.numHosts()) + " host(s): candidates";
  char buf[96];
  for (const auto& [name, t] : candidates(c, bytes)) {
    std::snprintf(buf, sizeof(buf), " %s=%.1fus%s", name.c_str(), t,
                  name == d.algorithm ? "*" : "");
    s += buf;
  }
  s += " -> " + d.algorithm;
  if (d.chunkBytes) s += " chunk=" + std::to_string(d.chunkBytes);
  s += " (" + d.reason;
  if (d.reason == "model") s += "; " + cost_.model().describe();
  s += ")";
  return s;
}

}  // namespace braid::detail
