// Finding peers. A bootstrap yields this process's rank and the world size, a Store shared by
// all ranks of the job, and a per-job secret that every connection must present.
//
//   torchrun style: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE (LOCAL_RANK optional). Rank 0
//                   serves a TCP store on MASTER_ADDR:MASTER_PORT; the others connect to it.
//                   Under a real torchrun (TORCHELASTIC_RUN_ID set) MASTER_PORT is torch's own
//                   c10d store, so braid's store moves to MASTER_PORT + 1; BRAID_STORE_PORT=N
//                   picks the port explicitly.
//   MPI:            (built with BRAID_WITH_MPI) under mpiexec: rank/size from MPI; rank 0 serves a
//                   TCP store on an ephemeral port and broadcasts its address with MPI_Bcast.
//   file:           BRAID_FILE_STORE=<dir> with RANK and WORLD_SIZE: a directory as the store
//                   (tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "braid/status.h"
#include "core/store.h"

namespace braid {

struct BootstrapInfo {
  int rank = -1;
  int size = 0;
  int localRank = -1;  ///< from LOCAL_RANK / MPI, -1 when the launcher did not say
  std::unique_ptr<Store> store;
  uint64_t jobSecret = 0;
  std::string method;  ///< "torchrun", "mpi" or "file"
};

/// Picks a method from the environment: BRAID_BOOTSTRAP=auto|env|mpi|file (auto: file if
/// BRAID_FILE_STORE is set, env if MASTER_ADDR is set, mpi if launched by mpiexec and built with
/// MPI). The secret is made by rank 0 and distributed through the store.
Result<BootstrapInfo> bootstrapFromEnvironment(Deadline deadline);

/// Store implementations.
Result<std::unique_ptr<Store>> createFileStore(const std::string& directory);
/// isServer: listen on host:port (port 0 = any; the bound port is returned by tcpStorePort);
/// else connect, retrying until the deadline.
Result<std::unique_ptr<Store>> createTcpStore(const std::string& host, int port, bool isServer,
                                              Deadline deadline);
/// Port a server TcpStore listens on (for port 0).
int tcpStorePort(Store* store);

/// Exchanges the job secret: rank 0 generates and publishes it, the others read it.
Result<uint64_t> exchangeJobSecret(Store* store, int rank, Deadline deadline);

}  // namespace braid
