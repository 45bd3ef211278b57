// braid-info nccl [--net VALUE] [--tuner VALUE] [--nccl-log FILE] [--verbose]
//
// Resolution (what NCCL does with NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN; the values default to
// those variables): "none" disables the kind; else dlopen(VALUE) as given (a path, or a bare
// name through LD_LIBRARY_PATH and ld.so.cache); if that fails and VALUE has no '/' and is not
// lib*.so, dlopen("libnccl-<kind>-VALUE.so"). Unset: libnccl-net.so / libnccl-tuner.so. The
// net variable is a comma-separated list tried in order; a tuner that is not found falls back
// to the loaded net library.
//
// Which version NCCL binds: the first symbol of its search list the library exports (ABI doc
// §1.1, §3, §9.1, §9.2): up to 2.29, net v11..v6 and tuner v5..v2; from 2.30.3, net v12..v6
// and tuner v6..v2. The tool prints both and, when libnccl.so.2 loads, the one its version
// binds; --nccl-log reads what a real NCCL said it bound (its NCCL_DEBUG=INFO output).
#include "tools/info_nccl.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "plugin/nccl_abi.h"

namespace {

namespace abi = braid::abi;

bool gVerbose = false;
/// ncclGetVersion of the libnccl.so.2 found here (e.g. 22809), 0 when none loads.
int gNcclVersion = 0;
/// The first NCCL version with net v12 and tuner v6 (2.30.3).
constexpr int kFirstV12Nccl = 23003;

const char* const kNetSyms[] = {"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10",
                                "ncclNetPlugin_v9",  "ncclNetPlugin_v8",  "ncclNetPlugin_v7",
                                "ncclNetPlugin_v6"};
const char* const kTunerSyms[] = {"ncclTunerPlugin_v6", "ncclTunerPlugin_v5", "ncclTunerPlugin_v4",
                                  "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"};

template <size_t N>
bool exportsAny(void* lib, const char* const (&syms)[N]) {
  for (const char* s : syms) {
    if (dlsym(lib, s) != nullptr) return true;
  }
  return false;
}

std::string versionText(int v) {
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

/// Prints the exported versions of one kind and what each NCCL generation binds; returns the
/// symbol NCCL 2.30.3+ binds (its list starts one version higher), "" when none is exported.
/// `newest` is the symbol only 2.30.3+ looks for.
template <size_t N>
std::string reportBinding(void* lib, const char* const (&syms)[N], size_t prefix,
                          const char* newest) {
  std::string newer, older;  // 2.30.3+, and 2.28/2.29
  for (const char* s : syms) {
    if (dlsym(lib, s) == nullptr) continue;
    printf(" %s", s + prefix);
    if (newer.empty()) newer = s;
    if (older.empty() && strcmp(s, newest) != 0) older = s;
  }
  printf("%s\n", newer.empty() ? " none" : "");
  if (newer.empty()) return newer;
  printf("  NCCL 2.28/2.29 would bind %s; NCCL 2.30.3+ would bind %s\n",
         older.empty() ? "nothing" : older.c_str(), newer.c_str());
  if (gNcclVersion > 0) {
    const std::string& bound = gNcclVersion >= kFirstV12Nccl ? newer : older;
    printf("  NCCL %s (libnccl.so.2 here) would bind %s\n", versionText(gNcclVersion).c_str(),
           bound.empty() ? "nothing" : bound.c_str());
  }
  return newer;
}

void pluginLogger(abi::LogLevel level, unsigned long subsys, const char* file, int line,
                  const char* fmt, ...) {
  if (!gVerbose && level > abi::kLogWarn) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  printf("    [plugin log level %d subsys 0x%lx %s:%d] %s\n", level, subsys, file, line, buf);
}

bool endsWith(const std::string& s, const char* suffix) {
  const size_t n = strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

/// dlopen as NCCL does; prints every attempt. Returns the handle or null.
void* resolve(const char* kind, const std::string& value, std::string* loaded) {
  std::vector<std::string> tries = {value};
  if (value.find('/') == std::string::npos &&
      !(value.rfind("lib", 0) == 0 && endsWith(value, ".so"))) {
    tries.push_back(std::string("libnccl-") + kind + "-" + value + ".so");
  }
  for (const std::string& t : tries) {
    dlerror();
    void* h = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      printf("  dlopen(\"%s\"): loaded\n", t.c_str());
      *loaded = t;
      return h;
    }
    const char* err = dlerror();
    std::string why = err ? err : "unknown error";
    std::string plain;
    if (why.find("No such file") != std::string::npos ||
        why.find("cannot open") != std::string::npos) {
      plain = t.find('/') == std::string::npos
                  ? "not found on the library search path (add its directory to LD_LIBRARY_PATH, "
                    "or give an absolute path)"
                  : "no such file";
    } else if (why.find("undefined symbol") != std::string::npos) {
      plain =
          "found, but it needs a symbol no loaded library provides (built against another "
          "library version?)";
    } else if (why.find("wrong ELF class") != std::string::npos ||
               why.find("invalid ELF header") != std::string::npos) {
      plain = "not a shared library for this machine";
    } else {
      plain = "could not be loaded";
    }
    printf("  dlopen(\"%s\"): %s\n    (%s)\n", t.c_str(), plain.c_str(), why.c_str());
  }
  return nullptr;
}

void printSizes() {
  printf("struct sizes braid was built with (NCCL 2.28.9 ABI, v12/v6 from 2.30.3; x86-64):\n");
  printf(
      "  net properties v12 %zu B, v11 %zu B (v9/v10 %zu B); net table v11/v12 %zu B (v9/v10 "
      "%zu B)\n",
      sizeof(abi::NetPropertiesV12), sizeof(abi::NetPropertiesV11), sizeof(abi::NetPropertiesV10),
      sizeof(abi::NetV12), sizeof(abi::NetV10));
  printf(
      "  tuner table v6 %zu B, v2..v5 %zu B, tuner constants v5/v6 %zu B, connect handle %zu B\n",
      sizeof(abi::TunerV6), sizeof(abi::TunerV5), sizeof(abi::TunerConstantsV5),
      abi::kNetHandleMaxSize);
}

/// Checks one device's properties against what NCCL needs; returns the number of problems.
int checkProps(int dev, const abi::NetPropertiesV11& p, bool hasV11Fields,
               std::set<std::string>* names) {
  int problems = 0;
  const std::string name = p.name ? p.name : "(null)";
  printf("  device %d: %s\n", dev, name.c_str());
  printf("    pciPath %s, guid 0x%llx, speed %d Mb/s, port %d, latency %.1f us\n",
         p.pciPath ? p.pciPath : "(none: virtual NIC)", static_cast<unsigned long long>(p.guid),
         p.speed, p.port, static_cast<double>(p.latency));
  printf("    ptrSupport 0x%x (%s%s%s), maxComms %d, maxRecvs %d, type %d, version %d\n",
         p.ptrSupport, p.ptrSupport & abi::kPtrHost ? "host " : "",
         p.ptrSupport & abi::kPtrCuda ? "cuda " : "",
         p.ptrSupport & abi::kPtrDmaBuf ? "dmabuf" : "", p.maxComms, p.maxRecvs, p.netDeviceType,
         p.netDeviceVersion);
  printf("    vProps {%d: %d}, maxP2pBytes %zu, maxCollBytes %zu", p.vProps.ndevs, p.vProps.devs[0],
         p.maxP2pBytes, p.maxCollBytes);
  if (hasV11Fields) printf(", maxMultiRequestSize %d", p.maxMultiRequestSize);
  printf("\n");
  auto problem = [&](const char* text) {
    printf("    PROBLEM: %s\n", text);
    ++problems;
  };
  if (p.name == nullptr) problem("no name: NCCL needs a unique name per device");
  if (!names->insert(name).second) problem("duplicate name: NCCL keys its topology by name");
  if (p.netDeviceType != abi::kNetDeviceHost && p.netDeviceType != abi::kNetDeviceUnpack) {
    problem("device type is neither HOST nor UNPACK: NCCL cannot assign this plugin");
  }
  if (p.maxP2pBytes == 0 || p.maxP2pBytes > abi::kMaxNetSizeBytes) {
    problem("maxP2pBytes outside (0, 2^40]: NCCL's connection setup would fail");
  }
  if (p.maxRecvs < 1) problem("maxRecvs < 1");
  if (p.ptrSupport == 0) problem("ptrSupport is 0: no memory type NCCL could use");
  return problems;
}

/// v11's view of v12's properties (for checkProps), and the v12-only members printed.
abi::NetPropertiesV11 asV11(const abi::NetPropertiesV12& p) {
  abi::NetPropertiesV11 q;
  std::memset(&q, 0, sizeof(q));
  q.name = p.name;
  q.pciPath = p.pciPath;
  q.guid = p.guid;
  q.ptrSupport = p.ptrSupport;
  q.regIsGlobal = p.regIsGlobal;
  q.forceFlush = p.forceFlush;
  q.speed = p.speed;
  q.port = p.port;
  q.latency = p.latency;
  q.maxComms = p.maxComms;
  q.maxRecvs = p.maxRecvs;
  q.netDeviceType = p.netDeviceType;
  q.netDeviceVersion = p.netDeviceVersion;
  q.vProps.ndevs = p.vProps.ndevs;
  q.vProps.devs[0] = p.vProps.devs[0];
  q.maxP2pBytes = p.maxP2pBytes;
  q.maxCollBytes = p.maxCollBytes;
  q.maxMultiRequestSize = p.maxMultiRequestSize;
  return q;
}

int checkPropsOf(int dev, const abi::NetPropertiesV11& p, std::set<std::string>* names) {
  return checkProps(dev, p, true, names);
}
int checkPropsOf(int dev, const abi::NetPropertiesV12& p, std::set<std::string>* names) {
  int problems = checkProps(dev, asV11(p), true, names);
  printf("    railId %d, planeId %d (-1 = unknown)\n", p.railId, p.planeId);
  if (p.vProps.ndevs < 1 || p.vProps.ndevs > abi::kNetMaxDevsPerNicV12) {
    printf("    PROBLEM: vProps.ndevs %d outside 1..%d\n", p.vProps.ndevs,
           abi::kNetMaxDevsPerNicV12);
    ++problems;
  }
  return problems;
}

template <typename Table>
struct PropsOfTable;
template <>
struct PropsOfTable<abi::NetV11> {
  using type = abi::NetPropertiesV11;
};
template <>
struct PropsOfTable<abi::NetV12> {
  using type = abi::NetPropertiesV12;
};
template <typename Table>
using PropsOf = typename PropsOfTable<Table>::type;

/// init, devices, getProperties of every device and finalize through a v11 or v12 table (the
/// same slots; only the properties differ).
template <typename Table>
int probeNetTable(const Table* n, std::set<std::string>* names) {
  int problems = 0;
  printf("  name \"%s\"\n", n->name ? n->name : "(null)");
  if (n->finalize == nullptr) {
    printf("  PROBLEM: finalize is NULL; NCCL 2.28 calls it unconditionally\n");
    ++problems;
  }
  void* ctx = nullptr;
  int r = n->init(&ctx, 0, nullptr, pluginLogger, nullptr);
  if (r != abi::kSuccess) {
    printf(
        "  PROBLEM: init returned %d: NCCL would skip this plugin and fall back to its "
        "internal IB or Socket transport (run with --verbose, or BRAID_DEBUG=INFO)\n",
        r);
    if (n->finalize) n->finalize(ctx);
    return problems + 1;
  }
  int ndev = 0;
  r = n->devices(&ndev);
  if (r != abi::kSuccess || ndev < 1) {
    printf(
        "  PROBLEM: devices returned %d with %d devices: NCCL disables a plugin without "
        "devices (check BRAID_NET_IFNAME)\n",
        r, ndev);
    ++problems;
  }
  for (int d = 0; d < ndev; ++d) {
    PropsOf<Table> p;
    std::memset(&p, 0, sizeof(p));
    if (n->getProperties(d, &p) != abi::kSuccess) {
      printf("  PROBLEM: getProperties(%d) failed\n", d);
      ++problems;
      continue;
    }
    problems += checkPropsOf(d, p, names);
  }
  n->finalize(ctx);
  return problems;
}

int probeNet(void* lib, const std::string& loaded) {
  printf("  exported net versions:");
  const std::string chosen = reportBinding(lib, kNetSyms, 14, "ncclNetPlugin_v12");
  if (dlsym(lib, "ncclNetPlugin_v5") != nullptr && chosen.empty()) {
    printf("  PROBLEM: only ncclNetPlugin_v5 or older: NCCL 2.28 no longer accepts those\n");
    return 1;
  }
  if (chosen.empty()) {
    printf("  PROBLEM: %s exports no ncclNetPlugin_v6..v12: not a NCCL net plugin\n",
           loaded.c_str());
    return 1;
  }
  int problems = 0;
  std::set<std::string> names;
  if (chosen == "ncclNetPlugin_v12") {
    problems += probeNetTable(static_cast<const abi::NetV12*>(dlsym(lib, chosen.c_str())), &names);
    if (auto* n11 = static_cast<const abi::NetV11*>(dlsym(lib, "ncclNetPlugin_v11"))) {
      printf("  and ncclNetPlugin_v11, for NCCL 2.28/2.29:\n");
      std::set<std::string> names11;
      problems += probeNetTable(n11, &names11);
    }
  } else if (chosen == "ncclNetPlugin_v11") {
    problems += probeNetTable(static_cast<const abi::NetV11*>(dlsym(lib, chosen.c_str())), &names);
  } else if (chosen == "ncclNetPlugin_v10" || chosen == "ncclNetPlugin_v9") {
    auto* n10 = static_cast<const abi::NetV10*>(dlsym(lib, chosen.c_str()));
    auto* n9 = static_cast<const abi::NetV9*>(dlsym(lib, chosen.c_str()));
    int r =
        chosen == "ncclNetPlugin_v10" ? n10->init(pluginLogger, nullptr) : n9->init(pluginLogger);
    if (r != abi::kSuccess) {
      printf("  PROBLEM: init returned %d: NCCL would fall back to IB or Socket\n", r);
      return problems + 1;
    }
    int ndev = 0;
    n10->devices(&ndev);  // same slot in v9 and v10
    for (int d = 0; d < ndev; ++d) {
      abi::NetPropertiesV11 p;
      std::memset(&p, 0, sizeof(p));
      if (n10->getProperties(d, reinterpret_cast<abi::NetPropertiesV10*>(&p)) == abi::kSuccess) {
        problems += checkProps(d, p, false, &names);
      }
    }
    if (ndev < 1) {
      printf("  PROBLEM: no devices: NCCL disables the plugin\n");
      ++problems;
    }
  } else {
    printf("  (v8 and older are not probed further by this tool)\n");
  }
  return problems;
}

int probeTuner(void* lib, const std::string& loaded) {
  printf("  exported tuner versions:");
  const std::string chosen = reportBinding(lib, kTunerSyms, 16, "ncclTunerPlugin_v6");
  if (chosen.empty()) {
    printf("  %s exports no ncclTunerPlugin_v2..v6\n", loaded.c_str());
    return 1;
  }
  if (chosen == "ncclTunerPlugin_v6" || chosen == "ncclTunerPlugin_v5") {
    // v6 is v5's four slots and getChunkSize: the v5 view drives the first four.
    auto* t = static_cast<const abi::TunerV5*>(dlsym(lib, chosen.c_str()));
    const abi::TunerV6* t6 = chosen == "ncclTunerPlugin_v6"
                                 ? static_cast<const abi::TunerV6*>(dlsym(lib, chosen.c_str()))
                                 : nullptr;
    printf("  name \"%s\"\n", t->name ? t->name : "(null)");
    void* ctx = nullptr;
    abi::TunerConstantsV5 constants;
    std::memset(&constants, 0, sizeof(constants));
    abi::NvlDomainInfoV5 nvl{2, 8, 8};
    int r = t->init(&ctx, 0, 16, 2, pluginLogger, &nvl, &constants);
    if (r != abi::kSuccess) {
      printf("  PROBLEM: init returned %d: NCCL would fail communicator creation\n", r);
      return 1;
    }
    // A sample decision on NCCL's table shape: contiguous float[7][3] passed as float**.
    float table[abi::kNumAlgorithms][abi::kNumProtocols];
    for (auto& row : table) {
      for (float& c : row) c = 100.0f;
    }
    for (int a = abi::kAlgoCollNetDirect; a < abi::kNumAlgorithms; ++a) {
      for (float& c : table[a]) c = abi::kAlgoProtoIgnore;
    }
    // One getCollInfo on a copy of `offered`, printed with the (algorithm, protocol) it chose
    // (the one it priced 0).
    auto sample = [&](abi::Func func, size_t n, const float (&offered)[abi::kNumAlgorithms][abi::kNumProtocols],
                      const char* what) {
      float t2[abi::kNumAlgorithms][abi::kNumProtocols];
      std::memcpy(t2, offered, sizeof(t2));
      int channels = 0;
      r = t->getCollInfo(ctx, func, n, 1, reinterpret_cast<float**>(t2), abi::kNumAlgorithms,
                         abi::kNumProtocols, 0, &channels);
      int algo = -1, proto = -1;
      for (int a = 0; a < abi::kNumAlgorithms; ++a) {
        for (int p = 0; p < abi::kNumProtocols; ++p) {
          if (t2[a][p] == 0.0f) algo = a, proto = p;
        }
      }
      printf("  sample: %s %zu B, %s -> result %d, algo %d proto %d channels %d\n",
             func == abi::kFuncAllReduce ? "allreduce" : "allgather", n, what, r, algo, proto,
             channels);
    };
    for (size_t n : {size_t{4096}, size_t{1} << 20, size_t{256} << 20}) {
      sample(abi::kFuncAllReduce, n, table, "16 ranks on 2 nodes");
    }
    if (t6 != nullptr && t6->getChunkSize != nullptr) {
      size_t chunk = size_t{1} << 20;
      r = t6->getChunkSize(ctx, abi::kFuncAllReduce, 4u << 20, abi::kAlgoTree, abi::kProtoSimple, 1,
                           &chunk);
      printf(
          "  sample: getChunkSize allreduce tree/simple 4194304 B per channel, NCCL's chunk "
          "1048576 -> result %d, chunk %zu\n",
          r, chunk);
    }
    if (t->finalize) t->finalize(ctx);
    // PAT's placement: one GPU on each of 8 nodes, NCCL's table with PAT/SIMPLE offered.
    if (t->init(&ctx, 0, 8, 8, pluginLogger, &nvl, &constants) == abi::kSuccess) {
      float pat[abi::kNumAlgorithms][abi::kNumProtocols];
      for (int a = 0; a < abi::kNumAlgorithms; ++a) {
        for (int p = 0; p < abi::kNumProtocols; ++p) {
          pat[a][p] = a == abi::kAlgoRing || (a == abi::kAlgoPat && p == abi::kProtoSimple)
                          ? 100.0f
                          : abi::kAlgoProtoIgnore;
        }
      }
      for (size_t n : {size_t{1} << 20, size_t{256} << 20}) {
        sample(abi::kFuncAllGather, n, pat, "8 ranks on 8 nodes (ring, pat offered)");
      }
      if (t->finalize) t->finalize(ctx);
    }
  }
  return 0;
}

/// The N of the first "(vN)" in `line`, or -1.
int versionInParens(const std::string& line) {
  for (size_t at = line.find("(v"); at != std::string::npos; at = line.find("(v", at + 2)) {
    size_t end = at + 2;
    while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
    if (end > at + 2 && end < line.size() && line[end] == ')') {
      return std::atoi(line.substr(at + 2, end - at - 2).c_str());
    }
  }
  return -1;
}

/// What a real NCCL run said it bound: its NCCL_DEBUG=INFO output (NCCL_DEBUG_SUBSYS including
/// INIT,NET,TUNING) names the net plugin it loaded and the tuner it uses with their versions,
/// e.g. "... Loaded net plugin ... (v11)", "... TUNER/Plugin: Using ... (v5)" (ABI doc §8.4).
/// Returns the number of problems (an unreadable file).
int reportNcclLog(const std::string& path) {
  printf("NCCL's own log (%s):\n", path.c_str());
  std::ifstream in(path);
  if (!in) {
    printf("  PROBLEM: cannot read %s\n", path.c_str());
    return 1;
  }
  int found = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::string lower = line;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const int v = versionInParens(line);
    const char* kind = nullptr;
    const bool collNet = lower.find("collnet") != std::string::npos;  // not the net plugin
    if (v >= 0 && lower.find("tuner") != std::string::npos) {
      kind = "tuner";
    } else if (v >= 0 && !collNet && lower.find("net plugin") != std::string::npos) {
      kind = "net";
    }
    if (kind != nullptr) {
      printf("  NCCL bound %s v%d: %s\n", kind, v, line.c_str());
      ++found;
    } else if (lower.find("assigned net plugin") != std::string::npos) {
      printf("  %s\n", line.c_str());
    }
  }
  if (found == 0) {
    printf(
        "  no plugin binding lines: NCCL did not load a plugin, or ran without NCCL_DEBUG=INFO "
        "NCCL_DEBUG_SUBSYS=INIT,NET,TUNING\n");
  }
  return 0;
}

void usage(FILE* out) {
  fprintf(out,
          "usage: braid-info nccl [--net VALUE] [--tuner VALUE] [--nccl-log FILE] [--verbose]\n"
          "  Resolves VALUE as NCCL does (default: $NCCL_NET_PLUGIN / $NCCL_TUNER_PLUGIN, else\n"
          "  libnccl-net.so / libnccl-tuner.so), loads it, and reports the net and tuner versions\n"
          "  it exports, which one NCCL 2.28/2.29 and NCCL 2.30.3+ would bind (and the\n"
          "  libnccl.so.2 found here, by its version), struct sizes, devices and their\n"
          "  properties (railId/planeId for v12), sample tuner decisions, and problems found.\n"
          "  --nccl-log FILE: also report the versions a real NCCL run bound, from its\n"
          "  NCCL_DEBUG=INFO output (NCCL_DEBUG_SUBSYS=INIT,NET,TUNING).\n"
          "  Example: braid-info nccl --net braid --tuner braid (with the build's plugin/ on\n"
          "  LD_LIBRARY_PATH), or absolute paths to libnccl-net-braid.so.\n");
}

}  // namespace

