// braid-tune: calibrates the fabric, measures every all-reduce algorithm over a size sweep (the
// braid-perf harness, -a all), compares the cost model with the measurements, and writes a
// tuning file (docs/tuning-file.md) with rules where the model's pick loses to the measured best.
//
//   braid-tune --ranks 4 -b 8 -e 256M -f 4 -o braid-tuning.txt
//   scripts/fabric.sh run --hosts 2 --ranks-per-host 2 -- build/bench/tune/braid-tune -o /tmp/t.txt
//
// Every option other than the ones below goes to braid-perf (see braid-perf --help). The fabric
// is calibrated afresh (BRAID_CALIBRATION=probe, which also refreshes the calibration cache) and
// any BRAID_TUNING_FILE is ignored while measuring, so that "auto" is the model's own pick.
//
// Output: per size, the measured time of every algorithm, the model's prediction, the measured
// best and the model's pick; per algorithm, the model's median absolute error and the scale
// factor (median measured/predicted) that would fit it; then the rules written.
//
// `braid-tune simulate ...` measures nothing: it prints what braid would choose on a described
// fabric (simulate.h; braid-tune simulate --help).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/perf/harness.h"
#include "bench/tune/simulate.h"
#include "collectives/selector/rules.h"

namespace {

struct Row {
  std::string algo;    // forced name or "auto:<chosen>"
  std::string chosen;  // algo_chosen
  size_t bytes = 0;
  double timeUs = 0;
  double predictedUs = -1;
  int ranks = 0, hosts = 0;
};

std::string field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  size_t at = line.find(k);
  if (at == std::string::npos) return "";
  at += k.size();
  if (line[at] == '"') {
    const size_t end = line.find('"', at + 1);
    return line.substr(at + 1, end - at - 1);
  }
  size_t end = line.find_first_of(",}", at);
  return line.substr(at, end - at);
}

std::vector<Row> readRows(const std::string& path) {
  std::vector<Row> rows;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    Row r;
    r.algo = field(line, "algo");
    r.chosen = field(line, "algo_chosen");
    r.bytes = std::strtoull(field(line, "bytes").c_str(), nullptr, 10);
    r.timeUs = std::atof(field(line, "time_us").c_str());
    const std::string p = field(line, "predicted_us");
    r.predictedUs = p.empty() ? -1 : std::atof(p.c_str());
    r.ranks = std::atoi(field(line, "ranks").c_str());
    r.hosts = std::atoi(field(line, "hosts").c_str());
    if (!r.algo.empty()) rows.push_back(r);
  }
  return rows;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool isRankZeroOfExternalLaunch() {
  if (getenv("BRAID_PERF_LAUNCHER") != nullptr) return false;  // our own --ranks children
  for (const char* v : {"RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"}) {
    if (const char* x = getenv(v)) return std::strcmp(x, "0") == 0;
  }
  return false;
}

bool launchedAsRank() {
  for (const char* v : {"RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"}) {
    if (getenv(v) != nullptr) return true;
  }
  return false;
}

