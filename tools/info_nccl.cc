// braid-info nccl [--net VALUE] [--tuner VALUE] [--verbose]
//
// Resolution (what NCCL does with NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN; the values default to
// those variables): "none" disables the kind; else dlopen(VALUE) as given (a path, or a bare
// name through LD_LIBRARY_PATH and ld.so.cache); if that fails and VALUE has no '/' and is not
// lib*.so, dlopen("libnccl-<kind>-VALUE.so"). Unset: libnccl-net.so / libnccl-tuner.so. The
// net variable is a comma-separated list tried in order; a tuner that is not found falls back
// to the loaded net library.
#include "tools/info_nccl.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "plugin/nccl_abi.h"

namespace {

namespace abi = braid::abi;

bool gVerbose = false;

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
  printf("struct sizes braid was built with (NCCL 2.28.9 ABI, x86-64):\n");
  printf("  net properties v11 %zu B (v9/v10 %zu B), net table v11 %zu B (v9/v10 %zu B)\n",
         sizeof(abi::NetPropertiesV11), sizeof(abi::NetPropertiesV10), sizeof(abi::NetV11),
         sizeof(abi::NetV10));
  printf("  tuner table v2..v5 %zu B, tuner constants v5 %zu B, connect handle %zu B\n",
         sizeof(abi::TunerV5), sizeof(abi::TunerConstantsV5), abi::kNetHandleMaxSize);
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

int probeNet(void* lib, const std::string& loaded) {
  static const char* const kSyms[] = {"ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
                                      "ncclNetPlugin_v8",  "ncclNetPlugin_v7",  "ncclNetPlugin_v6"};
  std::string chosen;
  printf("  exported net versions:");
  for (const char* s : kSyms) {
    if (dlsym(lib, s) != nullptr) {
      printf(" %s", s + 14);
      if (chosen.empty()) chosen = s;
    }
  }
  printf("%s\n", chosen.empty() ? " none" : "");
  if (dlsym(lib, "ncclNetPlugin_v5") != nullptr && chosen.empty()) {
    printf("  PROBLEM: only ncclNetPlugin_v5 or older: NCCL 2.28 no longer accepts those\n");
    return 1;
  }
  if (chosen.empty()) {
    printf("  PROBLEM: %s exports no ncclNetPlugin_v6..v11: not a NCCL net plugin\n",
           loaded.c_str());
    return 1;
  }
  printf("  NCCL 2.28 would bind %s\n", chosen.c_str());
  int problems = 0;
  std::set<std::string> names;
  if (chosen == "ncclNetPlugin_v11") {
    auto* n = static_cast<const abi::NetV11*>(dlsym(lib, chosen.c_str()));
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
      abi::NetPropertiesV11 p;
      std::memset(&p, 0, sizeof(p));
      if (n->getProperties(d, &p) != abi::kSuccess) {
        printf("  PROBLEM: getProperties(%d) failed\n", d);
        ++problems;
        continue;
      }
      problems += checkProps(d, p, true, &names);
    }
    n->finalize(ctx);
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
  static const char* const kSyms[] = {"ncclTunerPlugin_v5", "ncclTunerPlugin_v4",
                                      "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"};
  std::string chosen;
  printf("  exported tuner versions:");
  for (const char* s : kSyms) {
    if (dlsym(lib, s) != nullptr) {
      printf(" %s", s + 16);
      if (chosen.empty()) chosen = s;
    }
  }
  printf("%s\n", chosen.empty() ? " none" : "");
  if (chosen.empty()) {
    printf("  %s exports no ncclTunerPlugin_v2..v5\n", loaded.c_str());
    return 1;
  }
  printf("  NCCL 2.28 would bind %s\n", chosen.c_str());
  if (chosen == "ncclTunerPlugin_v5") {
    auto* t = static_cast<const abi::TunerV5*>(dlsym(lib, chosen.c_str()));
    printf("  name \"%s\"\n", t->name ? t->name : "(null)");
    void* ctx = nullptr;
    abi::TunerConstantsV5 constants;
    std::memset(&constants, 0, sizeof(constants));
    abi::NvlDomainInfoV5 nvl{2, 8, 8};
    int r = t->init(&ctx, 0, 16, 2, pluginLogger, &nvl, &constants);
    if (r != abi::kSuccess) {
      printf("  PROBLEM: init returned %d: NCCL 2.28 would fail communicator creation\n", r);
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
    const size_t sizes[] = {4096, 1 << 20, 256u << 20};
    for (size_t n : sizes) {
      float t2[abi::kNumAlgorithms][abi::kNumProtocols];
      std::memcpy(t2, table, sizeof(t2));
      int channels = 0;
      r = t->getCollInfo(ctx, abi::kFuncAllReduce, n, 1, reinterpret_cast<float**>(t2),
                         abi::kNumAlgorithms, abi::kNumProtocols, 0, &channels);
      int algo = -1, proto = -1;
      for (int a = 0; a < abi::kNumAlgorithms; ++a) {
        for (int p = 0; p < abi::kNumProtocols; ++p) {
          if (t2[a][p] == 0.0f) algo = a, proto = p;
        }
      }
      printf(
          "  sample: allreduce %zu B, 16 ranks on 2 nodes -> result %d, algo %d proto %d "
          "channels %d\n",
          n, r, algo, proto, channels);
    }
    if (t->finalize) t->finalize(ctx);
  }
  return 0;
}

void usage(FILE* out) {
  fprintf(out,
          "usage: braid-info nccl [--net VALUE] [--tuner VALUE] [--verbose]\n"
          "  Resolves VALUE as NCCL does (default: $NCCL_NET_PLUGIN / $NCCL_TUNER_PLUGIN, else\n"
          "  libnccl-net.so / libnccl-tuner.so), loads it, and reports the plugin versions NCCL\n"
          "  would bind, struct sizes, devices and their properties, and problems found.\n"
          "  Example: braid-info nccl --net braid --tuner braid (with the build's plugin/ on\n"
          "  LD_LIBRARY_PATH), or absolute paths to libnccl-net-braid.so.\n");
}

}  // namespace

int runInfoNccl(int argc, char** argv) {
  const char* envNet = getenv("NCCL_NET_PLUGIN");
  const char* envTuner = getenv("NCCL_TUNER_PLUGIN");
  std::string net = envNet ? envNet : "";
  std::string tuner = envTuner ? envTuner : "";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--net" && i + 1 < argc) {
      net = argv[++i];
    } else if (a == "--tuner" && i + 1 < argc) {
      tuner = argv[++i];
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

  // NCCL itself, when present (for its version).
  if (void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL)) {
    using GetVersion = int (*)(int*);
    auto gv = reinterpret_cast<GetVersion>(dlsym(nccl, "ncclGetVersion"));
    int v = 0;
    if (gv != nullptr && gv(&v) == 0) {
      printf("NCCL library: libnccl.so.2 version %d.%d.%d\n", v / 10000, (v / 100) % 100, v % 100);
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
    } else if (netLib != nullptr && dlsym(netLib, "ncclTunerPlugin_v5") != nullptr) {
      printf("  falling back to the net library %s, as NCCL does\n", netLoaded.c_str());
      problems += probeTuner(netLib, netLoaded);
    } else {
      printf("  no tuner plugin: NCCL tunes by itself%s\n",
             tuner.empty() ? "" : " (PROBLEM: one was asked for)");
      if (!tuner.empty()) ++problems;
    }
  }
  if (netLib != nullptr) dlclose(netLib);
  printf("%s\n", problems == 0 ? "no problems found" : "problems found (see PROBLEM lines)");
  return problems == 0 ? 0 : 1;
}
