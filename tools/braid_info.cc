// braid-info: what braid sees on this machine.
//   braid-info topo [--source auto|sysfs|hwloc|file] [--write FILE]
//   braid-info params
//   braid-info launch
//   braid-info model
//   braid-info algorithms [--hosts H] [--ranks-per-host R] [--transport auto|shm|tcp]
//   braid-info nccl ...            (when built with tools/info_nccl.cc)
//   braid-info --help
// Exits 0 on success, 1 when detection or writing failed (launch: no launcher, malformed or
// conflicting launcher variables), 2 on a usage error.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>

#include <ctime>

#include "collectives/algorithms.h"
#include "collectives/selector/calibration.h"
#include "core/params.h"
#include "topology/detect.h"
#include "topology/topology_file.h"
#include "transport/bootstrap/launchers.h"

#if BRAID_HAVE_INFO_NCCL
#include "tools/info_nccl.h"
#endif

namespace {

void usage(FILE* out) {
  fprintf(out,
          "usage: braid-info COMMAND [OPTIONS]\n"
          "\n"
          "commands:\n"
          "  topo [--source auto|sysfs|hwloc|file] [--write FILE]\n"
          "      Print this host's topology: sockets, NUMA nodes, cores, NICs (kind, speed,\n"
          "      PCI path, addresses), GPUs, the PCI tree and links. The default source is\n"
          "      BRAID_TOPO_FILE when set, else hwloc (when built with it) completed by sysfs.\n"
          "      --write FILE also writes it as a topology file (docs/topology-file.md), which\n"
          "      BRAID_TOPO_FILE=FILE injects later.\n"
          "  algorithms [--hosts H] [--ranks-per-host R] [--transport auto|shm|tcp]\n"
          "      Print braid's algorithm table: per collective, each algorithm's name and\n"
          "      aliases (what BRAID_ALGO, tuning files and braid-perf -a accept), whether the\n"
          "      selector searches its pipelining chunk, and whether it runs on H hosts of R\n"
          "      ranks each (default 1 x 2; tcp: no shared segment), and why not.\n"
          "  model\n"
          "      Print the calibration cache (BRAID_CALIBRATION_CACHE, else ~/.cache/braid): per\n"
          "      fabric, its fingerprint (hosts, ranks per host, transport, NICs, cores), the\n"
          "      model a job on that fabric starts from, and its age. Each job holds the model\n"
          "      against its live calls and re-probes one that strays 4x (docs/tuning-file.md).\n"
          "  params\n"
          "      Print every BRAID_* parameter: name, type, default, the value in effect and\n"
          "      where it came from (env or default), and what it does.\n"
          "  launch\n"
          "      Print the launcher table in recognition order (file, torchrun, slurm, ompi,\n"
          "      pmi, pmix, mpi): for each launcher whether its variables are present and what\n"
          "      they say, then the one braid would use and why: rank, world size, local rank\n"
          "      and size, node, the store's host:port. Exits 1 when no launcher is found or\n"
          "      the variables are malformed or conflict (the error says which). See\n"
          "      docs/launchers.md.\n"
          "  nccl [ARGS]\n"
          "      NCCL and plugin versions (%s).\n"
          "  --help\n"
          "      This text.\n",
#if BRAID_HAVE_INFO_NCCL
          "see braid-info nccl --help"
#else
          "not in this build"
#endif
  );
}

const char* typeName(braid::ParamType t) {
  switch (t) {
    case braid::ParamType::kInt:
      return "int";
    case braid::ParamType::kBool:
      return "bool";
    case braid::ParamType::kString:
      return "string";
    case braid::ParamType::kEnum:
      return "enum";
  }
  return "?";
}

int runTopo(int argc, char** argv) {
  std::string source = "auto";
  std::string writePath;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--write" && i + 1 < argc) {
      writePath = argv[++i];
    } else if (a == "--source" && i + 1 < argc) {
      source = argv[++i];
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "braid-info topo: unknown argument '%s' (see braid-info --help)\n",
              a.c_str());
      return 2;
    }
  }
  braid::Result<braid::topo::Topology> t = braid::topo::detectTopology(source);
  if (!t.isOk()) {
    fprintf(stderr, "braid-info topo: %s\n", t.status().toString().c_str());
    return 1;
  }
  fputs(braid::topo::describe(t.value()).c_str(), stdout);
  if (!writePath.empty()) {
    braid::Status s = braid::topo::writeTopologyFile(t.value(), writePath);
    if (!s.isOk()) {
      fprintf(stderr, "braid-info topo: %s\n", s.toString().c_str());
      return 1;
    }
    printf("wrote %s\n", writePath.c_str());
  }
  return 0;
}

