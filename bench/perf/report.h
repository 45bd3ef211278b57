// What braid-perf prints: the header that names the machine, build, launch and parameters, the
// nccl-tests columns per size (text on rank 0's stdout, JSON lines with -J), and the summary.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench/perf/options.h"

namespace braid::perf {

struct MachineInfo {
  std::string cpuModel = "unknown";
  long cpusOnline = 0;
  int cpusUsable = 0;
  std::string l3 = "?";
  double memGiB = 0;
  std::string hostname = "unknown";
  std::string kernel;
};
MachineInfo machineInfo();

/// What the header and the JSON lines describe besides the measurements.
struct RunSetup {
  const CollectiveBench* bench = nullptr;
  const Options* options = nullptr;
  int ranks = 1;
  int hosts = 1;
  int localRanks = 1;
  std::string launch;                  ///< how the ranks were started
  std::vector<std::string> available;  ///< forceable algorithms available on every rank
  std::vector<std::string> running;    ///< the -a list as run ("auto" or names)
  std::string model;                   ///< the selector's model, "" when the bench has none
  bool ceiling = false;                ///< rows carry a ceiling (one host, several ranks)
  std::string noCeiling;               ///< why they do not (empty: not applicable, or they do)
  std::string checkText;               ///< what #wrong checks against
};

/// One size × algorithm: both placements (0 out-of-place, 1 in-place).
struct RowResult {
  size_t bytes = 0;
  size_t count = 0;
  std::string algo;    ///< as requested: a name or "auto"
  std::string label;   ///< the column text: the name, or "auto:<chosen>"
  std::string chosen;  ///< the algorithm that ran
  double predictedUs = -1;
  double ceilingUs = -1;  ///< the memory-bound ceiling's time (runner.cc); negative: none
  double timeUs[2] = {0, 0};
  double wrong[2] = {0, 0};
};

/// Prints on the leader (rank 0) only; every rank may call it alike.
class Report {
 public:
  Report(const RunSetup& setup, bool leader);
  ~Report();
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  /// The header and the column headings; opens the -J file (a failure to open is reported, and
  /// the run goes on without JSON).
  void begin();
  void row(const RowResult& r);
  /// The summary lines (out-of-bounds count, average busbw, per algorithm when several).
  void end(double wrongTotal);

 private:
  void printHeader() const;
  void printColumns() const;
  void writeJson(const RowResult& r, int placement, double algbw, double busbw) const;

  const RunSetup& setup_;
  const bool leader_;
  const MachineInfo machine_;
  const std::string transport_;
  FILE* json_ = nullptr;
  int algoWidth_ = 6;
  double busSum_ = 0;
  int busRows_ = 0;
  std::vector<std::pair<std::string, std::pair<double, int>>> perAlgo_;  // busbw sum and rows
};

}  // namespace braid::perf
