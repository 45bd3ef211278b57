// The launcher table (see launchers.h for the recognition order and the conflict rule): one
// reader per row, each turning its launcher's variables into a LaunchIdentity and a StoreSpec,
// and detectLaunch, which evaluates every row and chooses one.
#include "transport/bootstrap/launchers.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/params.h"

namespace braid {
namespace {

constexpr int64_t kMaxWorld = int64_t{1} << 24;

// The explanation for a WORLD_SIZE that counts nodes (shared by every check that detects one).
constexpr const char* kNodeCountHelp =
    "WORLD_SIZE seems to count nodes, not processes: Kubeflow's PyTorchJob exports WORLD_SIZE = "
    "the number of pods and RANK = the pod's index, for a torchrun inside each pod to turn into "
    "process counts; start the workers with torchrun (which reads PET_NNODES and "
    "PET_NPROC_PER_NODE), or export WORLD_SIZE = nodes x processes per node and RANK = "
    "GROUP_RANK x LOCAL_WORLD_SIZE + LOCAL_RANK";

// ---------------------------------------------------------------------------------------------
// Reading variables

/// Parses integer variable `name`; `needs` names the method and its variables for the message.
Result<int64_t> intVariable(const LaunchEnvironment& env, const char* name, int64_t min,
                            int64_t max, const std::string& needs) {
  const char* text = env.get(name);
  if (text == nullptr) return invalidArgument(std::string(name) + " is not set; " + needs);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    return invalidArgument(std::string(name) + "='" + text + "' is not an integer; " + needs);
  }
  if (v < min || v > max) {
    return invalidArgument(std::string(name) + "=" + text + " is out of range " +
                           std::to_string(min) + ".." + std::to_string(max) + "; " + needs);
  }
  return static_cast<int64_t>(v);
}

/// As intVariable, -1 when unset.
Result<int64_t> optionalInt(const LaunchEnvironment& env, const char* name, int64_t min,
                            int64_t max, const std::string& needs) {
  if (env.get(name) == nullptr) return int64_t{-1};
  return intVariable(env, name, min, max, needs);
}

/// A strictly positive integer, or -1 (unset, or not a plain number: e.g. PET_NNODES=1:4).
int64_t plainCount(const LaunchEnvironment& env, const char* name) {
  const char* text = env.get(name);
  if (text == nullptr) return -1;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 1) return -1;
  return v;
}