// Analyses the sweep; returns the process exit code.
int analyze(const std::string& jsonPath, const std::string& outPath, double margin) {
  const std::vector<Row> rows = readRows(jsonPath);
  if (rows.empty()) {
    std::fprintf(stderr, "braid-tune: no measurements in %s\n", jsonPath.c_str());
    return 1;
  }
  const int ranks = rows[0].ranks, hosts = rows[0].hosts;
  // (algo, bytes) → mean of the out-of-place and in-place times; the prediction.
  std::map<std::pair<std::string, size_t>, std::pair<double, int>> sum;
  std::map<std::pair<std::string, size_t>, double> pred;
  std::map<size_t, std::string> autoPick;
  std::set<size_t> sizes;
  std::set<std::string> algos;
  for (const Row& r : rows) {
    const bool isAuto = r.algo.rfind("auto", 0) == 0;
    const std::string key = isAuto ? "auto" : r.algo;
    auto& s = sum[{key, r.bytes}];
    s.first += r.timeUs;
    s.second += 1;
    pred[{key, r.bytes}] = r.predictedUs;
    if (isAuto) autoPick[r.bytes] = r.chosen;
    if (!isAuto) algos.insert(r.algo);
    sizes.insert(r.bytes);
  }
  auto measured = [&](const std::string& a, size_t b) {
    auto it = sum.find({a, b});
    return it == sum.end() ? -1.0 : it->second.first / it->second.second;
  };

  std::printf("\n# braid-tune: %d ranks on %d host(s); times in us (measured / model)\n", ranks,
              hosts);
  std::printf("#%11s", "bytes");
  for (const std::string& a : algos) std::printf("  %21s", a.c_str());
  std::printf("  %-20s %-20s %s\n", "measured best", "model pick", "pick/best");
  struct Miss {
    size_t bytes;
    std::string best;
  };
  std::vector<Miss> misses;
  std::map<std::string, std::vector<double>> errors, ratios;
  for (size_t b : sizes) {
    std::printf("%12zu", b);
    std::string best;
    double bestT = -1;
    for (const std::string& a : algos) {
      const double t = measured(a, b);
      const double p = pred.count({a, b}) ? pred[{a, b}] : -1;
      char cell[64];
      if (p >= 0) {
        std::snprintf(cell, sizeof(cell), "%.1f / %.1f", t, p);
      } else {
        std::snprintf(cell, sizeof(cell), "%.1f / -", t);
      }
      std::printf("  %21s", cell);
      if (t > 0 && p > 0) {
        errors[a].push_back(std::fabs(p - t) / t);
        ratios[a].push_back(t / p);
      }
      // Only algorithms the model can price are candidates of a rule.
      if (t > 0 && p >= 0 && (bestT < 0 || t < bestT)) {
        bestT = t;
        best = a;
      }
    }
    const std::string pick = autoPick.count(b) ? autoPick[b] : "?";
    const double pickT = measured(pick, b);
    const double ratio = bestT > 0 && pickT > 0 ? pickT / bestT : 0;
    std::printf("  %-20s %-20s %.2f%s\n", best.c_str(), pick.c_str(), ratio,
                ratio > 1 + margin ? "  <- differs" : "");
    if (ratio > 1 + margin) misses.push_back({b, best});
  }
  std::printf("#\n# model accuracy per algorithm (median |model - measured| / measured; fitted "
              "scale = median measured/model)\n");
  for (const auto& [a, e] : errors) {
    std::printf("#   %-20s median error %5.1f%%  max %6.1f%%  fitted scale %.2f  (%zu sizes)\n",
                a.c_str(), 100 * median(e), 100 * *std::max_element(e.begin(), e.end()),
                median(ratios[a]), e.size());
  }

  // Rules: each miss covers the sizes up to the geometric midpoints with its neighbours; equal
  // neighbouring rules merge.
  std::vector<size_t> all(sizes.begin(), sizes.end());
  std::vector<braid::detail::TuningRule> rules;
  for (const Miss& m : misses) {
    const size_t i = static_cast<size_t>(std::find(all.begin(), all.end(), m.bytes) - all.begin());
    braid::detail::TuningRule r;
    r.collective = braid::detail::SelCollective::kAllReduce;
    r.algorithm = m.best;
    r.bytes.lo = i == 0 ? 0 : static_cast<uint64_t>(std::sqrt(double(all[i - 1]) * all[i])) + 1;
    r.bytes.hi = i + 1 == all.size() ? UINT64_MAX
                                      : static_cast<uint64_t>(std::sqrt(double(all[i]) * all[i + 1]));
    r.ranks.lo = r.ranks.hi = static_cast<uint64_t>(ranks);
    r.hosts.lo = r.hosts.hi = static_cast<uint64_t>(hosts);
    if (!rules.empty() && rules.back().algorithm == r.algorithm &&
        rules.back().bytes.hi + 1 == r.bytes.lo) {
      rules.back().bytes.hi = r.bytes.hi;
    } else {
      rules.push_back(r);
    }
  }
  std::ofstream out(outPath);
  if (!out) {
    std::fprintf(stderr, "braid-tune: cannot write %s\n", outPath.c_str());
    return 1;
  }
  out << "# braid tuning file, written by braid-tune for " << ranks << " ranks on " << hosts
      << " host(s).\n# Rules where the cost model's pick was more than " << margin * 100
      << "% slower than the measured best; other sizes keep the model. Format: "
         "docs/tuning-file.md\n";
  for (const auto& r : rules) out << braid::detail::formatRule(r) << "\n";
  std::printf("#\n# %zu size(s) where the model's pick differs from the measured best; wrote %zu "
              "rule(s) to %s\n",
              misses.size(), rules.size(), outPath.c_str());
  for (const auto& r : rules) std::printf("#   %s\n", braid::detail::formatRule(r).c_str());
  return 0;
}

