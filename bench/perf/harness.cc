#include "bench/perf/harness.h"

#include <getopt.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "braid/git_revision.h"
#include "core/params.h"
#include "transport/bootstrap/local_launch.h"
#include "topology/sysfs.h"
#include "transport/bootstrap/launchers.h"

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
namespace {

constexpr size_t kDefaultMinBytes = 8;
constexpr size_t kDefaultMaxBytes = size_t{128} << 20;
constexpr size_t kPatternPeriodPerRank = 61;  // prime, so blocks of 2^k elements never align
constexpr unsigned char kPoisonByte = 0xA5;   // -91 / 165 / -2.9e-16: no verifiable value
constexpr size_t kBufferAlignment = 4096;
// Set by the --ranks launcher in its children, so that they describe how they were started.
constexpr const char* kLauncherEnv = "BRAID_PERF_LAUNCHER";

// ---------------------------------------------------------------------------------------------
// Element encoding (independent of braid's own conversions, so that those are checked too).

uint16_t floatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {  // subnormal half (or zero)
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = absx >> 23;
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // mant x 2^(exp-150) in units of 2^-24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((absx - 0x38000000u) >> 13);
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

uint16_t floatToBfloat16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

template <typename T>
void store(uint8_t* out, T value) {
  std::memcpy(out, &value, sizeof(T));
}

// v is a small integer (never negative for the unsigned types), so every cast is exact.
void encode(DataType type, double v, uint8_t* out) {
  switch (type) {
    case DataType::kInt8:
      return store(out, static_cast<int8_t>(v));
    case DataType::kUint8:
      return store(out, static_cast<uint8_t>(v));
    case DataType::kInt32:
      return store(out, static_cast<int32_t>(v));
    case DataType::kUint32:
      return store(out, static_cast<uint32_t>(v));
    case DataType::kInt64:
      return store(out, static_cast<int64_t>(v));
    case DataType::kUint64:
      return store(out, static_cast<uint64_t>(v));
    case DataType::kFloat16:
      return store(out, floatToHalfBits(static_cast<float>(v)));
    case DataType::kBFloat16:
      return store(out, floatToBfloat16Bits(static_cast<float>(v)));
    case DataType::kFloat32:
      return store(out, static_cast<float>(v));
    case DataType::kFloat64:
      return store(out, v);
  }
}

bool isUnsigned(DataType type) {
  return type == DataType::kUint8 || type == DataType::kUint32 || type == DataType::kUint64;
}

// Largest integer magnitude up to which every integer is representable (and, for the integer
// types, no overflow happens).
double exactLimit(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return 127;
    case DataType::kUint8:
      return 255;
    case DataType::kInt32:
      return 2147483647.0;
    case DataType::kUint32:
      return 4294967295.0;
    case DataType::kFloat16:
      return 2048;
    case DataType::kBFloat16:
      return 256;
    case DataType::kFloat32:
      return 16777216.0;
    default:
      return 9007199254740992.0;  // int64, uint64, double: 2^53 (computed in double)
  }
}

// Rank r's value at table position j, for n ranks. See Pattern's comment for why these values.
double patternValue(ReduceOp op, bool unsignedType, int n, int r, size_t j) {
  const int64_t mix = static_cast<int64_t>(7 * j) + 13 * r + static_cast<int64_t>(j) * r;
  const size_t un = static_cast<size_t>(n);
  const size_t ur = static_cast<size_t>(r);
  switch (op) {
    case ReduceOp::kSum:
      return unsignedType ? static_cast<double>(mix % 3) : static_cast<double>(mix % 5 - 2);
    case ReduceOp::kProd: {
      double v = 1;
      if (ur == j % un) v = 2;
      if (n > 1 && ur == (3 * j + 1) % un) v = 2;
      if (!unsignedType && (j + 2 * ur) % 3 == 0) v = -v;
      return v;
    }
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return unsignedType ? static_cast<double>(mix % 9) : static_cast<double>(mix % 9 - 4);
    case ReduceOp::kAvg: {
      // base + d with the d's of all ranks summing to 0: the sum is n × base, the average base.
      double v = 1 + static_cast<double>((j / un + j) % 3);
      if (n > 1 && ur == j % un) v += 1;
      if (n > 1 && ur == (j + 1) % un) v -= 1;
      return v;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Options.

struct Options {
  size_t minBytes = kDefaultMinBytes;
  size_t maxBytes = kDefaultMaxBytes;
  double stepFactor = 2;
  size_t stepBytes = 0;
  int iters = 20;
  int warmup = 5;
  int rounds = 1;
  int check = 1;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::string algo = "auto";
  int ranks = 0;  // 0: run as one rank of an existing launch
  std::string jsonPath;
  std::string transport;
  bool fileStore = false;
  int timeoutS = 0;
};

void printUsage(const char* prog, FILE* out) {
  std::fprintf(
      out,
      "Usage: %s [options]\n"
      "Sweeps message sizes like nccl-tests' all_reduce_perf and prints, per size, the\n"
      "out-of-place and in-place time(us) algbw(GB/s) busbw(GB/s) #wrong.\n"
      "\n"
      "  -b, --minbytes SIZE     smallest message (default 8); suffixes K, M, G (x1024)\n"
      "  -e, --maxbytes SIZE     largest message (default 128M; nccl-tests defaults to 32M)\n"
      "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
      "  -i, --stepbytes SIZE    add SIZE each step instead of multiplying\n"
      "  -n, --iters N           timed iterations per size (default 20)\n"
      "  -w, --warmup_iters N    untimed iterations before each timing (default 5)\n"
      "      --rounds R          time every algorithm of a size R times, taking turns, and\n"
      "                          report each one's median round (default 1; for -a lists on a\n"
      "                          machine whose speed drifts)\n"
      "  -c, --check N           verified calls per size and placement (default 1; 0 = none)\n"
      "  -o, --op OP             sum|prod|min|max|avg (default sum)\n"
      "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64 half float double\n"
      "                          bfloat16 (aliases f16 f32 f64 bf16 i8 ...; default float)\n"
      "  -a, --algo ALGO         auto (default), one algorithm, a comma list, or all (every\n"
      "                          available algorithm plus auto, rows tagged with the algorithm)\n"
      "  -J, --json FILE         write one JSON object per line per size, placement and algo\n"
      "      --ranks N           start N local ranks of this program and report from rank 0;\n"
      "                          without it braid-perf is one rank of an existing launch\n"
      "                          (torchrun variables, srun, mpirun/mpiexec: braid-info launch)\n"
      "                          or, when none is found, starts one rank\n"
      "      --file-store        with --ranks: rendezvous through a directory, not TCP\n"
      "      --transport T       sets BRAID_TRANSPORT (auto|shm|tcp) for the ranks\n"
      "  -T, --timeout S         with --ranks: kill every rank after S seconds (default none)\n"
      "  -h, --help              this text\n"
      "\n"
      "Time per size is the maximum over ranks of each rank's average call time. algbw = bytes /\n"
      "time; busbw = algbw x 2(n-1)/n. #wrong counts output elements differing bit-for-bit from\n"
      "the expected result, summed over ranks; the exit status is 1 if any is wrong.\n",
      prog);
}

Result<int> parseInt(const char* flag, const std::string& text, int minValue) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < minValue || v > 1000000000L) {
    return invalidArgument(std::string(flag) + " needs an integer ≥ " + std::to_string(minValue) +
                           ", got '" + text + "'");
  }
  return static_cast<int>(v);
}

// Returns 0 to run, 1 after printing help, 2 after a usage error.
int parseOptions(int argc, char** argv, Options* o) {
  static const option kLong[] = {
      {"minbytes", required_argument, nullptr, 'b'},
      {"maxbytes", required_argument, nullptr, 'e'},
      {"stepfactor", required_argument, nullptr, 'f'},
      {"stepbytes", required_argument, nullptr, 'i'},
      {"iters", required_argument, nullptr, 'n'},
      {"warmup_iters", required_argument, nullptr, 'w'},
      {"rounds", required_argument, nullptr, 'U'},
      {"check", required_argument, nullptr, 'c'},
      {"op", required_argument, nullptr, 'o'},
      {"datatype", required_argument, nullptr, 'd'},
      {"algo", required_argument, nullptr, 'a'},
      {"json", required_argument, nullptr, 'J'},
      {"timeout", required_argument, nullptr, 'T'},
      {"ranks", required_argument, nullptr, 'R'},
      {"file-store", no_argument, nullptr, 'F'},
      {"transport", required_argument, nullptr, 't'},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  };
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":b:e:f:i:n:w:c:o:d:a:J:T:h", kLong, nullptr)) != -1) {
    Status s;
    const std::string arg = optarg ? optarg : "";
    switch (c) {
      case 'b':
      case 'e':
      case 'i': {
        Result<size_t> v = parseSize(arg);
        if (!v) {
          s = v.status();
          break;
        }
        (c == 'b' ? o->minBytes : c == 'e' ? o->maxBytes : o->stepBytes) = *v;
        break;
      }
      case 'f': {
        char* end = nullptr;
        double v = std::strtod(arg.c_str(), &end);
        if (end == arg.c_str() || *end != '\0' || !(v > 1.0)) {
          s = invalidArgument("-f needs a factor > 1, got '" + arg + "'");
        } else {
          o->stepFactor = v;
        }
        break;
      }
      case 'n':
      case 'w':
      case 'c':
      case 'T':
      case 'U':
      case 'R': {
        const char* flag = c == 'n'   ? "-n"
                           : c == 'w' ? "-w"
                           : c == 'c' ? "-c"
                           : c == 'T' ? "-T"
                           : c == 'U' ? "--rounds"
                                      : "--ranks";
        Result<int> v = parseInt(flag, arg, c == 'n' || c == 'R' || c == 'U' ? 1 : 0);
        if (!v) {
          s = v.status();
          break;
        }
        (c == 'n'   ? o->iters
         : c == 'w' ? o->warmup
         : c == 'c' ? o->check
         : c == 'T' ? o->timeoutS
         : c == 'U' ? o->rounds
                    : o->ranks) = *v;
        break;
      }
      case 'o': {
        Result<ReduceOp> v = parseReduceOp(arg);
        if (v)
          o->op = *v;
        else
          s = v.status();
        break;
      }
      case 'd': {
        Result<DataType> v = parseDataType(arg);
        if (v)
          o->type = *v;
        else
          s = v.status();
        break;
      }
      case 'a':
        o->algo = arg;
        break;
      case 'J':
        o->jsonPath = arg;
        break;
      case 'F':
        o->fileStore = true;
        break;
      case 't':
        if (arg != "auto" && arg != "shm" && arg != "tcp") {
          s = invalidArgument("--transport must be auto, shm or tcp, got '" + arg + "'");
        }
        o->transport = arg;
        break;
      case 'h':
        printUsage(argv[0], stdout);
        return 1;
      case ':':
        s = invalidArgument(std::string("option ") +
                            (optopt ? std::string("-") + static_cast<char>(optopt)
                                    : std::string(argv[optind - 1])) +
                            " needs a value");
        break;
      default:
        s = invalidArgument(std::string("unknown option '") + argv[optind - 1] + "'");
        break;
    }
    if (!s.isOk()) {
      std::fprintf(stderr, "%s: %s (see --help)\n", argv[0], s.message().c_str());
      return 2;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", argv[0], argv[optind]);
    return 2;
  }
  if (o->minBytes > o->maxBytes) {
    std::fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", argv[0], o->minBytes, o->maxBytes);
    return 2;
  }
  return 0;
}

