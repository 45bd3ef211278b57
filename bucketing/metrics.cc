// Step metrics as JSON lines and as a Prometheus text file (BRAID_METRICS_FILE).
//
// FILE gets one JSON object per step, appended with a single write() (whole lines even if
// several processes share the file). FILE.prom is rewritten each step through a temporary file
// and rename(), as the node_exporter textfile collector expects: gauges of the last step plus
// counters since the Bucketer was created.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "braid/bucketer.hpp"
#include "braid/comm.hpp"
#include "bucketing/bucketer_impl.h"
#include "core/log.h"

namespace braid {

namespace {
std::string num(double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}
}  // namespace

std::string stepMetricsJson(const StepMetrics& m, int rank) {
  std::string s =
      "{\"rank\":" + std::to_string(rank) + ",\"step\":" + std::to_string(m.step) +
      ",\"communicated\":" + (m.communicated ? "true" : "false") +
      ",\"rebuilt\":" + (m.rebuilt ? "true" : "false") + ",\"step_ms\":" + num(m.stepMs) +
      ",\"compute_ms\":" + num(m.computeMs) + ",\"comm_ms\":" + num(m.commMs) +
      ",\"exposed_ms\":" + num(m.exposedMs) + ",\"eta\":" + num(m.eta) +
      ",\"overlap\":" + num(m.overlap) + ",\"bytes\":" + std::to_string(m.bytes) +
      ",\"wire_bytes\":" + std::to_string(m.wireBytes) + ",\"max_skew_ms\":" + num(m.maxSkewMs) +
      ",\"slowest_rank\":" + std::to_string(m.slowestRank) + ",\"skew_clock\":\"" + m.skewClock +
      "\",\"tail_by_caller\":" + (m.tailByCaller ? "true" : "false") +
      ",\"buckets\":[";
  for (size_t k = 0; k < m.buckets.size(); ++k) {
    const BucketMetrics& b = m.buckets[k];
    if (k > 0) s += ",";
    s += "{\"bytes\":" + std::to_string(b.bytes) +
         ",\"wire_bytes\":" + std::to_string(b.wireBytes) + ",\"codec\":\"" + b.codec + "\"" +
         ",\"params\":" + std::to_string(b.params) + ",\"ready_ms\":" + num(b.readyMs) +
         ",\"start_ms\":" + num(b.startMs) + ",\"done_ms\":" + num(b.doneMs) +
         ",\"skew_ms\":" + num(b.skewMs) + ",\"slowest_rank\":" + std::to_string(b.slowestRank) +
         "}";
  }
  s += "]}";
  return s;
}

std::string stepMetricsPrometheus(const StepMetrics& m, int rank) {
  const std::string lbl = "{rank=\"" + std::to_string(rank) + "\"}";
  std::string s;
  auto gauge = [&](const char* name, const char* help, double v) {
    s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + lbl +
         " " + num(v) + "\n";
  };
  gauge("braid_bucketer_step", "Index of the last finished step", static_cast<double>(m.step));
  gauge("braid_bucketer_step_seconds", "Last step: beginStep to finishStep returned",
        m.stepMs * 1e-3);
  gauge("braid_bucketer_compute_seconds", "Last step: beginStep to finishStep called",
        m.computeMs * 1e-3);
  gauge("braid_bucketer_comm_seconds", "Last step: sum of bucket collective durations",
        m.commMs * 1e-3);
  gauge("braid_bucketer_exposed_seconds", "Last step: communication not hidden behind compute",
        m.exposedMs * 1e-3);
  gauge("braid_bucketer_overlap_efficiency", "Last step: 1 - exposed/comm", m.eta);
  gauge("braid_bucketer_overlap_fraction", "Last step: share of comm time overlapping compute",
        m.overlap);
  gauge("braid_bucketer_bytes", "Last step: bytes all-reduced", static_cast<double>(m.bytes));
  gauge("braid_bucketer_wire_bytes",
        "Last step: bytes this rank handed to collectives (compressed payloads)",
        static_cast<double>(m.wireBytes));
  gauge("braid_bucketer_buckets", "Last step: number of buckets",
        static_cast<double>(m.buckets.size()));
  gauge("braid_bucketer_max_skew_seconds", "Last step: largest straggler skew of a bucket",
        m.maxSkewMs * 1e-3);
  gauge("braid_bucketer_slowest_rank", "Last step: rank that arrived last at the worst bucket",
        m.slowestRank);
  return s;
}

void Bucketer::Impl::writeMetricsFile(const StepMetrics& m) {
  const int rank = comm_->rank();
  const std::string line = stepMetricsJson(m, rank) + "\n";
  const int fd = ::open(metricsPath_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    static std::atomic<bool> warned{false};  // once per process: must not flood the log
    if (!warned.exchange(true)) {
      BRAID_WARN("bucketer: cannot write metrics to %s", metricsPath_.c_str());
    }
  }
  if (fd >= 0) ::close(fd);
  const std::string prom = metricsPath_ + ".prom", tmp = prom + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  const std::string text = stepMetricsPrometheus(m, rank);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) == 0 && ok) std::rename(tmp.c_str(), prom.c_str());
}

}  // namespace braid
