// braid-tune simulate (simulate.h): the fabric from the command line, the communicator's selector
// over it, and the table, JSON and decision map of its choices.
#include "bench/tune/simulate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/perf/harness.h"  // parseSize
#include "collectives/selector/rules.h"
#include "collectives/selector/selector.h"
#include "core/params.h"
#include "topology/topology_file.h"

#ifndef BRAID_SOURCE_DIR
#define BRAID_SOURCE_DIR "."
#endif

namespace braid::tune {

using detail::Algorithm;
using detail::Decision;
using detail::FabricModel;
using detail::Placement;
using detail::SelCollective;
using detail::Selector;

namespace {

void usage() {
  std::printf(
      "Usage: braid-tune simulate (--hosts N | --topology FILE) [fabric options] [options]\n"
      "What braid would choose on a described fabric, without running anything: for every\n"
      "collective and message size, the algorithm the communicator's selector picks (the same\n"
      "Selector and CostModel, built from the described fabric as a communicator builds them),\n"
      "its predicted time and busbw, the runner-up and the margin; and a decision map (size x\n"
      "world size, coloured by algorithm).\n"
      "\n"
      "Fabric (later options win over earlier ones; flags over files):\n"
      "  --topology FILE        a braid topology file (docs/topology-file.md): hosts = its host\n"
      "                         records, ranks per host = the first host's GPUs (1 if none),\n"
      "                         cores per host = its core records, inter-host link = the first\n"
      "                         fabric-link of kind net (gbps, latency_us) or else its fastest\n"
      "                         NIC's speed_mbps, intra-host link = its first link of kind memory\n"
      "                         or smp with a gbps\n"
      "  --model FILE           every number of the cost model from a braid calibration file\n"
      "                         (the calibration cache, ~/.cache/braid/fabric-*.txt: its model\n"
      "                         line; or a file holding only that line's key=value text)\n"
      "  --hosts N              hosts\n"
      "  --ranks-per-host N     ranks on each host (default 1, or the topology file's GPUs)\n"
      "  --cores-per-host N     cores of a host; 0 = unknown, no penalty for ranks sharing cores\n"
      "  --intra-alpha US       intra-host link: microseconds per message\n"
      "  --intra-beta US        intra-host link: microseconds per byte (one way and exchanged)\n"
      "  --intra-gbps G         the same as bandwidth, in Gbit/s (β = 8e-3 / G us per byte)\n"
      "  --inter-alpha US, --inter-beta US, --inter-gbps G   the same for the network link\n"
      "  --gamma-gbps G         reduction (float sum) speed, Gbit/s of input\n"
      "  --copy-gbps G          memory copy speed (the shared segment's algorithms copy through\n"
      "                         it; the intra-host link flags do not change it)\n"
      "  --sync-us US           one hand-off through the intra-host shared segment\n"
      "  --call-us US           fixed software cost of one collective call (default 0)\n"
      "  --llc-mib M            last-level cache of a host (default 32)\n"
      "  --transport auto|tcp   tcp: no intra-host shared segment (as BRAID_TRANSPORT=tcp), so\n"
      "                         the shm and segment-based algorithms are unavailable\n"
      "  --chunk BYTES          pipelining chunk (default BRAID_CHUNK_BYTES, 1M)\n"
      "  --tuning-file FILE     apply a tuning file's rules, as BRAID_TUNING_FILE does\n"
      "  --algo SPEC            force algorithms, as BRAID_ALGO does (e.g. allreduce:ring)\n"
      "Without a topology file, a calibration file or link flags, the model's defaults apply\n"
      "(intra 2 us, 4 GB/s; inter 30 us, 1 GB/s: tcp over 10 GbE); the header prints the model.\n"
      "\n"
      "What:\n"
      "  -c, --collective LIST  comma-separated: allreduce, reducescatter, allgather, broadcast,\n"
      "                         reduce, alltoall, barrier (default all)\n"
      "  -b, --min-bytes B      smallest size (default 8)\n"
      "  -e, --max-bytes B      largest size (default 4G; suffixes K, M, G)\n"
      "  -f, --step-factor F    size factor between rows (default 2)\n"
      "  --map-max-ranks N      the decision map's world sizes: hosts 1, 2, 4, ... (and the\n"
      "                         fabric's own) of its ranks per host, up to N ranks (default\n"
      "                         16384, at least the fabric's)\n"
      "  --nccl-tuner           also print what the NCCL tuner plugin (NCCL_TUNER_PLUGIN=braid)\n"
      "                         picks for all-reduce and any rules, through the plugin's own code\n"
      "                         and the BRAID_TUNER_* / BRAID_TUNING_FILE variables it reads\n"
      "  --nccl-nodes LIST      node counts for --nccl-tuner (default 1,2,4,...,1024)\n"
      "  --nccl-gpus LIST       GPUs per node for --nccl-tuner (default 1,2,...,8)\n"
      "\n"
      "Output:\n"
      "  --json FILE            everything as one JSON object (fabric, rows with every\n"
      "                         candidate, the decision map, the tuner's tables)\n"
      "  --png FILE             the decision map, drawn by decision_map.py (matplotlib; skipped\n"
      "                         with a message when matplotlib is not installed); run with\n"
      "                         $PYTHON, else /usr/bin/python3, else python3 from PATH\n"
      "  -q, --quiet            no table on stdout\n"
      "  -h, --help             this text\n"
      "\n"
      "Example: braid-tune simulate --hosts 128 --ranks-per-host 8 --inter-alpha 5 \\\n"
      "           --inter-gbps 100 --intra-alpha 1 --intra-gbps 200 --cores-per-host 64 \\\n"
      "           --json sim.json --png sim.png\n");
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "braid-tune simulate: %s\n", msg.c_str());
  std::exit(2);
}

double number(const std::string& opt, const std::string& v, double lo) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !std::isfinite(x) || x < lo) {
    die(opt + ": bad value '" + v + "'");
  }
  return x;
}