// nccl-tests' size steps, rounded down to whole elements, duplicates dropped.
std::vector<size_t> sweepCounts(const Options& o) {
  const size_t es = dataTypeSize(o.type);
  std::vector<size_t> counts;
  size_t bytes = o.minBytes;
  while (bytes <= o.maxBytes) {
    const size_t count = bytes / es;
    if (counts.empty() || counts.back() != count) counts.push_back(count);
    size_t next =
        o.stepBytes ? bytes + o.stepBytes : static_cast<size_t>(std::floor(bytes * o.stepFactor));
    if (next <= bytes) next = bytes + 1;
    bytes = next;
  }
  return counts;
}

// ---------------------------------------------------------------------------------------------
// Machine and build description.

struct MachineInfo {
  std::string cpuModel = "unknown";
  long cpusOnline = 0;
  int cpusUsable = 0;
  std::string l3 = "?";
  double memGiB = 0;
  std::string hostname = "unknown";
  std::string kernel;
};

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

/// The launcher table's verdict on this process's environment (read once).
const LaunchChoice& launchChoice() {
  static const LaunchChoice choice =
      detectLaunch(LaunchEnvironment::fromProcess(), LaunchSettings::fromParams());
  return choice;
}

/// How this rank was started: the --ranks launcher, or the launcher table's row (its name first:
/// "slurm (Slurm's srun), world size 4, tcp store ...").
std::string launchDescription() {
  if (const char* l = getenv(kLauncherEnv)) return l;
  return launchChoice().row() != nullptr ? launchChoice().summary() : "environment";
}

