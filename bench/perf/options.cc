#include "bench/perf/options.h"

#include <getopt.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace braid::perf {
namespace {

void printUsage(const CollectiveBench& bench, const char* prog, FILE* out) {
  std::fprintf(
      out,
      "Usage: %s [options]\n"
      "Sweeps message sizes like nccl-tests' %s_perf and prints, per size, the\n"
      "out-of-place and in-place time(us) algbw(GB/s) busbw(GB/s) #wrong.\n"
      "The size column: %s.\n"
      "\n"
      "  -b, --minbytes SIZE     smallest message (default 8); suffixes K, M, G (x1024)\n"
      "  -e, --maxbytes SIZE     largest message (default 128M; nccl-tests defaults to 32M)\n"
      "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
      "  -i, --stepbytes SIZE    add SIZE each step instead of multiplying\n"
      "  -n, --iters N           timed iterations per size (default 20)\n"
      "  -w, --warmup_iters N    untimed iterations before each timing (default 5)\n"
      "      --rounds R          time every algorithm of a size R times, taking turns with the\n"
      "                          ceiling probe, and report each one's median round and the\n"
      "                          median ceiling (default 1; for -a lists and %%ceil on a\n"
      "                          machine whose speed drifts)\n"
      "  -c, --check N           verified calls per size and placement (default 1; 0 = none)\n"
      "%s"
      "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64 half float double\n"
      "                          bfloat16 (aliases f16 f32 f64 bf16 i8 ...; default float)\n"
      "%s"
      "  -a, --algo ALGO         auto (default), one algorithm, a comma list, or all (every\n"
      "                          available algorithm plus auto, rows tagged with the algorithm)\n"
      "  -R, --local_register N  0: buffers from malloc (default); 1: from allocShared, braid's\n"
      "                          shared windows (nccl-tests' -R registers buffers)\n"
      "  -J, --json FILE         write one JSON object per line per size, placement and algo\n"
      "      --ranks N           start N local ranks of this program and report from rank 0;\n"
      "                          without it the program is one rank of an existing launch\n"
      "                          (torchrun variables, srun, mpirun/mpiexec: braid-info launch)\n"
      "                          or, when none is found, starts one rank\n"
      "      --file-store        with --ranks: rendezvous through a directory, not TCP\n"
      "      --transport T       sets BRAID_TRANSPORT (auto|shm|tcp) for the ranks\n"
      "  -T, --timeout S         with --ranks: kill every rank after S seconds (default none)\n"
      "  -h, --help              this text\n"
      "\n"
      "Time per size is the maximum over ranks of each rank's average call time. algbw = bytes /\n"
      "time; busbw = algbw x %s (nccl-tests' PERFORMANCE.md). #wrong counts output elements\n"
      "differing bit-for-bit from the expected result, summed over ranks; the exit status is 1 if\n"
      "any is wrong. On one host, ceil is a memory-bound floor measured in the same run, every\n"
      "rank at once:\n"
      "  %s.\n"
      "Each byte is read across cores from the other ranks' memory (a shared window; braid's copy\n"
      "loop and reduce kernel; the publish with plain and non-temporal stores in turn, the\n"
      "quicker kept; phases timed between barriers, per phase the slowest rank's median\n"
      "iteration);\n"
      "%%ceil = ceil / time.\n",
      prog, bench.name, bench.sizeText,
      bench.reduces ? "  -o, --op OP             sum|prod|min|max|avg (default sum)\n"
                    : "  -o, --op OP             accepted and ignored (no reduction)\n",
      bench.rooted ? "  -r, --root N            the root rank (default 0)\n"
                   : "  -r, --root N            accepted and ignored (no root)\n",
      bench.busBwFormula, bench.ceilingFormula);
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

// The integer flags: their spelling in messages, smallest value, and field.
struct IntFlag {
  int code;
  const char* spelling;
  int minValue;
  int Options::*field;
};
constexpr IntFlag kIntFlags[] = {
    {'n', "-n", 1, &Options::iters},        {'w', "-w", 0, &Options::warmup},
    {'c', "-c", 0, &Options::check},        {'T', "-T", 0, &Options::timeoutS},
    {'U', "--rounds", 1, &Options::rounds}, {'N', "--ranks", 1, &Options::ranks},
    {'r', "-r", 0, &Options::root},         {'R', "-R", 0, &Options::localRegister},
};

// Applies one parsed flag; an error names the flag and what it needs.
Status applyOption(int c, const std::string& arg, Options* o) {
  for (const IntFlag& f : kIntFlags) {
    if (f.code != c) continue;
    BRAID_ASSIGN_OR_RETURN(int v, parseInt(f.spelling, arg, f.minValue));
    o->*f.field = v;
    return Status::ok();
  }
  switch (c) {
    case 'b':
    case 'e':
    case 'i': {
      BRAID_ASSIGN_OR_RETURN(size_t v, parseSize(arg));
      (c == 'b' ? o->minBytes : c == 'e' ? o->maxBytes : o->stepBytes) = v;
      return Status::ok();
    }
    case 'f': {
      char* end = nullptr;
      const double v = std::strtod(arg.c_str(), &end);
      if (end == arg.c_str() || *end != '\0' || !(v > 1.0)) {
        return invalidArgument("-f needs a factor > 1, got '" + arg + "'");
      }
      o->stepFactor = v;
      return Status::ok();
    }
    case 'o': {
      BRAID_ASSIGN_OR_RETURN(o->op, parseReduceOp(arg));
      return Status::ok();
    }
    case 'd': {
      BRAID_ASSIGN_OR_RETURN(o->type, parseDataType(arg));
      return Status::ok();
    }
    case 'a':
      o->algo = arg;
      return Status::ok();
    case 'J':
      o->jsonPath = arg;
      return Status::ok();
    case 'F':
      o->fileStore = true;
      return Status::ok();
    case 't':
      if (arg != "auto" && arg != "shm" && arg != "tcp") {
        return invalidArgument("--transport must be auto, shm or tcp, got '" + arg + "'");
      }
      o->transport = arg;
      return Status::ok();
  }
  return invalidArgument("unhandled option");
}

}  // namespace

ParseOutcome parseOptions(const CollectiveBench& bench, int argc, char** argv, Options* o) {
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
      {"root", required_argument, nullptr, 'r'},
      {"algo", required_argument, nullptr, 'a'},
      {"json", required_argument, nullptr, 'J'},
      {"timeout", required_argument, nullptr, 'T'},
      {"ranks", required_argument, nullptr, 'N'},
      {"local_register", required_argument, nullptr, 'R'},
      {"file-store", no_argument, nullptr, 'F'},
      {"transport", required_argument, nullptr, 't'},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  };
  // Every binary takes every flag, as nccl-tests' do (-o and -r are checked, and ignored by the
  // collectives that have no reduction or root), so that one command line drives them all.
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":b:e:f:i:n:w:c:o:d:r:a:J:T:R:h", kLong, nullptr)) != -1) {
    Status s;
    const std::string arg = optarg ? optarg : "";
    if (c == 'h') {
      printUsage(bench, argv[0], stdout);
      return ParseOutcome::kHelpShown;
    } else if (c == ':') {
      s = invalidArgument(std::string("option ") +
                          (optopt ? std::string("-") + static_cast<char>(optopt)
                                  : std::string(argv[optind - 1])) +
                          " needs a value");
    } else if (c == '?') {
      s = invalidArgument(std::string("unknown option '") + argv[optind - 1] + "'");
    } else {
      s = applyOption(c, arg, o);
    }
    if (!s.isOk()) {
      std::fprintf(stderr, "%s: %s (see --help)\n", argv[0], s.message().c_str());
      return ParseOutcome::kUsageError;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", argv[0], argv[optind]);
    return ParseOutcome::kUsageError;
  }
  if (o->localRegister > 1) {
    std::fprintf(stderr, "%s: -R takes 0 or 1 (see --help)\n", argv[0]);
    return ParseOutcome::kUsageError;
  }
  if (o->minBytes > o->maxBytes) {
    std::fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", argv[0], o->minBytes, o->maxBytes);
    return ParseOutcome::kUsageError;
  }
  return ParseOutcome::kRun;
}

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

}  // namespace braid::perf