int integer(const std::string& opt, const std::string& v, int lo) {
  const double x = number(opt, v, lo);
  if (x != std::floor(x) || x > 1 << 24) die(opt + ": bad value '" + v + "'");
  return static_cast<int>(x);
}

size_t bytesOf(const std::string& opt, const std::string& v) {
  Result<size_t> r = perf::parseSize(v);
  if (!r.isOk()) die(opt + ": " + r.status().message());
  return *r;
}

std::vector<int> intList(const std::string& opt, const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(integer(opt, item, 1));
  if (out.empty()) die(opt + ": empty list");
  return out;
}

double usPerByteOfGbps(double gbps) { return 8e-3 / gbps; }

// The numbers a topology file gives (docs/topology-file.md); the rest keep the model's.
void applyTopology(const std::string& path, SimFabric* f, bool* ranksGiven) {
  Result<topo::Topology> t = topo::readTopologyFile(path);
  if (!t.isOk()) die(t.status().toString());
  if (t->hosts.empty()) die(path + ": no host records");
  const topo::Host& h = t->hosts.front();
  f->hosts = static_cast<int>(t->hosts.size());
  if (!*ranksGiven && !h.gpus.empty()) f->ranksPerHost = static_cast<int>(h.gpus.size());
  if (!h.cores.empty()) f->model.coresPerHost = static_cast<int>(h.cores.size());
  bool inter = false;
  for (const topo::Link& l : t->links) {
    if (l.kind != "net" || inter) continue;
    if (l.bandwidthGbps > 0) {
      f->model.inter.betaUsPerByte = f->model.inter.betaSymUsPerByte =
          usPerByteOfGbps(l.bandwidthGbps);
      inter = true;
    }
    if (l.latencyUs >= 0) f->model.inter.alphaUs = l.latencyUs;
  }
  if (!inter) {
    int64_t mbps = 0;
    for (const topo::Nic& n : h.nics) {
      if (n.kind != topo::NicKind::kLoopback) mbps = std::max(mbps, n.speedMbps);
    }
    if (mbps > 0) {
      f->model.inter.betaUsPerByte = f->model.inter.betaSymUsPerByte =
          usPerByteOfGbps(static_cast<double>(mbps) / 1000);
    }
  }
  for (const topo::Link& l : h.links) {
    if ((l.kind == "memory" || l.kind == "smp") && l.bandwidthGbps > 0) {
      f->model.intra.betaUsPerByte = f->model.intra.betaSymUsPerByte =
          usPerByteOfGbps(l.bandwidthGbps);
      if (l.latencyUs >= 0) f->model.intra.alphaUs = l.latencyUs;
      break;
    }
  }
  f->origin += (f->origin.empty() ? "" : ", ") + std::string("topology file ") + path;
}