/// Started by a launcher (torchrun-style, Slurm, Open MPI, PMI, PMIx variables) as one rank.
bool launchedAsRank() { return braid::launchedAsRank(launchChoice()); }

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

// ---------------------------------------------------------------------------------------------
// The --ranks launcher.

int runLauncher(const Options& o, const std::vector<std::string>& args) {
  launch::LaunchOptions lo;
  lo.ranks = o.ranks > 0 ? o.ranks : 1;
  lo.fileStore = o.fileStore;
  lo.timeoutMs = o.timeoutS * 1000;
  lo.argv.push_back(launch::selfExecutable());
  if (lo.argv[0].empty()) lo.argv[0] = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--ranks") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--ranks=", 0) == 0 || a == "--file-store") continue;
    lo.argv.push_back(a);
  }
  lo.env.emplace_back(kLauncherEnv, "braid-perf --ranks " + std::to_string(lo.ranks) +
                                        (o.fileStore ? " (file store)" : " (tcp store)"));
  if (!o.transport.empty()) lo.env.emplace_back("BRAID_TRANSPORT", o.transport);
  Result<launch::LaunchResult> r = launch::launchLocalRanks(lo);
  if (!r) {
    std::fprintf(stderr, "braid-perf: could not start %d ranks: %s\n", lo.ranks,
                 r.status().toString().c_str());
    return 1;
  }
  int worst = 0;
  for (size_t i = 0; i < r->exitCodes.size(); ++i) {
    const int code = r->exitCodes[i];
    if (code != 0) {
      std::fprintf(stderr, "braid-perf: rank %zu exited with %s %d\n", i,
                   code > 128 ? "signal" : "status", code > 128 ? code - 128 : code);
      worst = std::max(worst, code == 2 ? 2 : 1);
    }
  }
  if (r->timedOut) {
    std::fprintf(stderr, "braid-perf: ranks killed after -T %d s\n", o.timeoutS);
    worst = std::max(worst, 1);
  }
  return worst;
}