/// "A=1, B=2" for the variables in `names` that are set.
std::string variablesText(const LaunchEnvironment& env, std::initializer_list<const char*> names) {
  std::string out;
  for (const char* n : names) {
    const char* v = env.get(n);
    if (v == nullptr) continue;
    if (!out.empty()) out += ", ";
    out += std::string(n) + "=" + v;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Rows

/// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, with the checks that catch a
/// WORLD_SIZE counting nodes. Shared by the torchrun and the file rows.
Status readTorchrunIdentity(const LaunchEnvironment& env, const std::string& needs,
                            LaunchIdentity* id) {
  BRAID_ASSIGN_OR_RETURN(int64_t size, intVariable(env, "WORLD_SIZE", 1, kMaxWorld, needs));
  BRAID_ASSIGN_OR_RETURN(int64_t localSize,
                         optionalInt(env, "LOCAL_WORLD_SIZE", 1, kMaxWorld, needs));
  BRAID_ASSIGN_OR_RETURN(int64_t localRank,
                         optionalInt(env, "LOCAL_RANK", 0, kMaxWorld - 1, needs));
  const int64_t nodes = plainCount(env, "PET_NNODES");
  // Processes per node as far as this node's launcher says: LOCAL_WORLD_SIZE, or Kubeflow's
  // PET_NPROC_PER_NODE when a local launcher (LOCAL_RANK) started several.
  int64_t perNode = localSize;
  if (perNode < 0 && localRank >= 0) perNode = plainCount(env, "PET_NPROC_PER_NODE");
  if (nodes > 0 && size == nodes && perNode > 1) {
    return invalidArgument("WORLD_SIZE=" + std::to_string(size) +
                           " equals PET_NNODES=" + std::to_string(nodes) + " with " +
                           std::to_string(perNode) + " processes per node: " + kNodeCountHelp);
  }
  std::string rankHelp = " (RANK must be below WORLD_SIZE=" + std::to_string(size) + ")";
  if (localSize > 1 || nodes > 0) rankHelp += "; " + std::string(kNodeCountHelp);
  BRAID_ASSIGN_OR_RETURN(int64_t rank, intVariable(env, "RANK", 0, size - 1, needs + rankHelp));
  if (localSize > size) {
    return invalidArgument("LOCAL_WORLD_SIZE=" + std::to_string(localSize) +
                           " is larger than WORLD_SIZE=" + std::to_string(size) + ": " +
                           kNodeCountHelp);
  }
  if (localRank >= size) {
    return invalidArgument("LOCAL_RANK=" + std::to_string(localRank) + " is out of range 0.." +
                           std::to_string(size - 1) + "; " + needs);
  }
  if (localSize > 0 && localRank >= localSize) {
    return invalidArgument("LOCAL_RANK=" + std::to_string(localRank) +
                           " is not below LOCAL_WORLD_SIZE=" + std::to_string(localSize) + "; " +
                           needs);
  }
  BRAID_ASSIGN_OR_RETURN(int64_t group, optionalInt(env, "GROUP_RANK", 0, kMaxWorld, needs));
  // torchrun numbers its workers itself (nodes may run different counts); elsewhere a node index
  // that does not add up means RANK or WORLD_SIZE describe nodes.
  const bool torchrun = env.get("TORCHELASTIC_RUN_ID") != nullptr;
  if (!torchrun && group >= 0 && localSize > 0 && localRank >= 0 &&
      group * localSize + localRank != rank) {
    return invalidArgument("GROUP_RANK=" + std::to_string(group) +
                           " x LOCAL_WORLD_SIZE=" + std::to_string(localSize) +
                           " + LOCAL_RANK=" + std::to_string(localRank) + " = " +
                           std::to_string(group * localSize + localRank) +
                           ", but RANK=" + std::to_string(rank) + ": " + kNodeCountHelp);
  }
  id->rank = static_cast<int>(rank);
  id->size = static_cast<int>(size);
  id->localRank = static_cast<int>(localRank);
  id->localSize = static_cast<int>(localSize);
  id->node = static_cast<int>(group);
  id->startedThisProcess = torchrun;
  return Status::ok();
}

std::string torchrunText(const LaunchEnvironment& env) {
  return variablesText(env, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"});
}

void readFile(const LaunchEnvironment& env, const LaunchSettings& settings, LaunchRow* row) {
  const std::string needs = "the file bootstrap needs BRAID_FILE_STORE, RANK and WORLD_SIZE";
  row->present = !settings.fileStore.empty();
  row->identityText = torchrunText(env);
  row->identityStatus = readTorchrunIdentity(env, needs, &row->identity);
  if (settings.fileStore.empty()) {
    row->storeStatus = invalidArgument("BRAID_FILE_STORE is not set; " + needs);
    return;
  }
  row->store.kind = StoreKind::kFile;
  row->store.directory = settings.fileStore;
  row->store.origin = "BRAID_FILE_STORE";
}

/// The port rank 0 serves braid's store on (see BRAID_STORE_PORT). A real torchrun launch
/// (torch.distributed.run sets TORCHELASTIC_RUN_ID in every worker) keeps its own c10d store on
/// MASTER_PORT (served by the agent, or by worker 0 once it calls init_process_group), so braid
/// moves next door, to MASTER_PORT + 1; launches that only set the variables (braid-run, tests,
/// job scripts) keep MASTER_PORT itself.
Result<int> torchrunStorePort(const LaunchEnvironment& env, const LaunchSettings& settings,
                              int masterPort, std::string* origin) {
  const int64_t forced = settings.storePort;
  if (forced < 0 || forced > 65535) {
    return invalidArgument("BRAID_STORE_PORT=" + std::to_string(forced) +
                           " is out of range 0..65535 (0 = automatic)");
  }
  if (forced > 0) {
    *origin = "MASTER_ADDR, BRAID_STORE_PORT";
    return static_cast<int>(forced);
  }
  if (env.get("TORCHELASTIC_RUN_ID") == nullptr) {
    *origin = "MASTER_ADDR, MASTER_PORT";
    return masterPort;
  }
  if (masterPort == 65535) {
    return invalidArgument(
        "MASTER_PORT=65535 under torchrun leaves no port for braid's store "
        "(MASTER_PORT + 1); set BRAID_STORE_PORT");
  }
  *origin = "MASTER_ADDR, MASTER_PORT + 1 (torchrun's c10d store holds MASTER_PORT)";
  return masterPort + 1;
}

void readTorchrun(const LaunchEnvironment& env, const LaunchSettings& settings, LaunchRow* row) {
  const std::string needs =
      "the torchrun bootstrap needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
      "(LOCAL_RANK optional)";
  row->present = env.get("RANK") != nullptr || env.get("WORLD_SIZE") != nullptr;
  row->identityText = torchrunText(env);
  row->identityStatus = readTorchrunIdentity(env, needs, &row->identity);
  const char* addr = env.get("MASTER_ADDR");
  if (addr == nullptr) {
    row->storeStatus = invalidArgument("MASTER_ADDR is not set; " + needs);
    return;
  }
  Result<int64_t> masterPort = intVariable(env, "MASTER_PORT", 1, 65535, needs);
  if (!masterPort.isOk()) {
    row->storeStatus = masterPort.status();
    return;
  }
  std::string origin;
  Result<int> port = torchrunStorePort(env, settings, static_cast<int>(*masterPort), &origin);
  if (!port.isOk()) {
    row->storeStatus = port.status();
    return;
  }
  row->store.kind = StoreKind::kTcp;
  row->store.host = addr;
  row->store.port = *port;
  row->store.hostVariable = "MASTER_ADDR";
  row->store.origin = origin;
  row->store.context = std::string("torchrun bootstrap with MASTER_ADDR=") + addr +
                       " MASTER_PORT=" + std::to_string(*masterPort) +
                       (*port != *masterPort ? " (braid's store on port " + std::to_string(*port) +
                                                   ", see BRAID_STORE_PORT)"
                                             : std::string());
}

/// BRAID_STORE_PORT when set, else `portVariable` (its value, range-checked).
Result<int> explicitPort(const LaunchEnvironment& env, const LaunchSettings& settings,
                         const char* portVariable, const std::string& needs, std::string* origin) {
  if (settings.storePort < 0 || settings.storePort > 65535) {
    return invalidArgument("BRAID_STORE_PORT=" + std::to_string(settings.storePort) +
                           " is out of range 0..65535 (0 = automatic)");
  }
  if (settings.storePort > 0) {
    *origin = "BRAID_STORE_PORT";
    return static_cast<int>(settings.storePort);
  }
  BRAID_ASSIGN_OR_RETURN(int64_t port, intVariable(env, portVariable, 1, 65535, needs));
  *origin = portVariable;
  return static_cast<int>(port);
}

void readSlurm(const LaunchEnvironment& env, const LaunchSettings& settings, LaunchRow* row) {
  const std::string needs =
      "the slurm bootstrap needs SLURM_PROCID and SLURM_NTASKS (srun sets "
      "both in every task)";
  row->present = env.get("SLURM_PROCID") != nullptr;
  const char* sizeVar = env.get("SLURM_NTASKS") != nullptr || env.get("SLURM_NPROCS") == nullptr
                            ? "SLURM_NTASKS"
                            : "SLURM_NPROCS";
  const char* perNodeVar = env.get("SLURM_STEP_TASKS_PER_NODE") != nullptr
                               ? "SLURM_STEP_TASKS_PER_NODE"
                               : "SLURM_NTASKS_PER_NODE";
  row->identityText =
      variablesText(env, {"SLURM_PROCID", sizeVar, "SLURM_LOCALID", "SLURM_NODEID", perNodeVar});
  row->identityStatus = [&]() -> Status {
    LaunchIdentity& id = row->identity;
    BRAID_ASSIGN_OR_RETURN(int64_t size, intVariable(env, sizeVar, 1, kMaxWorld, needs));
    BRAID_ASSIGN_OR_RETURN(int64_t rank,
                           intVariable(env, "SLURM_PROCID", 0, size - 1,
                                       needs + " (SLURM_PROCID must be below " + sizeVar + "=" +
                                           std::to_string(size) + ")"));
    BRAID_ASSIGN_OR_RETURN(int64_t local, optionalInt(env, "SLURM_LOCALID", 0, size - 1, needs));
    BRAID_ASSIGN_OR_RETURN(int64_t node, optionalInt(env, "SLURM_NODEID", 0, kMaxWorld, needs));
    id.rank = static_cast<int>(rank);
    id.size = static_cast<int>(size);
    id.localRank = static_cast<int>(local);
    id.node = static_cast<int>(node);
    if (const char* perNode = env.get(perNodeVar)) {
      BRAID_ASSIGN_OR_RETURN(std::vector<int> counts, expandSlurmTaskCounts(perNode, perNodeVar));
      // One entry per node of the step; a single entry is every node's count.
      if (counts.size() == 1) {
        id.localSize = counts[0];
      } else if (node >= 0 && static_cast<size_t>(node) < counts.size()) {
        id.localSize = counts[static_cast<size_t>(node)];
      }
    }
    return Status::ok();
  }();

  // Host: MASTER_ADDR, else the first node of the step's (or the job's) node list.
  std::string hostOrigin;
  if (const char* addr = env.get("MASTER_ADDR")) {
    row->store.host = addr;
    row->store.hostVariable = "MASTER_ADDR";
    hostOrigin = "MASTER_ADDR";
  } else {
    const char* listVar = nullptr;
    for (const char* v : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      if (env.get(v) != nullptr) {
        listVar = v;
        break;
      }
    }
    if (listVar == nullptr) {
      row->storeStatus = invalidArgument(
          "the slurm bootstrap finds rank 0's host in SLURM_JOB_NODELIST (or "
          "SLURM_STEP_NODELIST), and neither is set; set MASTER_ADDR to rank 0's host");
      return;
    }
    Result<std::vector<std::string>> hosts = expandSlurmHostlist(env.get(listVar), listVar);
    if (!hosts.isOk()) {
      row->storeStatus = hosts.status();
      return;
    }
    row->store.host = hosts->front();
    row->store.hostVariable = std::string("the first host of ") + listVar;
    hostOrigin = row->store.hostVariable;
    // Rank 0 serves the store: it must be where the others will look for it.
    if (row->identityStatus.isOk() && row->identity.rank == 0 && row->identity.node > 0) {
      row->storeStatus = invalidArgument(
          "SLURM_PROCID=0 runs on node SLURM_NODEID=" + std::to_string(row->identity.node) +
          ", not on the first node of " + listVar + " (" + hosts->front() +
          "), where the other ranks look for braid's store; set MASTER_ADDR to rank 0's host");
      return;
    }
  }

  // Port: BRAID_STORE_PORT, else MASTER_PORT, else derived from the job id.
  std::string portOrigin;
  if (settings.storePort != 0 || env.get("MASTER_PORT") != nullptr) {
    Result<int> port = explicitPort(env, settings, "MASTER_PORT", needs, &portOrigin);
    if (!port.isOk()) {
      row->storeStatus = port.status();
      return;
    }
    row->store.port = *port;
  } else {
    const char* job =
        env.get("SLURM_JOB_ID") != nullptr ? env.get("SLURM_JOB_ID") : env.get("SLURM_JOBID");
    if (job == nullptr) {
      row->storeStatus = invalidArgument(
          "the slurm bootstrap derives its store port from SLURM_JOB_ID, which is not set; set "
          "MASTER_PORT or BRAID_STORE_PORT");
      return;
    }
    Result<int> port = slurmDerivedPort(job);
    if (!port.isOk()) {
      row->storeStatus = port.status();
      return;
    }
    row->store.port = *port;
    portOrigin = std::to_string(kSlurmPortBase) + " + SLURM_JOB_ID % " +
                 std::to_string(kSlurmPortSpan) + " (SLURM_JOB_ID=" + job + ")";
  }
  row->store.kind = StoreKind::kTcp;
  row->store.origin = hostOrigin + ", port " + portOrigin;
  row->store.context = "slurm bootstrap with braid's store on " + row->store.host + ":" +
                       std::to_string(row->store.port) + " (" + row->store.origin +
                       "; MASTER_ADDR, MASTER_PORT or BRAID_STORE_PORT change it)";
}

/// The store of a launcher that gives ranks but no address: MASTER_ADDR and MASTER_PORT (or
/// BRAID_STORE_PORT). `example` shows how to pass them with this launcher.
void storeFromMaster(const LaunchEnvironment& env, const LaunchSettings& settings,
                     const std::string& launcher, const std::string& example, LaunchRow* row) {
  const std::string needs = launcher +
                            " gives no rendezvous address: set MASTER_ADDR (rank 0's "
                            "host) and MASTER_PORT (a free port) for every rank, e.g. " +
                            example;
  const char* addr = env.get("MASTER_ADDR");
  if (addr == nullptr) {
    row->storeStatus = invalidArgument(
        needs + (settings.mpiBuild
                     ? "; or leave BRAID_BOOTSTRAP=auto (or set it to mpi) for this braid, built "
                       "with MPI, to use MPI itself"
                     : "; a braid built with MPI (BRAID_WITH_MPI) would use MPI itself"));
    return;
  }
  std::string portOrigin;
  Result<int> port = explicitPort(env, settings, "MASTER_PORT", needs, &portOrigin);
  if (!port.isOk()) {
    row->storeStatus = port.status();
    return;
  }
  row->store.kind = StoreKind::kTcp;
  row->store.host = addr;
  row->store.port = *port;
  row->store.hostVariable = "MASTER_ADDR";
  row->store.origin = "MASTER_ADDR, " + portOrigin;
  row->store.context = std::string(row->def->name) + " bootstrap with braid's store on " + addr +
                       ":" + std::to_string(*port) + " (" + row->store.origin + ")";
}

/// Rank, size, local rank and local size from four variables (Open MPI's, Hydra's).
Status readFour(const LaunchEnvironment& env, const char* rankVar, const char* sizeVar,
                const char* localRankVar, const char* localSizeVar, const std::string& needs,
                LaunchIdentity* id) {
  BRAID_ASSIGN_OR_RETURN(int64_t size, intVariable(env, sizeVar, 1, kMaxWorld, needs));
  BRAID_ASSIGN_OR_RETURN(int64_t rank, intVariable(env, rankVar, 0, size - 1, needs));
  BRAID_ASSIGN_OR_RETURN(int64_t local, optionalInt(env, localRankVar, 0, size - 1, needs));
  BRAID_ASSIGN_OR_RETURN(int64_t localSize, optionalInt(env, localSizeVar, 1, size, needs));
  id->rank = static_cast<int>(rank);
  id->size = static_cast<int>(size);
  id->localRank = static_cast<int>(local);
  id->localSize = static_cast<int>(localSize);
  return Status::ok();
}

void readOmpi(const LaunchEnvironment& env, const LaunchSettings& settings, LaunchRow* row) {
  row->present = env.get("OMPI_COMM_WORLD_RANK") != nullptr;
  row->identityText =
      variablesText(env, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"});
  row->identityStatus = readFour(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                 "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                 "Open MPI's mpirun sets OMPI_COMM_WORLD_RANK and "
                                 "OMPI_COMM_WORLD_SIZE",
                                 &row->identity);
  storeFromMaster(env, settings, "Open MPI's mpirun",
                  "mpirun -x MASTER_ADDR=$(hostname) -x MASTER_PORT=29500 ...", row);
}

void readPmi(const LaunchEnvironment& env, const LaunchSettings& settings, LaunchRow* row) {
  row->present = env.get("PMI_RANK") != nullptr;
  row->identityText =
      variablesText(env, {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"});
  row->identityStatus = readFour(
      env, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
      "a PMI launcher (MPICH's or Intel MPI's mpiexec) sets PMI_RANK and PMI_SIZE", &row->identity);
  storeFromMaster(env, settings, "a PMI launcher (MPICH's or Intel MPI's mpiexec)",
                  "mpiexec -genv MASTER_ADDR $(hostname) -genv MASTER_PORT 29500 ...", row);
}

void readPmix(const LaunchEnvironment& env, const LaunchSettings& settings, LaunchRow* row) {
  row->present = env.get("PMIX_RANK") != nullptr;
  row->identityText = variablesText(env, {"PMIX_RANK"});
  Result<int64_t> rank =
      intVariable(env, "PMIX_RANK", 0, kMaxWorld - 1, "a PMIx launcher sets PMIX_RANK");
  if (!rank.isOk()) {
    row->identityStatus = rank.status();
  } else {
    row->identity.rank = static_cast<int>(*rank);
    // PMIx hands out the world size through its library only.
    row->identityStatus = invalidArgument(
        "PMIX_RANK=" + std::to_string(*rank) +
        " comes without a world size (PMIx gives it through its library only): launch with "
        "mpirun (OMPI_COMM_WORLD_SIZE), srun (SLURM_NTASKS) or torchrun-style variables, or use "
        "a braid built with MPI (BRAID_WITH_MPI)");
  }
  storeFromMaster(env, settings, "a PMIx launcher", "prterun -x MASTER_ADDR -x MASTER_PORT ...",
                  row);
}

void readMpi(const LaunchEnvironment& env, const LaunchSettings& settings, LaunchRow* row) {
  // An MPI launch: what its launcher's variables say (MPI itself decides at bootstrap).
  LaunchRow launcher;
  for (const char* name : {"ompi", "pmi", "pmix"}) {
    for (const LauncherDef& def : launcherTable()) {
      if (std::string(def.name) != name) continue;
      launcher = LaunchRow();
      launcher.def = &def;
      def.read(env, settings, &launcher);
    }
    if (launcher.present) break;
  }
  row->present = settings.mpiBuild && launcher.present;
  row->identityText = launcher.identityText;
  if (launcher.present && launcher.identityStatus.isOk()) row->identity = launcher.identity;
  if (!settings.mpiBuild) {
    row->storeStatus = invalidArgument(
        "BRAID_BOOTSTRAP=mpi (or an mpiexec launch) needs braid built with MPI "
        "(BRAID_WITH_MPI); set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE instead");
    return;
  }
  row->store.kind = StoreKind::kMpi;
  row->store.origin = "MPI_COMM_WORLD: rank 0 broadcasts its address";
}

const char* kindText(StoreKind kind) {
  switch (kind) {
    case StoreKind::kFile:
      return "file";
    case StoreKind::kTcp:
      return "tcp";
    case StoreKind::kMpi:
      return "mpi";
    case StoreKind::kNone:
      break;
  }
  return "none";
}

// ---------------------------------------------------------------------------------------------
// Choosing

/// A row that takes part in the comparison: present, readable, with a world size.
bool comparable(const LaunchRow& r) {
  return r.present && r.identityStatus.isOk() && r.identity.size > 0 &&
         std::string(r.def->name) != "mpi";
}

bool sameProcess(const LaunchIdentity& a, const LaunchIdentity& b) {
  return a.size == b.size && a.rank == b.rank;
}

/// Whether `outer` is a launcher that started the one that started `inner` (see launchers.h).
bool isOuterOf(const LaunchIdentity& outer, const LaunchIdentity& inner) {
  if (inner.startedThisProcess && outer.size <= inner.size) return true;
  return outer.size < inner.size && outer.localSize == 1 && inner.localSize > 0;
}

std::string says(const LaunchRow& r) {
  return std::string(r.def->name) + " says rank " + std::to_string(r.identity.rank) + " of " +
         std::to_string(r.identity.size) + " (" + r.identityText + ")";
}

Status conflict(const LaunchRow& a, const LaunchRow& b) {
  return invalidArgument(
      "launchers disagree: " + says(a) + " but " + says(b) +
      "; braid does not guess which one started this process. Unset the stale variables (often "
      "RANK/WORLD_SIZE exported by a job script, or a scheduler's inherited by processes started "
      "outside it), or pick one with BRAID_BOOTSTRAP=" +
      a.def->name + " or BRAID_BOOTSTRAP=" + b.def->name + " (docs/launchers.md)");
}

int rowIndex(const std::vector<LaunchRow>& rows, const std::string& name) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (name == rows[i].def->name) return static_cast<int>(i);
  }
  return -1;
}

/// The chosen row's own errors, identity first.
Status rowStatus(const LaunchRow& r) {
  if (!r.identityStatus.isOk()) return r.identityStatus;
  return r.storeStatus;
}

}  // namespace

LaunchEnvironment::LaunchEnvironment(std::map<std::string, std::string> vars)
    : vars_(std::move(vars)) {}

LaunchEnvironment LaunchEnvironment::fromProcess() {
  std::map<std::string, std::string> vars;
  for (const std::string& name : launcherVariableNames()) {
    if (const char* v = std::getenv(name.c_str())) vars[name] = v;
  }
  return LaunchEnvironment(std::move(vars));
}

const char* LaunchEnvironment::get(const std::string& name) const {
  auto it = vars_.find(name);
  return it == vars_.end() || it->second.empty() ? nullptr : it->second.c_str();
}

const std::vector<std::string>& launcherVariableNames() {
  static const std::vector<std::string> kNames = {"RANK",
                                                  "WORLD_SIZE",
                                                  "LOCAL_RANK",
                                                  "LOCAL_WORLD_SIZE",
                                                  "GROUP_RANK",
                                                  "MASTER_ADDR",
                                                  "MASTER_PORT",
                                                  "TORCHELASTIC_RUN_ID",
                                                  "PET_NNODES",
                                                  "PET_NPROC_PER_NODE",
                                                  "SLURM_PROCID",
                                                  "SLURM_NTASKS",
                                                  "SLURM_NPROCS",
                                                  "SLURM_LOCALID",
                                                  "SLURM_NODEID",
                                                  "SLURM_STEP_TASKS_PER_NODE",
                                                  "SLURM_NTASKS_PER_NODE",
                                                  "SLURM_STEP_NODELIST",
                                                  "SLURM_JOB_NODELIST",
                                                  "SLURM_NODELIST",
                                                  "SLURM_JOB_ID",
                                                  "SLURM_JOBID",
                                                  "OMPI_COMM_WORLD_RANK",
                                                  "OMPI_COMM_WORLD_SIZE",
                                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                                  "OMPI_COMM_WORLD_LOCAL_SIZE",
                                                  "PMI_RANK",
                                                  "PMI_SIZE",
                                                  "MPI_LOCALRANKID",
                                                  "MPI_LOCALNRANKS",
                                                  "PMIX_RANK"};
  return kNames;
}

LaunchSettings LaunchSettings::fromParams() {
  LaunchSettings s;
  s.method = paramString("BRAID_BOOTSTRAP");
  s.storePort = paramInt("BRAID_STORE_PORT");
  s.fileStore = paramString("BRAID_FILE_STORE");
#ifdef BRAID_WITH_MPI
  s.mpiBuild = true;
#endif
  return s;
}

const std::vector<LauncherDef>& launcherTable() {
  static const std::vector<LauncherDef> kTable = {
      {"file", "a shared directory as the store (tests)", "BRAID_FILE_STORE",
       "BRAID_FILE_STORE, RANK, WORLD_SIZE; optional LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK",
       "RANK", "WORLD_SIZE", readFile},
      {"torchrun", "torchrun, Kubeflow PyTorchJob, braid-run, job scripts", "RANK or WORLD_SIZE",
       "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; optional LOCAL_RANK, LOCAL_WORLD_SIZE, "
       "GROUP_RANK; checked against PET_NNODES, PET_NPROC_PER_NODE; TORCHELASTIC_RUN_ID moves "
       "the store to MASTER_PORT + 1",
       "RANK", "WORLD_SIZE", readTorchrun},
      {"slurm", "Slurm's srun", "SLURM_PROCID",
       "SLURM_PROCID, SLURM_NTASKS (or SLURM_NPROCS), SLURM_LOCALID, SLURM_NODEID, "
       "SLURM_STEP_TASKS_PER_NODE (or SLURM_NTASKS_PER_NODE); store host MASTER_ADDR, else the "
       "first host of SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST, SLURM_NODELIST); port "
       "BRAID_STORE_PORT, else MASTER_PORT, else 20000 + SLURM_JOB_ID % 9000",
       "SLURM_PROCID", "SLURM_NTASKS", readSlurm},
      {"ompi", "Open MPI's mpirun (no MPI needed in braid)", "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, "
       "OMPI_COMM_WORLD_LOCAL_SIZE; store MASTER_ADDR, MASTER_PORT (or BRAID_STORE_PORT)",
       "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", readOmpi},
      {"pmi", "MPICH's or Intel MPI's mpiexec (Hydra), PMI-1/2 launchers", "PMI_RANK",
       "PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS; store MASTER_ADDR, MASTER_PORT "
       "(or BRAID_STORE_PORT)",
       "PMI_RANK", "PMI_SIZE", readPmi},
      {"pmix", "a PMIx launcher (prterun, srun --mpi=pmix)", "PMIX_RANK",
       "PMIX_RANK (no world size: marks a launch; the MPI launch in a braid built with MPI)",
       "PMIX_RANK", "", readPmix},
      {"mpi", "an MPI launch (braid built with BRAID_WITH_MPI)",
       "OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK (in a braid built with MPI)",
       "the ompi, pmi or pmix row's variables without MASTER_ADDR; rank and size then come from "
       "MPI_COMM_WORLD, and rank 0 serves the store on an ephemeral port and broadcasts its "
       "address",
       "", "", readMpi},
  };
  return kTable;
}

LaunchChoice detectLaunch(const LaunchEnvironment& env, const LaunchSettings& settings) {
  LaunchChoice c;
  for (const LauncherDef& def : launcherTable()) {
    LaunchRow row;
    row.def = &def;
    def.read(env, settings, &row);
    c.rows.push_back(std::move(row));
  }
  const int mpi = rowIndex(c.rows, "mpi");

  // An explicit choice: that row alone.
  std::string method = settings.method.empty() ? "auto" : settings.method;
  if (method == "env") method = "torchrun";
  if (method != "auto") {
    const int i = rowIndex(c.rows, method);
    if (i < 0) {
      std::string names = "auto, env";
      for (const LaunchRow& r : c.rows) names += std::string(", ") + r.def->name;
      c.status =
          invalidArgument("BRAID_BOOTSTRAP='" + settings.method + "' is not one of " + names);
      return c;
    }
    const LaunchRow& r = c.rows[static_cast<size_t>(i)];
    // The MPI launch asks MPI itself; the launcher's variables need not be there.
    c.status = i == mpi ? r.storeStatus : rowStatus(r);
    if (c.status.isOk()) {
      c.chosen = i;
      c.reason = "BRAID_BOOTSTRAP=" + settings.method + " (other launchers' variables ignored)";
    }
    return c;
  }

  // The first present row, moved inward past outer launchers.
  int chosen = -1;
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const LaunchRow& r = c.rows[i];
    if (!r.present || static_cast<int>(i) == mpi) continue;
    if (chosen < 0) {
      chosen = static_cast<int>(i);
      c.reason = "the first present launcher";
    } else if (comparable(c.rows[static_cast<size_t>(chosen)]) && comparable(r) &&
               isOuterOf(c.rows[static_cast<size_t>(chosen)].identity, r.identity)) {
      c.reason = std::string("inside ") + c.rows[static_cast<size_t>(chosen)].def->name +
                 "'s task (which started it)";
      chosen = static_cast<int>(i);
    }
  }
  if (chosen < 0) {
    c.status = invalidArgument(
        std::string(env.get("MASTER_ADDR") != nullptr
                        ? "MASTER_ADDR is set but no launcher's rank variables are: "
                        : "no bootstrap found in the environment: ") +
        "launch with torchrun (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), srun (SLURM_PROCID, "
        "SLURM_NTASKS, SLURM_JOB_NODELIST), mpirun or mpiexec (OMPI_COMM_WORLD_RANK or PMI_RANK, "
        "with MASTER_ADDR and MASTER_PORT unless braid is built with MPI), or set "
        "BRAID_FILE_STORE=<dir> with RANK and WORLD_SIZE (docs/launchers.md)");
    return c;
  }

  // Every other readable row must describe this process too, or an outer launcher of it.
  const LaunchRow& p = c.rows[static_cast<size_t>(chosen)];
  std::vector<int> agreeing = {chosen};  // the chosen row and those that agree, in table order
  if (comparable(p)) {
    for (size_t i = 0; i < c.rows.size(); ++i) {
      const LaunchRow& q = c.rows[i];
      if (static_cast<int>(i) == chosen || !comparable(q)) continue;
      // The file row reads the torchrun row's variables.
      if (std::string(p.def->name) == "file" && std::string(q.def->name) == "torchrun") continue;
      if (sameProcess(p.identity, q.identity)) {
        c.reason += std::string("; ") + q.def->name + " agrees (" + q.identityText + ")";
        agreeing.push_back(static_cast<int>(i));
      } else if (isOuterOf(q.identity, p.identity)) {
        c.reason +=
            std::string("; ") + q.def->name + " is an outer launcher (" + q.identityText + ")";
      } else {
        c.status = conflict(p, q);
        return c;
      }
    }
  }
  std::sort(agreeing.begin(), agreeing.end());

  // The store: the chosen row's, else that of the first agreeing row that has one (RANK and
  // WORLD_SIZE exported from SLURM_PROCID and SLURM_NTASKS, without MASTER_ADDR, under srun).
  int withStore = -1;
  bool mpiLauncher = false;
  for (int i : agreeing) {
    const LaunchRow& r = c.rows[static_cast<size_t>(i)];
    const std::string name = r.def->name;
    mpiLauncher = mpiLauncher || name == "ompi" || name == "pmi" || name == "pmix";
    if (withStore < 0 && r.identityStatus.isOk() && r.storeStatus.isOk()) withStore = i;
  }
  if (p.identityStatus.isOk() && withStore >= 0 && withStore != chosen) {
    c.reason += std::string("; the store from ") +
                c.rows[static_cast<size_t>(withStore)].def->name + " (" + p.def->name +
                " has none: " + p.storeStatus.message() + ")";
    chosen = withStore;
  } else if (withStore < 0 && mpiLauncher && env.get("MASTER_ADDR") == nullptr && mpi >= 0 &&
             c.rows[static_cast<size_t>(mpi)].present) {
    // Ranks without an address: the MPI launch when braid has MPI, as under mpiexec before.
    c.reason += "; no MASTER_ADDR, so the MPI launch";
    chosen = mpi;
  }
  c.status = chosen == mpi ? c.rows[static_cast<size_t>(mpi)].storeStatus
                           : rowStatus(c.rows[static_cast<size_t>(chosen)]);
  if (c.status.isOk()) c.chosen = chosen;
  return c;
}

bool launchedAsRank(const LaunchChoice& choice) {
  for (const LaunchRow& r : choice.rows) {
    const std::string name = r.def->name;
    if (r.present && name != "file" && name != "mpi") return true;
  }
  return false;
}

std::string LaunchChoice::summary() const {
  const LaunchRow* r = row();
  if (r == nullptr) return "none: " + status.message();
  std::string out = std::string(r->def->name) + " (" + r->def->title + ")";
  if (r->identity.size > 0) out += ", world size " + std::to_string(r->identity.size);
  out += std::string(", ") + kindText(r->store.kind) + " store";
  if (r->store.kind == StoreKind::kTcp) {
    const bool v6 = r->store.host.find(':') != std::string::npos;
    out += " " + (v6 ? "[" + r->store.host + "]" : r->store.host) + ":" +
           std::to_string(r->store.port);
  } else if (r->store.kind == StoreKind::kFile) {
    out += " " + r->store.directory;
  }
  if (!r->store.origin.empty()) out += " (" + r->store.origin + ")";
  return out;
}

}  // namespace braid
