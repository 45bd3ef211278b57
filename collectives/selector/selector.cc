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

std::vector<std::pair<const Algorithm*, double>> Selector::candidates(SelCollective c,
                                                                      size_t bytes) const {
  std::vector<std::pair<const Algorithm*, double>> out;
  for (const Algorithm* a : algorithmsOf(c)) {
    const double t = cost_.predictUs(*a, bytes, cost_.bestChunk(*a, bytes));
    if (t >= 0) out.push_back({a, t});
  }
  return out;
}

Decision Selector::decide(SelCollective c, size_t bytes, const std::string& forced) const {
  return decide(c, bytes, forced.empty() ? nullptr : findAlgorithm(c, forced));
}

Decision Selector::decide(SelCollective c, size_t bytes, const Algorithm* forced) const {
  Decision d;
  const Placement& pl = cost_.placement();
  const bool selectable = static_cast<int>(c) < kSelectableCollectives;
  const TuningRule* rule = nullptr;
  if (forced != nullptr) {
    d.row = forced;
    d.reason = "forced by the API";
  } else if (selectable && overrides_.row(c) != nullptr) {
    d.row = overrides_.row(c);
    d.reason = "BRAID_ALGO=" + overrides_.spec;
  } else if (selectable &&
             (rule = matchRule(rules_, c, bytes, pl.size(), pl.numHosts())) != nullptr &&
             findAlgorithm(c, rule->algorithm) != nullptr) {
    d.row = findAlgorithm(c, rule->algorithm);
    d.chunkBytes = rule->chunkBytes;
    d.reason = "tuning file " + rule->where;
  } else {
    double best = -1, bestSegment = -1;
    const Algorithm* segmentRow = nullptr;
    for (const auto& [row, t] : candidates(c, bytes)) {
      if (best < 0 || t < best) {
        best = t;
        d.row = row;
      }
      if (runsOnSegment(*row) && (bestSegment < 0 || t < bestSegment)) {
        bestSegment = t;
        segmentRow = row;
      }
    }
    d.reason = "model";
    // On one host the transport is itself a copy through shared memory, with a protocol and a
    // hand-off per message on top; its rows also run in two modes, the slow one for hundreds of
    // calls after a change of size (ring all-gather, 4 KiB, 2 ranks: 14 us, then 1.7 us). So a
    // segment row priced within kSegmentPreference (50%) of the best transport row runs
    // instead: on the 2-core VM (2 and 4 ranks, 4 KiB–64 MiB) the segment's all-reduce,
    // all-gather and broadcast ran as fast as ring and tree or faster at every size, also where
    // the model put them up to 40% behind (broadcast, 256 KiB: tree 16.5 us, shm 23.1; they ran
    // 18–28 us in step, 100–145 us in the slow mode, and 17–25 us).
    if (segmentRow != nullptr && segmentRow != d.row &&
        bestSegment <= best * (1 + kSegmentPreference)) {
      d.row = segmentRow;
      d.reason = "model, the segment's row within " +
                 std::to_string(static_cast<int>(kSegmentPreference * 100)) + "%";
    }
    // Nothing can run here by the model's account (it never happens for a table whose first
    // row of every collective runs anywhere): the first row.
    if (d.row == nullptr) {
      const std::vector<const Algorithm*> rows = algorithmsOf(c);
      if (!rows.empty()) d.row = rows.front();
    }
    if (d.row != nullptr) d.chunkBytes = cost_.bestChunk(*d.row, bytes);
  }
  if (d.row == nullptr) return d;
  d.algorithm = d.row->name;
  d.predictedUs = cost_.predictUs(*d.row, bytes, d.chunkBytes);
  if (explain_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (explained_.insert({static_cast<int>(c), bytes, d.row, d.reason}).second) {
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
  for (const auto& [row, t] : candidates(c, bytes)) {
    std::snprintf(buf, sizeof(buf), " %s=%.1fus%s", row->name, t, row == d.row ? "*" : "");
    s += buf;
  }
  s += " -> " + d.algorithm;
  if (d.chunkBytes) s += " chunk=" + std::to_string(d.chunkBytes);
  s += " (" + d.reason;
  if (d.reason.rfind("model", 0) == 0) s += "; " + cost_.model().describe();
  s += ")";
  return s;
}

}  // namespace braid::detail