int runInfoNccl(int argc, char** argv) {
  const char* envNet = getenv("NCCL_NET_PLUGIN");
  const char* envTuner = getenv("NCCL_TUNER_PLUGIN");
  std::string net = envNet ? envNet : "";
  std::string tuner = envTuner ? envTuner : "";
  std::string ncclLog;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--net" && i + 1 < argc) {
      net = argv[++i];
    } else if (a == "--tuner" && i + 1 < argc) {
      tuner = argv[++i];
    } else if (a == "--nccl-log" && i + 1 < argc) {
      ncclLog = argv[++i];
    } else if (a == "--verbose" || a == "-v") {
      gVerbose = true;
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "braid-info nccl: unknown argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  printSizes();
  int problems = 0;

  // NCCL itself, when present (for its version: which plugin versions it binds).
  gNcclVersion = 0;
  if (void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL)) {
    using GetVersion = int (*)(int*);
    auto gv = reinterpret_cast<GetVersion>(dlsym(nccl, "ncclGetVersion"));
    int v = 0;
    if (gv != nullptr && gv(&v) == 0) {
      printf("NCCL library: libnccl.so.2 version %s\n", versionText(v).c_str());
      gNcclVersion = v;
    }
    dlclose(nccl);
  } else {
    printf("NCCL library: libnccl.so.2 not found (not needed for this check)\n");
  }

  printf("net plugin (NCCL_NET_PLUGIN=%s):\n", net.empty() ? "(unset)" : net.c_str());
  void* netLib = nullptr;
  std::string netLoaded;
  if (strcasecmp(net.c_str(), "none") == 0) {
    printf("  disabled (\"none\"): NCCL uses only its internal IB and Socket transports\n");
  } else {
    std::vector<std::string> values;
    if (net.empty()) {
      values.push_back("libnccl-net.so");
    } else {
      size_t b = 0;
      while (b <= net.size()) {
        size_t e = net.find(',', b);
        if (e == std::string::npos) e = net.size();
        if (e > b) values.push_back(net.substr(b, e - b));
        b = e + 1;
      }
    }
    for (const std::string& v : values) {
      netLib = resolve("net", v, &netLoaded);
      if (netLib != nullptr) break;
    }
    if (netLib == nullptr) {
      printf(
          "  PROBLEM: no net plugin loaded: NCCL would silently use its internal IB or "
          "Socket transport\n");
      ++problems;
    } else {
      problems += probeNet(netLib, netLoaded);
    }
  }

  printf("tuner plugin (NCCL_TUNER_PLUGIN=%s):\n", tuner.empty() ? "(unset)" : tuner.c_str());
  if (strcasecmp(tuner.c_str(), "none") == 0) {
    printf("  disabled (\"none\"): NCCL tunes by itself\n");
  } else {
    std::string tunerLoaded;
    void* tunerLib = resolve("tuner", tuner.empty() ? "libnccl-tuner.so" : tuner, &tunerLoaded);
    if (tunerLib != nullptr) {
      problems += probeTuner(tunerLib, tunerLoaded);
      dlclose(tunerLib);
    } else if (netLib != nullptr && exportsAny(netLib, kTunerSyms)) {
      printf("  falling back to the net library %s, as NCCL does\n", netLoaded.c_str());
      problems += probeTuner(netLib, netLoaded);
    } else {
      printf("  no tuner plugin: NCCL tunes by itself%s\n",
             tuner.empty() ? "" : " (PROBLEM: one was asked for)");
      if (!tuner.empty()) ++problems;
    }
  }
  if (netLib != nullptr) dlclose(netLib);
  if (!ncclLog.empty()) problems += reportNcclLog(ncclLog);
  printf("%s\n", problems == 0 ? "no problems found" : "problems found (see PROBLEM lines)");
  return problems == 0 ? 0 : 1;
}