void usage() {
  std::printf(
      "Usage: braid-tune [--ranks N] [-o FILE] [--json FILE] [--margin PCT] [braid-perf options]\n"
      "       braid-tune simulate --hosts N [...]   (what braid would choose on a described\n"
      "                                             fabric, without running; simulate --help)\n"
      "Calibrates the fabric, measures every all-reduce algorithm and auto over -b..-e (braid-perf\n"
      "-a all), prints model vs measurement, and writes a tuning file (docs/tuning-file.md).\n"
      "  -o, --output FILE   tuning file to write (default braid-tuning.txt)\n"
      "      --json FILE     keep the measurements (braid-perf JSON lines) in FILE\n"
      "      --margin PCT    write a rule where the model's pick is more than PCT%% slower than\n"
      "                      the measured best (default 5)\n"
      "Other options go to braid-perf (--ranks, -b, -e, -f, -n, -w, ...; see braid-perf -h).\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "simulate") == 0) {
    return braid::tune::simulateMain(argc - 1, argv + 1);
  }
  if (launchedAsRank() && getenv("BRAID_PERF_LAUNCHER") != nullptr) {
    // A rank started by our own --ranks launcher: its arguments are already braid-perf's.
    return braid::perf::benchMain(braid::perf::allReduceBench(), argc, argv);
  }
  std::string outPath = "braid-tuning.txt", jsonPath;
  double margin = 0.05;
  std::vector<std::string> fwd = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "braid-tune: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (a == "-o" || a == "--output") {
      outPath = value();
    } else if (a == "--json") {
      jsonPath = value();
    } else if (a == "--margin") {
      margin = std::atof(value().c_str()) / 100;
    } else if (a == "-a" || a == "--algo" || a == "-J" || a == "--json-out") {
      std::fprintf(stderr, "braid-tune: %s is set by braid-tune itself\n", a.c_str());
      return 2;
    } else {
      fwd.push_back(a);
    }
  }
  if (jsonPath.empty()) {
    // Shared by the launcher and its ranks (and by fabric.sh's namespaces: same file system).
    jsonPath = "/tmp/braid-tune-" + std::to_string(launchedAsRank() ? getppid() : getpid()) + ".json";
    if (const char* store = getenv("BRAID_FILE_STORE")) jsonPath = std::string(store) + "/braid-tune.json";
  }
  fwd.insert(fwd.end(), {"-a", "all", "-J", jsonPath});
  setenv("BRAID_CALIBRATION", "probe", 0);
  unsetenv("BRAID_TUNING_FILE");
  std::vector<char*> args;
  for (std::string& s : fwd) args.push_back(s.data());
  args.push_back(nullptr);
  const bool launcher = !launchedAsRank();
  const int rc = braid::perf::benchMain(braid::perf::allReduceBench(),
                                        static_cast<int>(args.size() - 1), args.data());
  if (rc != 0) return rc;
  if (launcher || isRankZeroOfExternalLaunch()) return analyze(jsonPath, outPath, margin);
  return 0;
}