// ---------------------------------------------------------------------------------------------
// One rank.

struct AlignedBuffer {
  void* ptr = nullptr;
  ~AlignedBuffer() { free(ptr); }
};

class RankRunner {
 public:
  RankRunner(const CollectiveBench& bench, const Options& o, std::unique_ptr<Communicator> comm)
      : bench_(bench), o_(o), comm_(std::move(comm)), pattern_(o.type, o.op, comm_->size()) {
    ctx_.comm = comm_.get();
    ctx_.rank = comm_->rank();
    ctx_.ranks = comm_->size();
    ctx_.type = o.type;
    ctx_.op = o.op;
    ctx_.pattern = &pattern_;
  }

  int run();

 private:
  struct Measurement {
    double timeUs = 0;
    double wrong = 0;
  };

  Status resolveAlgorithms();
  Status measure(size_t count, bool inPlace, Measurement* m);
  void printHeader(const MachineInfo& machine);
  void fail(const std::string& what, const Status& s) {
    std::fprintf(stderr, "braid-perf rank %d: %s: %s\n", ctx_.rank, what.c_str(),
                 s.toString().c_str());
    comm_->abort("braid-perf rank " + std::to_string(ctx_.rank) + " failed: " + what);
  }
  bool leader() const { return ctx_.rank == 0; }

  const CollectiveBench& bench_;
  const Options& o_;
  std::unique_ptr<Communicator> comm_;
  Pattern pattern_;
  BenchContext ctx_;
  std::vector<std::string> algos_;      // "auto" or a forced name
  std::vector<std::string> available_;  // every forceable algorithm available here
  AlignedBuffer send_;
  AlignedBuffer recv_;
};

Status RankRunner::resolveAlgorithms() {
  const AlgorithmHooks& h = bench_.algorithms;
  const bool hooks = h.candidates && h.select && h.chosen;
  std::vector<std::string> requested;
  if (o_.algo == "all") {
    requested.push_back("all");
  } else {
    std::stringstream ss(o_.algo);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (!item.empty()) requested.push_back(item);
    }
    if (requested.empty()) requested.push_back("auto");
  }
  if (!hooks) {
    for (const std::string& a : requested) {
      if (a != "auto" && a != "all") {
        return invalidArgument(std::string(bench_.name) + " has a single algorithm; -a " + a);
      }
    }
    algos_ = {"auto"};
    return Status::ok();
  }
  // Availability is decided by every rank and agreed on (an algorithm runs only if all can).
  std::vector<std::string> names = h.candidates(*comm_);
  std::vector<int32_t> mine(names.size()), all(names.size() * ctx_.ranks);
  std::vector<Status> why(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    why[i] = h.select(*comm_, names[i]);
    mine[i] = why[i].isOk() ? 1 : 0;
  }
  BRAID_RETURN_IF_ERROR(h.select(*comm_, ""));
  if (!names.empty()) {
    BRAID_RETURN_IF_ERROR(comm_->allGather(mine.data(), all.data(), names.size(), DataType::kInt32)
                              .withContext("agreeing on the available algorithms"));
  }
  std::vector<std::string> unavailableWhy(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    bool ok = true;
    for (int r = 0; r < ctx_.ranks; ++r) ok = ok && all[r * names.size() + i] == 1;
    if (ok) {
      available_.push_back(names[i]);
    } else {
      unavailableWhy[i] = why[i].isOk() ? "unavailable on another rank" : why[i].message();
    }
  }
  for (const std::string& a : requested) {
    if (a == "all") {
      for (const std::string& n : available_) algos_.push_back(n);
      algos_.push_back("auto");
      continue;
    }
    if (a == "auto") {
      algos_.push_back("auto");
      continue;
    }
    auto it = std::find(names.begin(), names.end(), a);
    if (it == names.end()) {
      Status s = h.select(*comm_, a);  // canonical names and aliases come from the library
      if (!s.isOk()) return s;
      BRAID_RETURN_IF_ERROR(h.select(*comm_, ""));
      algos_.push_back(a);
      continue;
    }
    const size_t i = static_cast<size_t>(it - names.begin());
    if (std::find(available_.begin(), available_.end(), a) == available_.end()) {
      return invalidArgument("algorithm " + a + " is not available: " + unavailableWhy[i]);
    }
    algos_.push_back(a);
  }
  return Status::ok();
}