// A calibration file's model line, or a file that is only the key=value text.
FabricModel readModelFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) die("cannot read " + path);
  std::string line, text, all;
  while (std::getline(in, line)) {
    if (line.rfind("model ", 0) == 0) text = line.substr(6);
    if (!line.empty() && line[0] != '#') all += line + " ";
  }
  if (text.empty()) text = all;
  Result<FabricModel> m = FabricModel::parse(text);
  if (!m.isOk()) die(path + ": " + m.status().message());
  m->source = "file";
  return *m;
}

double busFactor(SelCollective c, int p) {
  const double n = p;
  switch (c) {
    case SelCollective::kAllReduce:
      return 2 * (n - 1) / n;
    case SelCollective::kReduceScatter:
    case SelCollective::kAllGather:
    case SelCollective::kAllToAll:
      return (n - 1) / n;
    default:
      return 1;
  }
}

std::string fmtBytes(size_t b) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    ++u;
  }
  return std::to_string(b) + units[u];
}

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.6g", v);
  return b;
}

// One decision with its runner-up.
struct SimRow {
  SelCollective coll;
  size_t bytes = 0;
  Decision d;
  const Algorithm* second = nullptr;
  double secondUs = -1;
  std::vector<std::pair<const Algorithm*, double>> cands;
};

SimRow simulateOne(const Selector& sel, SelCollective c, size_t bytes) {
  SimRow r;
  r.coll = c;
  r.bytes = bytes;
  r.d = sel.decide(c, bytes);
  r.cands = sel.candidates(c, bytes);
  for (const auto& [row, t] : r.cands) {
    if (row == r.d.row) continue;
    if (r.second == nullptr || t < r.secondUs) {
      r.second = row;
      r.secondUs = t;
    }
  }
  return r;
}

std::string rowJson(const SimRow& r, const Selector& sel, int p) {
  const double t = r.d.predictedUs;
  const double algbw = t > 0 ? static_cast<double>(r.bytes) / t / 1e3 : 0;
  std::string s =
      "{\"collective\":" + jsonString(detail::selCollectiveName(r.coll)) +
      ",\"bytes\":" + std::to_string(r.bytes) + ",\"algorithm\":" + jsonString(r.d.algorithm) +
      ",\"chunk_bytes\":" + std::to_string(r.d.chunkBytes) + ",\"time_us\":" + num(t) +
      ",\"algbw_gbs\":" + num(algbw) + ",\"busbw_gbs\":" + num(algbw * busFactor(r.coll, p)) +
      ",\"reason\":" + jsonString(r.d.reason);
  if (r.second != nullptr) {
    s += ",\"runner_up\":" + jsonString(r.second->name) + ",\"runner_up_us\":" + num(r.secondUs) +
         ",\"margin_pct\":" + num(t > 0 ? 100 * (r.secondUs - t) / t : 0);
  } else {
    s += ",\"runner_up\":null,\"runner_up_us\":null,\"margin_pct\":null";
  }
  s += ",\"candidates\":{";
  bool first = true;
  for (const auto& [row, us] : r.cands) {
    s += std::string(first ? "" : ",") + jsonString(row->name) + ":" + num(us);
    first = false;
  }
  s += "},\"unavailable\":{";
  first = true;
  for (const Algorithm* a : detail::algorithmsOf(r.coll)) {
    const std::string why = sel.costModel().unavailableWhy(*a);
    if (why.empty()) continue;
    s += std::string(first ? "" : ",") + jsonString(a->name) + ":" + jsonString(why);
    first = false;
  }
  return s + "}}";
}