int runParams(int argc, char** argv) {
  if (argc > 0) {
    if (std::strcmp(argv[0], "-h") == 0 || std::strcmp(argv[0], "--help") == 0) {
      usage(stdout);
      return 0;
    }
    fprintf(stderr, "braid-info params: unknown argument '%s'\n", argv[0]);
    return 2;
  }
  struct Row {
    std::string name, type, def, value, source, help;
  };
  auto shown = [](const std::string& v) { return v.empty() ? std::string("\"\"") : v; };
  std::vector<Row> rows = {{"# name", "type", "default", "value", "source", "help"}};
  for (const braid::ParamDef& def : braid::paramTable()) {
    const char* source = nullptr;
    const std::string value = braid::paramValueText(def.name, &source);
    std::string type = typeName(def.type);
    if (def.type == braid::ParamType::kEnum) type += std::string(":") + def.choices;
    rows.push_back({def.name, type, shown(def.defaultValue), shown(value), source, def.help});
  }
  size_t w[5] = {0, 0, 0, 0, 0};
  for (const Row& r : rows) {
    const std::string* cols[5] = {&r.name, &r.type, &r.def, &r.value, &r.source};
    for (int i = 0; i < 5; ++i) w[i] = std::max(w[i], cols[i]->size());
  }
  for (const Row& r : rows) {
    printf("%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", int(w[0]), r.name.c_str(), int(w[1]),
           r.type.c_str(), int(w[2]), r.def.c_str(), int(w[3]), r.value.c_str(), int(w[4]),
           r.source.c_str(), r.help.c_str());
  }
  return 0;
}

std::string identityLine(const braid::LaunchIdentity& id) {
  auto known = [](int v) { return v >= 0 ? std::to_string(v) : std::string("?"); };
  std::string out =
      "rank " + known(id.rank) + " of " + (id.size > 0 ? std::to_string(id.size) : "?");
  out += ", local rank " + known(id.localRank) + " of " + known(id.localSize);
  out += ", node " + known(id.node);
  if (id.startedThisProcess) out += ", started by torchrun's agent";
  return out;
}

std::string storeLine(const braid::StoreSpec& s) {
  switch (s.kind) {
    case braid::StoreKind::kFile:
      return "file store " + s.directory;
    case braid::StoreKind::kTcp: {
      const bool v6 = s.host.find(':') != std::string::npos;
      return "tcp store " + (v6 ? "[" + s.host + "]" : s.host) + ":" + std::to_string(s.port) +
             " (" + s.origin + ")";
    }
    case braid::StoreKind::kMpi:
      return "store through MPI (" + s.origin + ")";
    case braid::StoreKind::kNone:
      break;
  }
  return "no store";
}

int runLaunch(int argc, char** argv) {
  if (argc > 0) {
    if (std::strcmp(argv[0], "-h") == 0 || std::strcmp(argv[0], "--help") == 0) {
      usage(stdout);
      return 0;
    }
    fprintf(stderr, "braid-info launch: unknown argument '%s'\n", argv[0]);
    return 2;
  }
  const braid::LaunchSettings settings = braid::LaunchSettings::fromParams();
  const braid::LaunchChoice c =
      braid::detectLaunch(braid::LaunchEnvironment::fromProcess(), settings);
  printf("launchers in recognition order (BRAID_BOOTSTRAP=%s; braid %s MPI)\n",
         settings.method.c_str(), settings.mpiBuild ? "built with" : "without");
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const braid::LaunchRow& r = c.rows[i];
    printf("%zu  %-9s %-8s %s\n", i + 1, r.def->name, r.present ? "present" : "absent",
           static_cast<int>(i) == c.chosen ? "<- chosen" : "");
    printf("     %s; marked by %s\n", r.def->title, r.def->presentIf);
    printf("     reads %s\n", r.def->variables);
    if (!r.present) continue;
    if (!r.identityText.empty()) printf("     found %s\n", r.identityText.c_str());
    if (r.identityStatus.isOk()) {
      printf("     %s\n", identityLine(r.identity).c_str());
    } else {
      printf("     cannot use its ranks: %s\n", r.identityStatus.message().c_str());
    }
    if (r.storeStatus.isOk()) {
      printf("     %s\n", storeLine(r.store).c_str());
    } else {
      printf("     no store: %s\n", r.storeStatus.message().c_str());
    }
  }
  if (!c.status.isOk()) {
    printf("chosen: none\n");
    fprintf(stderr, "braid-info launch: %s\n", c.status.toString().c_str());
    return 1;
  }
  const braid::LaunchRow& r = *c.row();
  printf("chosen: %s (%s)\n", r.def->name, r.def->title);
  printf("  why: %s\n", c.reason.c_str());
  printf("  %s\n", identityLine(r.identity).c_str());
  printf("  %s\n", storeLine(r.store).c_str());
  return 0;
}