Status RankRunner::measure(size_t count, bool inPlace, Measurement* m) {
  void* recv = recv_.ptr;
  void* send = inPlace ? recv_.ptr : send_.ptr;
  bench_.initBuffers(ctx_, send, recv, count, inPlace);
  for (int i = 0; i < o_.warmup; ++i) {
    BRAID_RETURN_IF_ERROR(bench_.run(ctx_, send, recv, count, inPlace).withContext("warm-up"));
  }
  BRAID_RETURN_IF_ERROR(comm_->barrier().withContext("barrier before timing"));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o_.iters; ++i) {
    BRAID_RETURN_IF_ERROR(bench_.run(ctx_, send, recv, count, inPlace));
  }
  const auto t1 = std::chrono::steady_clock::now();
  const double localUs = std::chrono::duration<double, std::micro>(t1 - t0).count() / o_.iters;
  size_t wrong = 0;
  for (int i = 0; i < o_.check; ++i) {
    bench_.initBuffers(ctx_, send, recv, count, inPlace);
    BRAID_RETURN_IF_ERROR(bench_.run(ctx_, send, recv, count, inPlace).withContext("checked call"));
    wrong += bench_.check(ctx_, recv, count, inPlace);
  }
  // The summary travels by all-gather so that it does not depend on the algorithm under test.
  double mine[2] = {localUs, static_cast<double>(wrong)};
  std::vector<double> all(2 * static_cast<size_t>(ctx_.ranks));
  BRAID_RETURN_IF_ERROR(comm_->allGather(mine, all.data(), 2, DataType::kFloat64)
                            .withContext("gathering the per-rank times"));
  m->timeUs = 0;
  m->wrong = 0;
  for (int r = 0; r < ctx_.ranks; ++r) {
    m->timeUs = std::max(m->timeUs, all[2 * r]);
    m->wrong += all[2 * r + 1];
  }
  return Status::ok();
}

void RankRunner::printHeader(const MachineInfo& mi) {
  std::printf("# braid-perf %s: nccl-tests conventions, busbw = algbw x %s\n", bench_.name,
              std::string(bench_.name) == "all_reduce" ? "2(n-1)/n" : "factor");
  std::printf("# machine    : %s, %ld CPUs online (%d usable), L3 %s, %.1f GiB RAM, host %s, %s\n",
              mi.cpuModel.c_str(), mi.cpusOnline, mi.cpusUsable, mi.l3.c_str(), mi.memGiB,
              mi.hostname.c_str(), mi.kernel.c_str());
  std::printf("# build      : braid %s (git %s), %s, %s, flags \"%s\"%s%s\n", BRAID_PERF_VERSION,
              BRAID_GIT_REVISION, BRAID_PERF_BUILD_TYPE, compilerText().c_str(),
              BRAID_PERF_CXX_FLAGS, *BRAID_PERF_SANITIZE ? ", sanitize=" : "", BRAID_PERF_SANITIZE);
  std::printf("# ranks      : %d on %d host(s), %d on this host; started by %s\n", ctx_.ranks,
              comm_->numHosts(), comm_->localSize(), launchDescription().c_str());
  const char* src = "default";
  std::string transport = paramValueText("BRAID_TRANSPORT", &src);
  std::printf("# transport  : BRAID_TRANSPORT=%s (%s)%s\n", transport.c_str(), src,
              comm_->numHosts() == 1 ? "; auto means shm on one host" : "");
  std::string avail;
  for (const std::string& a : available_) avail += (avail.empty() ? "" : " ") + a;
  std::string run;
  for (const std::string& a : algos_) run += (run.empty() ? "" : " ") + a;
  if (!available_.empty())
    std::printf("# algorithms : available %s; running %s\n", avail.c_str(), run.c_str());
  if (bench_.algorithms.predictedUs != nullptr)
    std::printf("# model      : %s (column \"model\": predicted time of the row's algorithm)\n",
                comm_->selectorModel().c_str());
  char step[48];
  if (o_.stepBytes) {
    std::snprintf(step, sizeof(step), "-i %zu", o_.stepBytes);
  } else {
    std::snprintf(step, sizeof(step), "-f %g", o_.stepFactor);
  }
  std::printf(
      "# parameters : -b %zu -e %zu %s -n %d -w %d --rounds %d -c %d -o %s -d %s -a %s -J %s\n",
      o_.minBytes, o_.maxBytes, step, o_.iters, o_.warmup, o_.rounds, o_.check, reduceOpName(o_.op),
      dataTypeName(o_.type), o_.algo.c_str(), o_.jsonPath.empty() ? "(none)" : o_.jsonPath.c_str());
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
  if (o_.check > 0) {
    std::printf("# check      : %s\n", pattern_.limitation().empty()
                                           ? "bit-exact against a small-integer pattern"
                                           : pattern_.limitation().c_str());
  } else {
    std::printf("# check      : off (-c 0); #wrong shows N/A\n");
  }
  std::printf("#\n");
}