void printTable(FILE* out, SelCollective c, const std::vector<SimRow>& rows, int p) {
  std::fprintf(out, "\n# %s\n", detail::selCollectiveName(c));
  std::fprintf(out, "#%11s  %-20s %6s %12s %10s  %-20s %12s %8s\n", "bytes", "algorithm", "chunk",
               "time_us", "busbw_GB/s", "runner-up", "time_us", "margin");
  for (const SimRow& r : rows) {
    if (r.coll != c) continue;
    const double t = r.d.predictedUs;
    const double busbw = t > 0 ? static_cast<double>(r.bytes) / t / 1e3 * busFactor(c, p) : 0;
    char second[96] = "-";
    char secondT[32] = "-", margin[32] = "-";
    if (r.second != nullptr) {
      std::snprintf(second, sizeof(second), "%s", r.second->name);
      std::snprintf(secondT, sizeof(secondT), "%.2f", r.secondUs);
      std::snprintf(margin, sizeof(margin), "%.1f%%", t > 0 ? 100 * (r.secondUs - t) / t : 0.0);
    }
    const std::string chunk = r.d.chunkBytes ? fmtBytes(r.d.chunkBytes) : "-";
    std::fprintf(out, "%12zu  %-20s %6s %12.2f %10.3f  %-20s %12s %8s%s\n", r.bytes,
                 r.d.algorithm.c_str(), chunk.c_str(), t, busbw, second, secondT, margin,
                 r.d.reason == "model" ? "" : ("  (" + r.d.reason + ")").c_str());
  }
}

// The decision map: per world size (hosts × the fabric's ranks per host), per collective, the
// chosen algorithm at every size.
std::string mapJson(const SimFabric& f, const std::vector<SelCollective>& colls,
                    const std::vector<size_t>& sizes, int maxRanks, const detail::AlgoOverrides& ov,
                    const std::vector<detail::TuningRule>& rules) {
  std::vector<int> hosts;
  for (int h = 1; h * f.ranksPerHost <= maxRanks; h *= 2) hosts.push_back(h);
  if (std::find(hosts.begin(), hosts.end(), f.hosts) == hosts.end()) hosts.push_back(f.hosts);
  std::sort(hosts.begin(), hosts.end());
  std::string s = "{\"ranks_per_host\":" + std::to_string(f.ranksPerHost) + ",\"sizes\":[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "," : "") + std::to_string(sizes[i]);
  s += "],\"worlds\":[";
  for (size_t i = 0; i < hosts.size(); ++i) {
    const Selector sel(f.model, placementOf(f, hosts[i]), ov, rules, false);
    s += std::string(i ? "," : "") + "{\"hosts\":" + std::to_string(hosts[i]) +
         ",\"ranks\":" + std::to_string(hosts[i] * f.ranksPerHost) + ",\"choices\":{";
    for (size_t k = 0; k < colls.size(); ++k) {
      s += std::string(k ? "," : "") + jsonString(detail::selCollectiveName(colls[k])) + ":[";
      for (size_t j = 0; j < sizes.size(); ++j) {
        const size_t b = colls[k] == SelCollective::kBarrier ? 0 : sizes[j];
        s += (j ? "," : "") + jsonString(sel.decide(colls[k], b).algorithm);
      }
      s += "]";
    }
    s += "}}";
  }
  return s + "]}";
}

std::string selfDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// decision_map.py beside the program (the build tree and installs), else in the source tree.
std::string findMapScript() {
  for (const std::string& p :
       {selfDir() + "/decision_map.py", selfDir() + "/../share/braid/decision_map.py",
        std::string(BRAID_SOURCE_DIR) + "/bench/tune/decision_map.py"}) {
    if (access(p.c_str(), R_OK) == 0) return p;
  }
  return "";
}

}  // namespace

std::string jsonString(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      q += '\\';
      q += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", ch);
      q += b;
    } else {
      q += ch;
    }
  }
  return q + "\"";
}

Placement placementOf(const SimFabric& f, int hosts) {
  // As Communicator::Impl::setUpSelector builds it (a segment wherever ranks share a host and
  // the transport is not tcp; BRAID_CHUNK_BYTES; half of BRAID_SHM_SEGMENT_BYTES; real hosts, so
  // a machine holds one host's ranks).
  Placement p = Placement::uniform(hosts, f.ranksPerHost, !f.tcpOnly);
  p.segment = !f.tcpOnly && f.ranksPerHost > 1;
  p.segmentHalfBytes = f.segmentHalfBytes;
  p.chunkBytes = f.chunkBytes;
  p.ranksPerMachine = f.ranksPerHost;
  return p;
}