int runAlgorithms(int argc, char** argv) {
  braid::detail::AlgoLayout layout;
  int hosts = 1, perHost = 2;
  std::string transport = "auto";
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if ((a == "--hosts" || a == "--ranks-per-host") && hasValue) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 1 << 20) {
        fprintf(stderr, "braid-info algorithms: %s needs a positive integer, got '%s'\n", a.c_str(),
                argv[i]);
        return 2;
      }
      (a == "--hosts" ? hosts : perHost) = static_cast<int>(v);
    } else if (a == "--transport" && hasValue) {
      transport = argv[++i];
      if (transport != "auto" && transport != "shm" && transport != "tcp") {
        fprintf(stderr, "braid-info algorithms: --transport must be auto, shm or tcp\n");
        return 2;
      }
    } else {
      fprintf(stderr, "braid-info algorithms: unknown argument '%s' (see braid-info --help)\n",
              a.c_str());
      return 2;
    }
  }
  layout.hosts = hosts;
  layout.ranks = hosts * perHost;
  layout.minLocal = layout.maxLocal = perHost;
  layout.segment = transport != "tcp" && perHost > 1;
  printf("algorithm table: %d host(s) x %d rank(s), transport %s (shared segment: %s)\n", hosts,
         perHost, transport.c_str(), layout.segment ? "yes" : "no");
  printf("%-15s %-20s %-17s %-13s %s\n", "collective", "algorithm", "aliases", "chunk search",
         "here");
  for (const braid::detail::Algorithm& row : braid::detail::algorithmTable()) {
    const char* why = row.unavailable(layout);
    char chunk[32] = "no";
    if (row.chunkSearchFrom > 0) {
      std::snprintf(chunk, sizeof(chunk), "from %zu KiB", row.chunkSearchFrom >> 10);
    }
    printf("%-15s %-20s %-17s %-13s %s\n", braid::collectiveName(row.collective), row.name,
           *row.aliases ? row.aliases : "-", chunk, *why ? why : "available");
  }
  return 0;
}

std::string ageText(double seconds) {
  char buf[48];
  if (seconds < 120) {
    std::snprintf(buf, sizeof(buf), "%.0f s", seconds);
  } else if (seconds < 7200) {
    std::snprintf(buf, sizeof(buf), "%.0f min", seconds / 60);
  } else if (seconds < 172800) {
    std::snprintf(buf, sizeof(buf), "%.1f h", seconds / 3600);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f days", seconds / 86400);
  }
  return buf;
}

int runModel(int argc, char** /*argv*/) {
  if (argc > 0) {
    fprintf(stderr, "braid-info model: takes no options (see braid-info --help)\n");
    return 2;
  }
  const std::string dir = braid::detail::cacheDirectory();
  if (dir.empty()) {
    printf("calibration cache: off (BRAID_CALIBRATION_CACHE=%s): every job probes\n",
           braid::paramString("BRAID_CALIBRATION_CACHE").c_str());
    return 0;
  }
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("fabric-", 0) == 0 && n.size() > 4 && n.substr(n.size() - 4) == ".txt") {
        files.push_back(dir + "/" + n);
      }
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  printf("calibration cache: %s (%zu fabric(s))\n", dir.c_str(), files.size());
  if (files.empty()) printf("  empty: the next job on any fabric probes it\n");
  for (const std::string& path : files) {
    struct stat st {};
    const double age = stat(path.c_str(), &st) == 0
                           ? std::difftime(std::time(nullptr), st.st_mtime)
                           : -1;
    const std::string fp = braid::detail::cachedFingerprint(path);
    printf("%s\n  fingerprint: %s\n  age: %s\n", path.c_str(), fp.empty() ? "(none)" : fp.c_str(),
           age >= 0 ? ageText(age).c_str() : "?");
    auto m = braid::detail::readCachedModel(path, fp);
    if (m.isOk()) {
      printf("  model: %s\n", m->describe().c_str());
    } else {
      printf("  unusable: %s (the next job on this fabric probes it anew)\n",
             m.status().message().c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  if (cmd == "topo") return runTopo(argc - 2, argv + 2);
  if (cmd == "params") return runParams(argc - 2, argv + 2);
  if (cmd == "model") return runModel(argc - 2, argv + 2);
  if (cmd == "algorithms") return runAlgorithms(argc - 2, argv + 2);
  if (cmd == "launch") return runLaunch(argc - 2, argv + 2);
  if (cmd == "nccl") {
#if BRAID_HAVE_INFO_NCCL
    // runInfoNccl sees "nccl" as its argv[0].
    return runInfoNccl(argc - 1, argv + 1);
#else
    // Hook: tools/info_nccl.{h,cc} (target braid_info_nccl) provides
    // int runInfoNccl(int argc, char** argv); tools/CMakeLists.txt links it and defines
    // BRAID_HAVE_INFO_NCCL=1 when that target exists.
    fprintf(stderr, "braid-info nccl: not in this build (tools/info_nccl.cc missing)\n");
    return 1;
#endif
  }
  fprintf(stderr, "braid-info: unknown command '%s' (see braid-info --help)\n", cmd.c_str());
  return 2;
}
