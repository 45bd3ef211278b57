#include "bench/perf/report.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "braid/git_revision.h"
#include "core/params.h"
#include "topology/sysfs.h"

#ifndef BRAID_PERF_BUILD_TYPE
#define BRAID_PERF_BUILD_TYPE "unknown"
#endif
#ifndef BRAID_PERF_CXX_FLAGS
#define BRAID_PERF_CXX_FLAGS ""
#endif
#ifndef BRAID_PERF_VERSION
#define BRAID_PERF_VERSION "unknown"
#endif
#ifndef BRAID_PERF_SANITIZE
#define BRAID_PERF_SANITIZE ""
#endif

namespace braid::perf {

MachineInfo machineInfo() {
  MachineInfo m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) m.cpuModel = line.substr(colon + 2);
      break;
    }
  }
  m.cpusOnline = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) m.cpusUsable = CPU_COUNT(&set);
  if (const size_t l3 = topo::lastLevelCacheBytes(); l3 > 0) {
    m.l3 = l3 % (size_t{1} << 20) == 0 ? std::to_string(l3 >> 20) + " MiB"
                                       : std::to_string(l3 >> 10) + " KiB";
  }
  m.memGiB = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
             static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0 * 1024.0);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) m.hostname = host;
  utsname u{};
  if (uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release;
  return m;
}