int simulateMain(int argc, char** argv) {
  SimFabric f;
  // The parameters the communicator reads, read once here (their defaults unless set).
  f.chunkBytes = static_cast<size_t>(std::max<int64_t>(4096, paramInt("BRAID_CHUNK_BYTES")));
  f.segmentHalfBytes =
      static_cast<size_t>(std::max<int64_t>(8192, paramInt("BRAID_SHM_SEGMENT_BYTES"))) / 2;
  bool ranksGiven = false, hostsGiven = false, quiet = false, nccl = false, linkGiven = false;
  std::string jsonPath, pngPath, tuningFile, algoSpec;
  std::vector<SelCollective> colls;
  size_t minBytes = 8, maxBytes = size_t{4} << 30;
  double factor = 2;
  int mapMaxRanks = 16384;
  std::vector<int> ncclNodes = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  std::vector<int> ncclGpus = {1, 2, 3, 4, 5, 6, 7, 8};
  // Flags apply after the files, in order, whatever order they are given in.
  std::vector<std::pair<std::string, std::string>> flags;
  std::string topologyPath, modelPath;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (a == "--topology") {
      topologyPath = value();
    } else if (a == "--model") {
      modelPath = value();
    } else if (a == "--json") {
      jsonPath = value();
    } else if (a == "--png") {
      pngPath = value();
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (a == "--nccl-tuner") {
      nccl = true;
    } else if (a == "--nccl-nodes") {
      ncclNodes = intList(a, value());
    } else if (a == "--nccl-gpus") {
      ncclGpus = intList(a, value());
    } else if (a == "--tuning-file") {
      tuningFile = value();
    } else if (a == "--algo") {
      algoSpec = value();
    } else if (a == "-c" || a == "--collective") {
      std::stringstream ss(value());
      std::string name;
      while (std::getline(ss, name, ',')) {
        if (name == "barrier") {
          colls.push_back(SelCollective::kBarrier);
          continue;
        }
        Result<SelCollective> c = detail::parseSelCollective(name);
        if (!c.isOk()) die(c.status().message() + ", barrier");
        colls.push_back(*c);
      }
    } else if (a == "-b" || a == "--min-bytes") {
      minBytes = bytesOf(a, value());
    } else if (a == "-e" || a == "--max-bytes") {
      maxBytes = bytesOf(a, value());
    } else if (a == "-f" || a == "--step-factor") {
      factor = number(a, value(), 1.0001);
    } else if (a == "--map-max-ranks") {
      mapMaxRanks = integer(a, value(), 1);
    } else if (a == "--hosts" || a == "--ranks-per-host" || a == "--cores-per-host" ||
               a == "--intra-alpha" || a == "--intra-beta" || a == "--intra-gbps" ||
               a == "--inter-alpha" || a == "--inter-beta" || a == "--inter-gbps" ||
               a == "--gamma-gbps" || a == "--copy-gbps" || a == "--sync-us" || a == "--call-us" ||
               a == "--llc-mib" || a == "--transport" || a == "--chunk") {
      flags.push_back({a, value()});
    } else {
      die("unknown option '" + a + "' (see braid-tune simulate --help)");
    }
  }
  if (!modelPath.empty()) {
    f.model = readModelFile(modelPath);
    f.origin = "calibration file " + modelPath;
  }
  if (!topologyPath.empty()) {
    for (const auto& [k, v] : flags) ranksGiven = ranksGiven || k == "--ranks-per-host";
    applyTopology(topologyPath, &f, &ranksGiven);
    hostsGiven = true;
  }
  for (const auto& [k, v] : flags) {
    if (k == "--hosts") {
      f.hosts = integer(k, v, 1);
      hostsGiven = true;
    } else if (k == "--ranks-per-host") {
      f.ranksPerHost = integer(k, v, 1);
    } else if (k == "--cores-per-host") {
      f.model.coresPerHost = integer(k, v, 0);
    } else if (k == "--intra-alpha") {
      f.model.intra.alphaUs = number(k, v, 0);
      f.model.intra.alphaOneWayUs = 0;
    } else if (k == "--inter-alpha") {
      f.model.inter.alphaUs = number(k, v, 0);
      f.model.inter.alphaOneWayUs = 0;
    } else if (k == "--intra-beta" || k == "--intra-gbps" || k == "--inter-beta" ||
               k == "--inter-gbps") {
      const double x = number(k, v, 1e-12);
      const double beta = k.find("gbps") != std::string::npos ? usPerByteOfGbps(x) : x;
      detail::LinkCost& l = k.rfind("--intra", 0) == 0 ? f.model.intra : f.model.inter;
      // One β for every message size, one way and exchanged, in and out of cache.
      l = detail::LinkCost{l.alphaUs, beta, beta};
      linkGiven = true;
    } else if (k == "--gamma-gbps") {
      f.model.gammaUsPerByte = usPerByteOfGbps(number(k, v, 1e-9));
    } else if (k == "--copy-gbps") {
      f.model.copyUsPerByte = usPerByteOfGbps(number(k, v, 1e-9));
      f.model.copySmallUsPerByte = 0;
      f.model.copyAloneUsPerByte = 0;
    } else if (k == "--sync-us") {
      f.model.syncUs = number(k, v, 0);
    } else if (k == "--call-us") {
      f.model.callUs = number(k, v, 0);
    } else if (k == "--llc-mib") {
      f.model.llcBytes = number(k, v, 1e-6) * 1024 * 1024;
    } else if (k == "--transport") {
      if (v != "auto" && v != "tcp") die("--transport: auto or tcp, not '" + v + "'");
      f.tcpOnly = v == "tcp";
    } else if (k == "--chunk") {
      f.chunkBytes = std::max<size_t>(4096, bytesOf(k, v));
    }
    if (k != "--hosts" && k != "--ranks-per-host" && k != "--transport" && k != "--chunk") {
      linkGiven = true;
    }
  }
  if (!hostsGiven) die("give --hosts N or --topology FILE (see --help)");
  if (static_cast<int64_t>(f.hosts) * f.ranksPerHost > (1 << 20)) die("more than 2^20 ranks");
  if (minBytes == 0 || maxBytes < minBytes) die("need 0 < -b <= -e");
  if (linkGiven) f.origin += std::string(f.origin.empty() ? "" : ", ") + "flags";
  if (f.origin.empty()) f.origin = "the model's defaults";
  f.model.source = "simulate";
  mapMaxRanks = std::max(mapMaxRanks, f.hosts * f.ranksPerHost);
  if (colls.empty()) {
    for (int c = 0; c < detail::kSelectableCollectives; ++c) {
      colls.push_back(static_cast<SelCollective>(c));
    }
    colls.push_back(SelCollective::kBarrier);
  }
  std::vector<size_t> sizes;
  for (double b = static_cast<double>(minBytes); b <= static_cast<double>(maxBytes) * 1.0000001;
       b *= factor) {
    const size_t s = static_cast<size_t>(std::llround(b));
    if (sizes.empty() || s != sizes.back()) sizes.push_back(s);
  }

  detail::AlgoOverrides overrides;
  if (!algoSpec.empty()) {
    Result<detail::AlgoOverrides> o = detail::parseAlgoOverrideSpec(algoSpec);
    if (!o.isOk()) die("--algo: " + o.status().message());
    overrides = *o;
  }
  std::vector<detail::TuningRule> rules;
  if (!tuningFile.empty()) {
    Result<std::vector<detail::TuningRule>> r = detail::readTuningFile(tuningFile);
    if (!r.isOk()) die(r.status().toString());
    rules = *r;
  }

  const Placement placement = placementOf(f, f.hosts);
  const int p = placement.size();
  const Selector sel(f.model, placement, overrides, rules, false);
  for (int c = 0; c < detail::kSelectableCollectives; ++c) {
    const detail::Algorithm* forced = overrides.row(static_cast<SelCollective>(c));
    const std::string why = forced ? sel.costModel().unavailableWhy(*forced) : "";
    if (!why.empty()) die("--algo: " + std::string(forced->name) + " " + why);
  }

  std::vector<SimRow> rows;
  for (SelCollective c : colls) {
    if (c == SelCollective::kBarrier) {
      rows.push_back(simulateOne(sel, c, 0));
      continue;
    }
    for (size_t b : sizes) rows.push_back(simulateOne(sel, c, b));
  }

  if (!quiet) {
    std::printf("# braid-tune simulate: %d ranks on %d host(s) x %d rank(s)%s, from %s\n", p,
                f.hosts, f.ranksPerHost, placement.segment ? " with a shared segment" : "",
                f.origin.c_str());
    std::printf("# model: %s\n", f.model.describe().c_str());
    std::printf(
        "# chunk %zu B; the communicator's Selector and CostModel; busbw as nccl-tests; "
        "margin = how much slower the runner-up is\n",
        f.chunkBytes);
    for (SelCollective c : colls) printTable(stdout, c, rows, p);
  }

  std::string tunerJson;
  if (nccl) ncclTunerTables(ncclNodes, ncclGpus, sizes, quiet ? nullptr : stdout, &tunerJson);

  std::string json;
  if (!jsonPath.empty() || !pngPath.empty()) {
    json = "{\"tool\":\"braid-tune simulate\",\"fabric\":{\"hosts\":" + std::to_string(f.hosts) +
           ",\"ranks_per_host\":" + std::to_string(f.ranksPerHost) +
           ",\"ranks\":" + std::to_string(p) +
           ",\"cores_per_host\":" + std::to_string(f.model.coresPerHost) +
           ",\"segment\":" + (placement.segment ? "true" : "false") +
           ",\"chunk_bytes\":" + std::to_string(f.chunkBytes) +
           ",\"origin\":" + jsonString(f.origin) + ",\"model\":" + jsonString(f.model.serialize()) +
           ",\"describe\":" + jsonString(f.model.describe()) + "},\"algorithms\":{";
    for (size_t k = 0; k < colls.size(); ++k) {
      json += std::string(k ? "," : "") + jsonString(detail::selCollectiveName(colls[k])) + ":[";
      const auto rowsOf = detail::algorithmsOf(colls[k]);
      for (size_t j = 0; j < rowsOf.size(); ++j)
        json += (j ? "," : "") + jsonString(rowsOf[j]->name);
      json += "]";
    }
    json += "},\"rows\":[";
    for (size_t i = 0; i < rows.size(); ++i) json += (i ? ",\n" : "\n") + rowJson(rows[i], sel, p);
    json += "],\n\"map\":" + mapJson(f, colls, sizes, mapMaxRanks, overrides, rules);
    if (nccl) json += ",\n\"nccl_tuner\":" + tunerJson;
    json += "}\n";
  }
  std::string mapInput = jsonPath;
  bool tempJson = false;
  if (jsonPath.empty() && !pngPath.empty()) {
    char tmpl[] = "/tmp/braid-sim-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) die("cannot create a temporary file");
    close(fd);
    mapInput = tmpl;
    tempJson = true;
  }
  if (!mapInput.empty()) {
    std::ofstream out(mapInput);
    out << json;
    if (!out) die("cannot write " + mapInput);
    if (!quiet && !tempJson) std::printf("\n# wrote %s\n", mapInput.c_str());
  }
  int rc = 0;
  if (!pngPath.empty()) {
    const std::string script = findMapScript();
    if (script.empty()) {
      std::fprintf(stderr, "braid-tune simulate: decision_map.py not found; no PNG written\n");
    } else {
      // Debian's python3 (python3-matplotlib), not a virtual environment's, unless PYTHON says.
      const char* py = std::getenv("PYTHON");
      const std::string python = py != nullptr && *py                    ? py
                                 : access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3"
                                                                         : "python3";
      const std::string cmd = shellQuote(python) + " " + shellQuote(script) + " " +
                              shellQuote(mapInput) + " " + shellQuote(pngPath);
      const int st = std::system(cmd.c_str());
      if (st != 0) {
        std::fprintf(stderr, "braid-tune simulate: %s failed (status %d)\n", script.c_str(), st);
        rc = 1;
      }
    }
  }
  if (tempJson) unlink(mapInput.c_str());
  return rc;
}

}  // namespace braid::tune
