// bootstrapFromEnvironment: the launcher table (launchers.h) says which launcher started this
// process and where the store is; this builds the Store (file, TCP, or through MPI) and exchanges
// the job secret through it.
#include "transport/bootstrap/bootstrap.h"

#include <cstring>
#include <string>

#include "core/log.h"
#include "transport/bootstrap/launchers.h"
#include "transport/socket.h"

namespace braid {
namespace detail {
#ifdef BRAID_WITH_MPI
/// In mpi_bootstrap.cc, compiled only with MPI.
Result<BootstrapInfo> bootstrapFromMpi(Deadline deadline, int64_t timeoutMs);
#endif
}  // namespace detail

namespace {


/// Rank 0 serves a TCP store on the row's host:port; the others connect to it.
Result<std::unique_ptr<Store>> tcpStoreFor(const LaunchRow& row, Deadline deadline,
                                           int64_t timeoutMs) {
  const StoreSpec& spec = row.store;
  const int rank = row.identity.rank;
  const std::string method = row.def->name;
  Result<transport::SocketAddress> resolved = transport::SocketAddress::resolve(spec.host, 0);
  if (!resolved.isOk()) {
    const std::string what = spec.hostVariable == "MASTER_ADDR"
                                 ? "MASTER_ADDR='" + spec.host + "'"
                                 : spec.hostVariable + " ('" + spec.host + "')";
    const std::string needs =
        method == "torchrun"
            ? "the torchrun bootstrap needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
              "(LOCAL_RANK optional)"
            : "the " + method +
                  " bootstrap serves its store there; set MASTER_ADDR to rank 0's host";
    return invalidArgument(what + " cannot be resolved: " + resolved.status().message() + "; " +
                           needs);
  }
  Result<std::unique_ptr<Store>> store = createTcpStore(spec.host, spec.port, rank == 0, deadline, timeoutMs);
  if (store.isOk()) return store;
  return store.status().withContext("rank " + std::to_string(rank) + ": " + spec.context);
}

Result<BootstrapInfo> fromMpi(Deadline deadline, int64_t timeoutMs) {
#ifdef BRAID_WITH_MPI
  return detail::bootstrapFromMpi(deadline, timeoutMs);
#else
  (void)deadline;
  return invalidArgument(
      "BRAID_BOOTSTRAP=mpi (or an mpiexec launch) needs braid built with MPI "
      "(BRAID_WITH_MPI); set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE instead");
#endif
}

}  // namespace

Result<BootstrapInfo> bootstrapFromEnvironment(Deadline deadline, int64_t timeoutMs) {
  const LaunchChoice launch =
      detectLaunch(LaunchEnvironment::fromProcess(), LaunchSettings::fromParams());
  if (!launch.status.isOk()) return launch.status;
  const LaunchRow& row = *launch.row();
  BootstrapInfo info;
  if (row.store.kind == StoreKind::kMpi) {
    Result<BootstrapInfo> mpi = fromMpi(deadline, timeoutMs);
    if (!mpi.isOk()) return mpi.status();
    info = std::move(mpi.value());
  } else {
    info.rank = row.identity.rank;
    info.size = row.identity.size;
    info.localRank = row.identity.localRank;
    info.method = row.def->name;
    if (row.store.kind == StoreKind::kFile) {
      Result<std::unique_ptr<Store>> store = createFileStore(row.store.directory, timeoutMs);
      if (!store.isOk()) {
        return store.status().withContext("BRAID_FILE_STORE=" + row.store.directory);
      }
      info.store = std::move(store.value());
    } else {
      BRAID_ASSIGN_OR_RETURN(info.store, tcpStoreFor(row, deadline, timeoutMs));
    }
  }
  info.launch = launch.summary() + "; " + launch.reason;
  BRAID_INFO("bootstrap: rank %d of %d, %s", info.rank, info.size, info.launch.c_str());
  return info;
}

Result<uint64_t> exchangeJobSecret(Store* store, int rank, Deadline deadline,
                                   const std::string& key) {
  if (store == nullptr || rank < 0) return invalidArgument("exchangeJobSecret: no store or rank");
  if (rank == 0) {
    BRAID_ASSIGN_OR_RETURN(uint64_t secret, transport::secureRandom64());
    std::vector<uint8_t> bytes(sizeof(secret));
    std::memcpy(bytes.data(), &secret, sizeof(secret));
    BRAID_RETURN_IF_ERROR(store->set(key, bytes));
    return secret;
  }
  Result<std::vector<uint8_t>> bytes = store->get(key, deadline);
  if (!bytes.isOk()) {
    return bytes.status().withContext("waiting for rank 0 to publish the job secret");
  }
  uint64_t secret = 0;
  if (bytes->size() != sizeof(secret)) {
    return internalError("the job secret in the store has " + std::to_string(bytes->size()) +
                         " bytes, not 8 (is the store shared with another program?)");
  }
  std::memcpy(&secret, bytes->data(), sizeof(secret));
  return secret;
}

}  // namespace braid