namespace {

std::string compilerText() {
#if defined(__clang__)
  return std::string("clang++ ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("g++ ") + __VERSION__;
#else
  return "unknown compiler";
#endif
}

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string timeText(double us) {
  char buf[32];
  if (us >= 10000.0) {
    std::snprintf(buf, sizeof(buf), "%7.0f", us);
  } else if (us >= 100.0) {
    std::snprintf(buf, sizeof(buf), "%7.1f", us);
  } else {
    std::snprintf(buf, sizeof(buf), "%7.2f", us);
  }
  return buf;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

}  // namespace

Report::Report(const RunSetup& setup, bool leader)
    : setup_(setup),
      leader_(leader),
      machine_(machineInfo()),
      transport_(paramValueText("BRAID_TRANSPORT", nullptr)) {
  for (const std::string& a : setup_.running) {
    size_t w = a.size();
    if (a == "auto") {
      for (const std::string& n : setup_.available) w = std::max(w, n.size() + 5);  // "auto:" + n
    }
    algoWidth_ = std::max(algoWidth_, static_cast<int>(w));
  }
}

Report::~Report() {
  if (json_ != nullptr) std::fclose(json_);
}

void Report::begin() {
  if (!leader_) return;
  const Options& o = *setup_.options;
  if (!o.jsonPath.empty()) {
    json_ = std::fopen(o.jsonPath.c_str(), "w");
    if (json_ == nullptr) {
      std::fprintf(stderr, "braid-perf: cannot write %s: %s\n", o.jsonPath.c_str(),
                   std::strerror(errno));
    }
  }
  printHeader();
  printColumns();
  std::fflush(stdout);
}

void Report::printHeader() const {
  const MachineInfo& mi = machine_;
  const Options& o = *setup_.options;
  std::printf("# braid-perf %s: nccl-tests conventions, busbw = algbw x %s\n", setup_.bench->name,
              setup_.bench->busBwFormula);
  std::printf("# machine    : %s, %ld CPUs online (%d usable), L3 %s, %.1f GiB RAM, host %s, %s\n",
              mi.cpuModel.c_str(), mi.cpusOnline, mi.cpusUsable, mi.l3.c_str(), mi.memGiB,
              mi.hostname.c_str(), mi.kernel.c_str());
  std::printf("# build      : braid %s (git %s), %s, %s, flags \"%s\"%s%s\n", BRAID_PERF_VERSION,
              BRAID_GIT_REVISION, BRAID_PERF_BUILD_TYPE, compilerText().c_str(),
              BRAID_PERF_CXX_FLAGS, *BRAID_PERF_SANITIZE ? ", sanitize=" : "", BRAID_PERF_SANITIZE);
  std::printf("# ranks      : %d on %d host(s), %d on this host; started by %s\n", setup_.ranks,
              setup_.hosts, setup_.localRanks, setup_.launch.c_str());
  const char* src = "default";
  std::string transport = paramValueText("BRAID_TRANSPORT", &src);
  std::printf("# transport  : BRAID_TRANSPORT=%s (%s)%s\n", transport.c_str(), src,
              setup_.hosts == 1 ? "; auto means shm on one host" : "");
  std::printf("# buffers    : %s\n", o.localRegister == 1
                                         ? "shared windows (-R 1: Communicator::allocShared)"
                                         : "malloc (-R 0)");
  if (!setup_.available.empty())
    std::printf("# algorithms : available %s; running %s\n", joined(setup_.available).c_str(),
                joined(setup_.running).c_str());
  if (!setup_.model.empty())
    std::printf("# model      : %s (column \"model\": predicted time of the row's algorithm)\n",
                setup_.model.c_str());
  if (!setup_.ceiling && !setup_.noCeiling.empty()) {
    std::printf("# ceiling    : none (%s)\n", setup_.noCeiling.c_str());
  }
  if (setup_.ceiling) {
    std::string formula = setup_.bench->ceilingFormula;  // its second line, indented, here too
    for (size_t at = formula.find('\n'); at != std::string::npos; at = formula.find('\n', at + 1)) {
      formula.replace(at, 1, "\n#            ");
    }
    std::printf("# ceiling    : %s;\n"
                "#              every rank at once, each byte read across cores from the other\n"
                "#              ranks' memory in a shared window, braid's copy and reduce\n"
                "#              kernel, in this run (column \"ceil\"); %%ceil = ceil / time\n",
                formula.c_str());
  }
  char step[48];
  if (o.stepBytes) {
    std::snprintf(step, sizeof(step), "-i %zu", o.stepBytes);
  } else {
    std::snprintf(step, sizeof(step), "-f %g", o.stepFactor);
  }
  char rooted[32] = "";
  if (setup_.bench->rooted) std::snprintf(rooted, sizeof(rooted), " -r %d", o.root);
  std::printf(
      "# parameters : -b %zu -e %zu %s -n %d -w %d --rounds %d -c %d -o %s -d %s%s -a %s -J %s\n",
      o.minBytes, o.maxBytes, step, o.iters, o.warmup, o.rounds, o.check, reduceOpName(o.op),
      dataTypeName(o.type), rooted, o.algo.c_str(), o.jsonPath.empty() ? "(none)" : o.jsonPath.c_str());
  std::printf("# braid env  :");
  int onLine = 0;
  for (const ParamDef& p : paramTable()) {
    const char* s = "default";
    std::string v = paramValueText(p.name, &s);
    if (onLine == 3) {
      std::printf("\n#             ");
      onLine = 0;
    }
    std::printf(" %s=%s%s", p.name, v.empty() ? "\"\"" : v.c_str(),
                std::strcmp(s, "env") == 0 ? " (env)" : "");
    ++onLine;
  }
  std::printf("\n");
  std::printf("# check      : %s\n", setup_.checkText.c_str());
  std::printf("#\n");
}

void Report::printColumns() const {
  const bool predicts = !setup_.model.empty();
  const int aw = algoWidth_;
  std::printf("#%*s%*s\n", 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + 4 + 2 + aw + 34, "out-of-place",
              38, "in-place");
  std::printf("#%11s  %12s  %8s  %6s  %4s  %*s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s%s\n",
              "size", "count", "type", "redop", "root", aw, "algo", "time", "algbw", "busbw",
              "#wrong", "time", "algbw", "busbw", "#wrong", predicts ? "    model" : "",
              setup_.ceiling ? "     ceil  %ceil  %ceil" : "");
  std::printf("#%11s  %12s  %8s  %6s  %4s  %*s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s%s\n",
              "(B)", "(elements)", "", "", "", aw, "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
              "(GB/s)", "(GB/s)", "", predicts ? "     (us)" : "",
              setup_.ceiling ? "     (us)  (oop)   (ip)" : "");
}

void Report::row(const RowResult& r) {
  if (!leader_) return;
  const Options& o = *setup_.options;
  const double factor = setup_.bench->busBwFactor(setup_.ranks);
  // nccl-tests' columns: redop "none" and root -1 where the collective has neither.
  std::printf("%12zu  %12zu  %8s  %6s  %4d  %*s", r.bytes, r.count, dataTypeName(o.type),
              setup_.bench->reduces ? reduceOpName(o.op) : "none",
              setup_.bench->rooted ? o.root : -1, algoWidth_, r.label.c_str());
  auto it = std::find_if(perAlgo_.begin(), perAlgo_.end(),
                         [&](const auto& e) { return e.first == r.algo; });
  if (it == perAlgo_.end()) {
    perAlgo_.push_back({r.algo, {0.0, 0}});
    it = perAlgo_.end() - 1;
  }
  for (int p = 0; p < 2; ++p) {
    const double algbw = r.timeUs[p] > 0 ? static_cast<double>(r.bytes) / r.timeUs[p] / 1e3 : 0;
    const double busbw = algbw * factor;
    busSum_ += busbw;
    ++busRows_;
    it->second.first += busbw;
    it->second.second += 1;
    char wrongText[32];
    if (o.check > 0) {
      std::snprintf(wrongText, sizeof(wrongText), "%.0f", r.wrong[p]);
    } else {
      std::snprintf(wrongText, sizeof(wrongText), "N/A");
    }
    std::printf("  %s  %6.2f  %6.2f  %6s", timeText(r.timeUs[p]).c_str(), algbw, busbw, wrongText);
    writeJson(r, p, algbw, busbw);
  }
  if (!setup_.model.empty())
    std::printf("  %s", r.predictedUs >= 0 ? timeText(r.predictedUs).c_str() : "    N/A");
  if (setup_.ceiling) {
    std::printf("  %s", r.ceilingUs >= 0 ? timeText(r.ceilingUs).c_str() : "    N/A");
    for (int p = 0; p < 2; ++p) {
      if (r.ceilingUs >= 0 && r.timeUs[p] > 0) {
        std::printf("  %4.0f%%", 100.0 * r.ceilingUs / r.timeUs[p]);
      } else {
        std::printf("  %5s", "N/A");
      }
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  if (json_) std::fflush(json_);
}

void Report::writeJson(const RowResult& r, int p, double algbw, double busbw) const {
  if (json_ == nullptr) return;
  const Options& o = *setup_.options;
  const MachineInfo& mi = machine_;
  std::fprintf(
      json_,
      "{\"collective\":\"%s\",\"algo\":\"%s\",\"algo_chosen\":\"%s\",\"ranks\":%d,"
      "\"hosts\":%d,\"bytes\":%zu,\"count\":%zu,\"dtype\":\"%s\",\"op\":\"%s\",\"root\":%d,"
      "\"inplace\":%s,\"time_us\":%.3f,\"algbw_GBps\":%.6f,\"busbw_GBps\":%.6f,"
      "\"wrong\":%.0f,\"checked\":%s,\"iters\":%d,\"warmup\":%d,\"rounds\":%d,"
      "\"transport\":\"%s\",\"local_register\":%d,"
      "\"tool\":\"braid-perf\",\"host\":\"%s\",\"cpu\":\"%s\",\"cpus\":%ld,"
      "\"compiler\":\"%s\",\"build_type\":\"%s\",\"braid_version\":\"%s\",\"git\":\"%s\","
      "\"launch\":\"%s\",\"predicted_us\":%.3f,\"ceiling_us\":%.3f,\"ceiling_share\":%.4f}\n",
      setup_.bench->name, r.label.c_str(), r.chosen.c_str(), setup_.ranks, setup_.hosts, r.bytes,
      r.count, dataTypeName(o.type), setup_.bench->reduces ? reduceOpName(o.op) : "none",
      setup_.bench->rooted ? o.root : -1, p == 1 ? "true" : "false", r.timeUs[p], algbw, busbw,
      r.wrong[p], o.check > 0 ? "true" : "false", o.iters, o.warmup, o.rounds,
      jsonEscape(transport_).c_str(), o.localRegister, jsonEscape(mi.hostname).c_str(),
      jsonEscape(mi.cpuModel).c_str(), mi.cpusOnline, jsonEscape(compilerText()).c_str(),
      BRAID_PERF_BUILD_TYPE, BRAID_PERF_VERSION, BRAID_GIT_REVISION,
      jsonEscape(setup_.launch).c_str(), r.predictedUs, r.ceilingUs,
      r.ceilingUs >= 0 && r.timeUs[p] > 0 ? r.ceilingUs / r.timeUs[p] : -1.0);
}

void Report::end(double wrongTotal) {
  if (!leader_) return;
  std::printf("# Out of bounds values : %.0f %s\n", wrongTotal, wrongTotal == 0 ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %g\n", busRows_ ? busSum_ / busRows_ : 0.0);
  if (perAlgo_.size() > 1) {
    for (const auto& e : perAlgo_) {
      std::printf("#   %-18s : %g\n", e.first.c_str(),
                  e.second.second ? e.second.first / e.second.second : 0.0);
    }
  }
  std::printf("#\n");
  std::fflush(stdout);
}

}  // namespace braid::perf