int RankRunner::run() {
  Status s = resolveAlgorithms();
  if (!s.isOk()) {
    if (leader()) std::fprintf(stderr, "braid-perf: %s\n", s.toString().c_str());
    return 2;
  }
  const std::vector<size_t> counts = sweepCounts(o_);
  const size_t es = dataTypeSize(o_.type);
  const size_t maxBytes = std::max<size_t>(counts.empty() ? 0 : counts.back() * es, es);
  // Buffers are allocated once at the largest size and touched before any timing.
  if (posix_memalign(&send_.ptr, kBufferAlignment, maxBytes) != 0 ||
      posix_memalign(&recv_.ptr, kBufferAlignment, maxBytes) != 0) {
    fail("allocating 2 x " + std::to_string(maxBytes) + " bytes", systemError("out of memory"));
    return 1;
  }
  poison(send_.ptr, maxBytes);
  poison(recv_.ptr, maxBytes);

  const MachineInfo mi = machineInfo();
  FILE* json = nullptr;
  if (leader() && !o_.jsonPath.empty()) {
    json = std::fopen(o_.jsonPath.c_str(), "w");
    if (json == nullptr) {
      std::fprintf(stderr, "braid-perf: cannot write %s: %s\n", o_.jsonPath.c_str(),
                   std::strerror(errno));
    }
  }
  size_t algoWidth = 6;
  for (const std::string& a : algos_) {
    size_t w = a.size();
    if (a == "auto") {
      for (const std::string& n : available_) w = std::max(w, n.size() + 5);  // "auto:" + n
    }
    algoWidth = std::max(algoWidth, w);
  }
  const bool predicts = bench_.algorithms.predictedUs != nullptr;
  const int aw = static_cast<int>(algoWidth);
  if (leader()) {
    printHeader(mi);
    std::printf("#%*s%*s\n", 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + aw + 34, "out-of-place", 38,
                "in-place");
    std::printf("#%11s  %12s  %8s  %6s  %*s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s\n", "size",
                "count", "type", "redop", aw, "algo", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong", predicts ? "    model" : "");
    std::printf("#%11s  %12s  %8s  %6s  %*s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s\n", "(B)",
                "(elements)", "", "", aw, "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "", predicts ? "     (us)" : "");
    std::fflush(stdout);
  }

  const double factor = bench_.busBwFactor(ctx_.ranks);
  double busSum = 0;
  int busRows = 0;
  double wrongTotal = 0;
  std::vector<std::pair<std::string, std::pair<double, int>>> perAlgo;  // busbw sum and rows
  const char* transportSrc = nullptr;
  const std::string transport = paramValueText("BRAID_TRANSPORT", &transportSrc);
  const AlgorithmHooks& h = bench_.algorithms;
  for (size_t count : counts) {
    const size_t bytes = count * es;
    // With --rounds R, the algorithms take turns R times and each row reports its median
    // round, so that a machine whose speed drifts (shared or throttled cores) slows every
    // algorithm alike instead of the one that happened to run during the slow spell.
    struct Row {
      std::string label, chosen;
      double predicted = -1;
      std::vector<Measurement> rounds[2];
    };
    std::vector<Row> rows(algos_.size());
    for (int round = 0; round < o_.rounds; ++round) {
      for (size_t i = 0; i < algos_.size(); ++i) {
        const std::string& algo = algos_[i];
        Row& row = rows[i];
        row.label = row.chosen = algo;
        if (h.select) {
          Status sel = h.select(*comm_, algo == "auto" ? "" : algo);
          if (!sel.isOk()) {
            fail("selecting algorithm " + algo, sel);
            return 1;
          }
          if (algo == "auto") {
            row.chosen = h.chosen(*comm_, bytes);
            row.label = "auto:" + row.chosen;
          }
        }
        row.predicted = predicts ? h.predictedUs(*comm_, row.chosen, bytes) : -1;
        for (int p = 0; p < 2; ++p) {
          Measurement one;
          Status st = measure(count, p == 1, &one);
          if (!st.isOk()) {
            fail(std::string(bench_.name) + " of " + std::to_string(bytes) + " B " +
                     dataTypeName(o_.type) + " " + reduceOpName(o_.op) + ", algorithm " +
                     row.label + (p == 1 ? ", in-place" : ", out-of-place"),
                 st);
            if (json) std::fclose(json);
            return 1;
          }
          wrongTotal += one.wrong;
          row.rounds[p].push_back(one);
        }
      }
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      Row& row = rows[i];
      const std::string& algo = algos_[i];
      const std::string& label = row.label;
      const std::string& chosen = row.chosen;
      const double predicted = row.predicted;
      Measurement m[2];
      for (int p = 0; p < 2; ++p) {
        std::vector<Measurement>& v = row.rounds[p];
        std::sort(v.begin(), v.end(),
                  [](const Measurement& a, const Measurement& b) { return a.timeUs < b.timeUs; });
        m[p].timeUs = v[v.size() / 2].timeUs;
        for (const Measurement& x : v) m[p].wrong += x.wrong;
      }
      if (!leader()) continue;
      std::printf("%12zu  %12zu  %8s  %6s  %*s", bytes, count, dataTypeName(o_.type),
                  reduceOpName(o_.op), aw, label.c_str());
      for (int p = 0; p < 2; ++p) {
        const double algbw = m[p].timeUs > 0 ? static_cast<double>(bytes) / m[p].timeUs / 1e3 : 0;
        const double busbw = algbw * factor;
        busSum += busbw;
        ++busRows;
        auto it = std::find_if(perAlgo.begin(), perAlgo.end(),
                               [&](const auto& e) { return e.first == algo; });
        if (it == perAlgo.end()) {
          perAlgo.push_back({algo, {0.0, 0}});
          it = perAlgo.end() - 1;
        }
        it->second.first += busbw;
        it->second.second += 1;
        char wrongText[32];
        if (o_.check > 0) {
          std::snprintf(wrongText, sizeof(wrongText), "%.0f", m[p].wrong);
        } else {
          std::snprintf(wrongText, sizeof(wrongText), "N/A");
        }
        std::printf("  %s  %6.2f  %6.2f  %6s", timeText(m[p].timeUs).c_str(), algbw, busbw,
                    wrongText);
        if (json) {
          std::fprintf(
              json,
              "{\"collective\":\"%s\",\"algo\":\"%s\",\"algo_chosen\":\"%s\",\"ranks\":%d,"
              "\"hosts\":%d,\"bytes\":%zu,\"count\":%zu,\"dtype\":\"%s\",\"op\":\"%s\","
              "\"inplace\":%s,\"time_us\":%.3f,\"algbw_GBps\":%.6f,\"busbw_GBps\":%.6f,"
              "\"wrong\":%.0f,\"checked\":%s,\"iters\":%d,\"warmup\":%d,\"rounds\":%d,"
              "\"transport\":\"%s\","
              "\"tool\":\"braid-perf\",\"host\":\"%s\",\"cpu\":\"%s\",\"cpus\":%ld,"
              "\"compiler\":\"%s\",\"build_type\":\"%s\",\"braid_version\":\"%s\",\"git\":\"%s\","
              "\"launch\":\"%s\",\"predicted_us\":%.3f}\n",
              bench_.name, label.c_str(), chosen.c_str(), ctx_.ranks, comm_->numHosts(), bytes,
              count, dataTypeName(o_.type), reduceOpName(o_.op), p == 1 ? "true" : "false",
              m[p].timeUs, algbw, busbw, m[p].wrong, o_.check > 0 ? "true" : "false", o_.iters,
              o_.warmup, o_.rounds, jsonEscape(transport).c_str(), jsonEscape(mi.hostname).c_str(),
              jsonEscape(mi.cpuModel).c_str(), mi.cpusOnline, jsonEscape(compilerText()).c_str(),
              BRAID_PERF_BUILD_TYPE, BRAID_PERF_VERSION, BRAID_GIT_REVISION,
              jsonEscape(launchDescription()).c_str(), predicted);
        }
      }
      if (predicts) std::printf("  %s", predicted >= 0 ? timeText(predicted).c_str() : "    N/A");
      std::printf("\n");
      std::fflush(stdout);
      if (json) std::fflush(json);
    }
  }
  if (h.select) (void)h.select(*comm_, "");
  if (json) std::fclose(json);
  if (leader()) {
    std::printf("# Out of bounds values : %.0f %s\n", wrongTotal,
                wrongTotal == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %g\n", busRows ? busSum / busRows : 0.0);
    if (perAlgo.size() > 1) {
      for (const auto& e : perAlgo) {
        std::printf("#   %-18s : %g\n", e.first.c_str(),
                    e.second.second ? e.second.first / e.second.second : 0.0);
      }
    }
    std::printf("#\n");
    std::fflush(stdout);
  }
  Status b = comm_->barrier();
  if (!b.isOk()) {
    fail("final barrier", b);
    return 1;
  }
  return wrongTotal == 0 ? 0 : 1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

Pattern::Pattern(DataType type, ReduceOp op, int ranks) {
  const int n = std::max(ranks, 1);
  period_ = kPatternPeriodPerRank * static_cast<size_t>(n);
  elemSize_ = dataTypeSize(type);
  const bool uns = isUnsigned(type);
  contributions_.assign(n, std::vector<uint8_t>(period_ * elemSize_));
  reduced_.assign(period_ * elemSize_, 0);
  for (size_t j = 0; j < period_; ++j) {
    double acc = 0;
    for (int r = 0; r < n; ++r) {
      const double v = patternValue(op, uns, n, r, j);
      encode(type, v, &contributions_[r][j * elemSize_]);
      if (r == 0) {
        acc = v;
      } else if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
        acc += v;
      } else if (op == ReduceOp::kProd) {
        acc *= v;
      } else if (op == ReduceOp::kMax) {
        acc = std::max(acc, v);
      } else {
        acc = std::min(acc, v);
      }
    }
    if (op == ReduceOp::kAvg) acc /= n;  // exact: the sum is n × base
    encode(type, acc, &reduced_[j * elemSize_]);
  }
  // Largest magnitude of any partial result, whatever the order of reduction.
  double bound = 0;
  switch (op) {
    case ReduceOp::kSum:
      bound = 2.0 * n;
      break;
    case ReduceOp::kProd:
      bound = 4;
      break;
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      bound = 8;
      break;
    case ReduceOp::kAvg:
      bound = 4.0 * n;
      break;
  }
  if (bound > exactLimit(type)) {
    limitation_ = std::string("pattern partial sums reach ") +
                  std::to_string(static_cast<long>(bound)) + ", beyond what " + dataTypeName(type) +
                  " holds exactly with " + std::to_string(n) +
                  " ranks: #wrong may count rounding, not bugs";
  }
}

const uint8_t* Pattern::contribution(int rank) const {
  return contributions_[static_cast<size_t>(rank) % contributions_.size()].data();
}

void fillPeriodic(void* dst, const uint8_t* table, size_t period, size_t elemSize, size_t count,
                  size_t phase) {
  uint8_t* out = static_cast<uint8_t*>(dst);
  phase %= period;
  while (count > 0) {
    const size_t n = std::min(count, period - phase);
    std::memcpy(out, table + phase * elemSize, n * elemSize);
    out += n * elemSize;
    count -= n;
    phase = 0;
  }
}

size_t countMismatches(const void* buf, const uint8_t* table, size_t period, size_t elemSize,
                       size_t count, size_t phase) {
  const uint8_t* in = static_cast<const uint8_t*>(buf);
  size_t wrong = 0;
  phase %= period;
  while (count > 0) {
    const size_t n = std::min(count, period - phase);
    const uint8_t* ref = table + phase * elemSize;
    if (std::memcmp(in, ref, n * elemSize) != 0) {
      for (size_t k = 0; k < n; ++k) {
        wrong += std::memcmp(in + k * elemSize, ref + k * elemSize, elemSize) != 0 ? 1 : 0;
      }
    }
    in += n * elemSize;
    count -= n;
    phase = 0;
  }
  return wrong;
}

void poison(void* buf, size_t bytes) { std::memset(buf, kPoisonByte, bytes); }

Result<size_t> parseSize(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || text[0] == '-') {
    return invalidArgument("bad size '" + text + "' (use e.g. 8, 64K, 128M, 1G)");
  }
  std::string suffix(end);
  for (char& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  unsigned long long mult = 1;
  if (!suffix.empty() &&
      (suffix[0] == 'K' || suffix[0] == 'M' || suffix[0] == 'G' || suffix[0] == 'T')) {
    const char unit = suffix[0];
    mult = unit == 'K'   ? 1ull << 10
           : unit == 'M' ? 1ull << 20
           : unit == 'G' ? 1ull << 30
                         : 1ull << 40;
    suffix.erase(0, 1);
    if (suffix == "IB") suffix = "B";
  }
  if (!suffix.empty() && suffix != "B") {
    return invalidArgument("bad size suffix in '" + text + "' (K, M, G; powers of 1024)");
  }
  if (v > (~0ull) / mult) return invalidArgument("size '" + text + "' is too large");
  return static_cast<size_t>(v * mult);
}

int benchMain(const CollectiveBench& bench, int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);  // getopt permutes argv
  Options o;
  const int parsed = parseOptions(argc, argv, &o);
  if (parsed == 1) return 0;
  if (parsed != 0) return parsed;
  if (!launchedAsRank()) return runLauncher(o, args);
  if (!o.transport.empty()) setenv("BRAID_TRANSPORT", o.transport.c_str(), 1);
  Result<std::unique_ptr<Communicator>> comm = Communicator::createFromEnvironment();
  if (!comm) {
    std::fprintf(stderr, "braid-perf: cannot create the communicator: %s\n",
                 comm.status().toString().c_str());
    return 1;
  }
  // A launcher whose MPI differs from the one braid was built with starts singletons that each
  // see a world of one; refuse to report those as an N-rank result.
  if (const LaunchRow* row = launchChoice().row();
      row != nullptr && row->identity.size > 0 && row->identity.size != (*comm)->size()) {
    std::fprintf(stderr,
                 "braid-perf: the launcher (%s: %s) says %d rank(s) but the communicator has %d; "
                 "was braid built against another MPI than this mpiexec's?\n",
                 row->def->name, row->identityText.c_str(), row->identity.size, (*comm)->size());
    return 1;
  }
  RankRunner runner(bench, o, std::move(comm.value()));
  return runner.run();
}

}  // namespace braid::perf
