// Finding peers. A bootstrap yields this process's rank and the world size, a Store shared by
// all ranks of the job, and a per-job secret that every connection must present.
//
// Which launcher started the process comes from one table (launchers.h; user's view in
// docs/launchers.md), checked in this order; BRAID_BOOTSTRAP=<name> picks a row explicitly:
//
//   file      BRAID_FILE_STORE=<dir> with RANK and WORLD_SIZE: a directory as the store (tests).
//   torchrun  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK, LOCAL_WORLD_SIZE,
//             GROUP_RANK optional): torchrun, Kubeflow's PyTorchJob, braid-run, job scripts.
//             Rank 0 serves a TCP store on MASTER_ADDR:MASTER_PORT; the others connect to it.
//             Under a real torchrun (TORCHELASTIC_RUN_ID set) MASTER_PORT is torch's own c10d
//             store, so braid's store moves to MASTER_PORT + 1. A WORLD_SIZE that counts nodes
//             (Kubeflow without torchrun) is reported, not used.
//   slurm     srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID; the store on the
//             first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST (MASTER_ADDR overrides), on
//             MASTER_PORT or else port 20000 + SLURM_JOB_ID % 9000.
//   ompi      Open MPI's mpirun: OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}.
//   pmi       MPICH's or Intel MPI's mpiexec (Hydra): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID,
//             MPI_LOCALNRANKS.
//   pmix      PMIx launchers: PMIX_RANK only (no world size).
//             ompi, pmi and pmix need no MPI: the store is on MASTER_ADDR:MASTER_PORT.
//   mpi       (built with BRAID_WITH_MPI) the rows above without MASTER_ADDR: rank/size from MPI;
//             rank 0 serves a TCP store on an ephemeral port and broadcasts its address.
// BRAID_STORE_PORT=N, when set, is the store port of every TCP row. Launchers whose variables
// disagree on rank or world size are an error naming both, never a guess (launchers.h says
// exactly what counts as agreeing).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "braid/status.h"
#include "braid/store.h"
#include "core/params.h"

namespace braid {

struct BootstrapInfo {
  int rank = -1;
  int size = 0;
  int localRank = -1;  ///< from the launcher (LOCAL_RANK, SLURM_LOCALID, MPI), -1 when unsaid
  std::unique_ptr<Store> store;
  std::string method;  ///< the launcher row: "file", "torchrun", "slurm", "ompi", "pmi", "mpi"
  std::string launch;  ///< one line: the row, the store and why that row was chosen
};

/// Picks a launcher from the environment (BRAID_BOOTSTRAP=auto, or a row's name; env is
/// torchrun) and builds its store. The job secret is exchanged through that store by
/// Communicator::create, as for every other way of making a communicator.
/// timeoutMs bounds the store's own operations (see createTcpStore).
Result<BootstrapInfo> bootstrapFromEnvironment(Deadline deadline,
                                               int64_t timeoutMs = kDefaultTimeoutMs);

/// Store implementations. timeoutMs bounds the operations that take no deadline of their own
/// (set, add, the file store's lock): the owner's BRAID_TIMEOUT_MS, handed down.
Result<std::unique_ptr<Store>> createFileStore(const std::string& directory,
                                               int64_t timeoutMs = kDefaultTimeoutMs);
/// isServer: listen on host:port (port 0 = any; the bound port is returned by tcpStorePort);
/// else connect, retrying until the deadline.
Result<std::unique_ptr<Store>> createTcpStore(const std::string& host, int port, bool isServer,
                                              Deadline deadline,
                                              int64_t timeoutMs = kDefaultTimeoutMs);
/// Port a server TcpStore listens on (for port 0).
int tcpStorePort(Store* store);

/// Exchanges the job secret under `key`: rank 0 generates and publishes it, the others read it.
Result<uint64_t> exchangeJobSecret(Store* store, int rank, Deadline deadline,
                                   const std::string& key = "braid/secret");

}  // namespace braid
