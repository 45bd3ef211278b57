// MPI bootstrap (compiled only with BRAID_WITH_MPI): rank and size come from MPI_COMM_WORLD, the
// local rank from a shared-memory split; rank 0 serves a TCP store on an ephemeral port and
// broadcasts "host:port" with MPI_Bcast. MPI is initialized here when the application has not
// done so, and then finalized at exit, never while braid may still run.
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/params.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/socket.h"

namespace braid {
namespace detail {
namespace {

constexpr int kAddressBytes = 256;

void finalizeMpiAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Status mpiError(const char* what, int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  return systemError(std::string(what) + " failed: " + std::string(text, length));
}

}  // namespace

Result<BootstrapInfo> bootstrapFromMpi(Deadline deadline, int64_t timeoutMs) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return invalidUsage("MPI bootstrap: MPI was already finalized");
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return mpiError("MPI_Init_thread", rc);
    std::atexit(finalizeMpiAtExit);
  }
  BootstrapInfo info;
  info.method = "mpi";
  MPI_Comm_rank(MPI_COMM_WORLD, &info.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &info.size);
  // A launcher of another MPI (Open MPI's mpiexec with an MPICH build, or the reverse) starts
  // every process as a singleton: each would silently be rank 0 of 1.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* launched = std::getenv(var);
    if (launched != nullptr && std::atoi(launched) != info.size) {
      return invalidUsage(std::string("MPI bootstrap: the launcher started ") + launched +
                          " processes (" + var + ") but MPI_COMM_WORLD has " +
                          std::to_string(info.size) +
                          ": braid's MPI library does not match this mpiexec; use the mpiexec "
                          "of the MPI braid was built with, or torchrun-style variables");
    }
  }

  MPI_Comm local;
  int rc =
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) return mpiError("MPI_Comm_split_type", rc);
  int localSize = 0;
  MPI_Comm_rank(local, &info.localRank);
  MPI_Comm_size(local, &localSize);
  MPI_Comm_free(&local);
  // Every rank on one host: loopback is enough. Else the interface BRAID_SOCKET_IFNAME picks.
  int allLocal = localSize == info.size ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &allLocal, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

  // Rank 0 starts the server; a failure there is broadcast as an empty address so that every
  // rank fails instead of waiting.
  char address[kAddressBytes];
  std::memset(address, 0, sizeof(address));
  std::unique_ptr<Store> serverStore;
  Status serverStatus;
  if (info.rank == 0) {
    std::string host = "127.0.0.1";
    if (!allLocal) {
      Result<transport::InterfaceAddress> chosen =
          transport::selectInterface(paramString("BRAID_SOCKET_IFNAME"));
      if (chosen.isOk()) {
        host = chosen->address.hostString();
      } else {
        serverStatus = chosen.status();
      }
    }
    if (serverStatus.isOk()) {
      Result<std::unique_ptr<Store>> store = createTcpStore(host, 0, /*isServer=*/true, deadline, timeoutMs);
      if (store.isOk()) {
        serverStore = std::move(store.value());
        std::string text = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                           std::to_string(tcpStorePort(serverStore.get()));
        std::strncpy(address, text.c_str(), sizeof(address) - 1);
      } else {
        serverStatus = store.status();
      }
    }
  }
  rc = MPI_Bcast(address, kAddressBytes, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return mpiError("MPI_Bcast of the store address", rc);
  if (!serverStatus.isOk()) return serverStatus.withContext("MPI bootstrap, rank 0 store");
  if (address[0] == '\0') {
    return remoteError("MPI bootstrap: rank 0 could not start the TCP store (see its log)");
  }
  if (info.rank == 0) {
    info.store = std::move(serverStore);
    return info;
  }
  BRAID_ASSIGN_OR_RETURN(transport::SocketAddress server,
                         transport::SocketAddress::parseHostPort(address));
  Result<std::unique_ptr<Store>> store =
      createTcpStore(server.hostString(), server.port(), /*isServer=*/false, deadline,
                     timeoutMs);
  if (!store.isOk()) return store.status().withContext("MPI bootstrap");
  info.store = std::move(store.value());
  return info;
}

}  // namespace detail
}  // namespace braid
