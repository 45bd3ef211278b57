// The launcher table: every way a braid process learns its rank, the world size and where the
// rendezvous store is, one row per launcher, in the order braid recognises them.
//
//   #  name      launcher                      present when          rank / size
//   1  file      BRAID_FILE_STORE (tests)      BRAID_FILE_STORE      RANK / WORLD_SIZE
//   2  torchrun  torchrun, Kubeflow, braid-run RANK or WORLD_SIZE    RANK / WORLD_SIZE
//   3  slurm     srun                          SLURM_PROCID          SLURM_PROCID / SLURM_NTASKS
//   4  ompi      Open MPI's mpirun             OMPI_COMM_WORLD_RANK  OMPI_COMM_WORLD_RANK / _SIZE
//   5  pmi       MPICH/Intel MPI (Hydra), PMI  PMI_RANK              PMI_RANK / PMI_SIZE
//   6  pmix      a PMIx launcher               PMIX_RANK             PMIX_RANK / (none)
//   7  mpi       an MPI launch (BRAID_WITH_MPI) rows 4-6 without MASTER_ADDR: MPI_COMM_WORLD
//
// Detection only reads: it opens no socket and starts nothing, so braid-info and the benchmarks
// use it as the bootstrap does. docs/launchers.md has the user's view (variables per row, the
// Slurm port rule, conflicts, command lines).
//
// Choosing (BRAID_BOOTSTRAP=auto): the first present row, except that
//   - a present row that started fewer processes, at most one per node (local size 1), is an
//     outer launcher of one with more processes and a known local size (srun --ntasks-per-node=1
//     running torchrun, mpiexec's proxies started by srun): the inner one is chosen;
//   - the store is the chosen row's or, when it has none, that of the first row that agrees
//     with it (RANK/WORLD_SIZE exported from SLURM_PROCID/SLURM_NTASKS without MASTER_ADDR:
//     Slurm's store on the first node);
//   - rows 4-6 without MASTER_ADDR become row 7 in a braid built with MPI.
// Every other present row must agree with the chosen one: equal rank and equal world size, or
// be its outer launcher as above. Anything else is a conflict (kInvalidArgument naming both
// launchers' variables and values). Rows without a world size (pmix) and rows whose variables do
// not parse take no part in the comparison. A real torchrun (TORCHELASTIC_RUN_ID set) started
// this very process, so any row with at most its world size is an outer launcher of it.
// BRAID_BOOTSTRAP=<name> uses that row alone and compares nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid {

/// The variables detection reads, captured once (read once, pass down).
class LaunchEnvironment {
 public:
  /// Every variable any launcher row reads (launcherVariableNames()), from this process.
  static LaunchEnvironment fromProcess();
  /// Exactly these variables (tests, tools).
  explicit LaunchEnvironment(std::map<std::string, std::string> vars = {});

  /// The value, or nullptr when unset or empty.
  const char* get(const std::string& name) const;

 private:
  std::map<std::string, std::string> vars_;
};

/// The names fromProcess() captures.
const std::vector<std::string>& launcherVariableNames();

/// What detection takes from the parameter table (the caller reads it once).
struct LaunchSettings {
  std::string method = "auto";  ///< BRAID_BOOTSTRAP
  int64_t storePort = 0;        ///< BRAID_STORE_PORT (0 = per the row's rule)
  std::string fileStore;        ///< BRAID_FILE_STORE
  bool mpiBuild = false;        ///< braid built with BRAID_WITH_MPI

  /// From BRAID_BOOTSTRAP, BRAID_STORE_PORT, BRAID_FILE_STORE and the build.
  static LaunchSettings fromParams();
};

/// A launcher's view of this process; -1 (size: 0) where the launcher does not say.
struct LaunchIdentity {
  int rank = -1;
  int size = 0;
  int localRank = -1;
  int localSize = -1;
  int node = -1;
  /// Set by a real torchrun (TORCHELASTIC_RUN_ID): its agent started this very process.
  bool startedThisProcess = false;
};

enum class StoreKind { kNone, kFile, kTcp, kMpi };

/// Where the rendezvous store is. kTcp: rank 0 serves on host:port, the others connect.
struct StoreSpec {
  StoreKind kind = StoreKind::kNone;
  std::string directory;     ///< kFile
  std::string host;          ///< kTcp
  int port = 0;              ///< kTcp
  std::string hostVariable;  ///< kTcp: where host came from, e.g. "MASTER_ADDR"
  std::string origin;        ///< how host and port were found, for messages
  std::string context;       ///< kTcp: what a failure to reach the store is reported with
};

struct LaunchRow;

/// One row of the table.
struct LauncherDef {
  const char* name;       ///< BRAID_BOOTSTRAP value and BootstrapInfo::method
  const char* title;      ///< who sets these variables
  const char* presentIf;  ///< the variable(s) whose presence marks the row
  const char* variables;  ///< everything it reads, for braid-info and the docs
  const char* rankVar;    ///< names for messages
  const char* sizeVar;
  /// Fills row->present, identity and store.
  void (*read)(const LaunchEnvironment& env, const LaunchSettings& settings, LaunchRow* row);
};

/// The rows in recognition order.
const std::vector<LauncherDef>& launcherTable();

/// What one row found in the environment.
struct LaunchRow {
  const LauncherDef* def = nullptr;
  bool present = false;
  Status identityStatus;  ///< reading rank/size/local values (when present)
  LaunchIdentity identity;
  std::string identityText;  ///< the variables read with their values, "RANK=1, WORLD_SIZE=4"
  Status storeStatus;        ///< finding the store (when present)
  StoreSpec store;
};

/// The table evaluated against one environment, and the choice.
struct LaunchChoice {
  std::vector<LaunchRow> rows;  ///< every row, in recognition order
  int chosen = -1;              ///< index into rows; -1 when status is an error
  std::string reason;           ///< why that row (and how the others relate to it)
  Status status;                ///< ok, or no launcher / malformed / conflict

  const LaunchRow* row() const {
    return chosen >= 0 ? &rows[static_cast<size_t>(chosen)] : nullptr;
  }
  /// One line: the chosen row, rank, size, local rank/size, node, store; or the error.
  std::string summary() const;
};

/// Evaluates every row and chooses per settings.method (see the comment at the top).
LaunchChoice detectLaunch(const LaunchEnvironment& env, const LaunchSettings& settings);

/// True when a launcher says this process is one rank of a job (any row with a rank variable is
/// present: torchrun, Slurm, Open MPI, PMI, PMIx; BRAID_FILE_STORE alone is not). The benchmarks
/// start their own local ranks otherwise.
bool launchedAsRank(const LaunchChoice& choice);

/// Expands a Slurm hostlist: "a,b", "node[01-04,07]" (zero padding kept), "pre[1-3]suf",
/// "rack[1-2]-n[3-4]" (several groups: their cartesian product, the first group outermost).
/// Malformed text (an unclosed or stray bracket, an empty group or element, a non-numeric or
/// descending range) is kInvalidArgument naming `variable` and the text.
Result<std::vector<std::string>> expandSlurmHostlist(const std::string& text,
                                                     const std::string& variable);

/// Expands Slurm's tasks-per-node list ("2(x3),1" = 2, 2, 2, 1), one count per node.
Result<std::vector<int>> expandSlurmTaskCounts(const std::string& text,
                                               const std::string& variable);

/// The Slurm store port when neither BRAID_STORE_PORT nor MASTER_PORT is set:
/// 20000 + SLURM_JOB_ID % 9000, so every job step of one job agrees without talking, and the
/// port is unprivileged, below torch's default 29500 and below every ephemeral range in common
/// use (Linux 32768-60999, IANA 49152-65535) the kernel hands out for outgoing connections.
constexpr int kSlurmPortBase = 20000;
constexpr int kSlurmPortSpan = 9000;
Result<int> slurmDerivedPort(const std::string& jobIdText);

}  // namespace braid
