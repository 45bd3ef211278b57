// MPI bootstrap (compiled only with BRAID_WITH_MPI): rank and size come from MPI_COMM_WORLD, the
// local rank from the ranks' processor names; rank 0 serves a TCP store on an ephemeral port and
// broadcasts "host:port" (MPI_Ibcast, polled until BRAID_TIMEOUT_MS: a rank that never joins is
// a timeout, not a hang). MPI is initialized here when the application has not
// done so, and then finalized at exit, never while braid may still run.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

// Completes a non-blocking collective by polling it (MPI_Test progresses it) until the deadline:
// a rank that never enters the collective (stopped, hung before braid, or calling something
// else) becomes a timeout naming the situation instead of a wait without end. A timed-out
// request is left pending: MPI cannot cancel a collective, and the process is failing anyway.
Status completeBy(MPI_Request* request, Deadline deadline, int64_t timeoutMs, int rank,
                  const char* what, const char* waitingFor) {
  useconds_t pause = 50;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpiError(what, rc);
    if (done) return Status::ok();
    if (deadline.expired()) {
      return timeoutError("MPI bootstrap, rank " + std::to_string(rank) + ": " + what +
                          " did not complete within BRAID_TIMEOUT_MS=" + std::to_string(timeoutMs) +
                          " ms: " + waitingFor);
    }
    usleep(pause);
    pause = std::min<useconds_t>(pause * 2, 5000);
  }
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

  // Local rank and size from every rank's processor name (its host), gathered without blocking
  // (MPI_Comm_split_type has no non-blocking form): the first collective of the bootstrap, where
  // a rank that never arrives is seen.
  char name[MPI_MAX_PROCESSOR_NAME];
  std::memset(name, 0, sizeof(name));
  int nameLength = 0;
  int rc = MPI_Get_processor_name(name, &nameLength);
  if (rc != MPI_SUCCESS) return mpiError("MPI_Get_processor_name", rc);
  std::vector<char> names(static_cast<size_t>(info.size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Request request;
  rc = MPI_Iallgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME,
                      MPI_CHAR, MPI_COMM_WORLD, &request);
  if (rc != MPI_SUCCESS) return mpiError("MPI_Iallgather", rc);
  BRAID_RETURN_IF_ERROR(completeBy(&request, deadline, timeoutMs, info.rank,
                                   "MPI_Iallgather of the host names",
                                   "some rank of MPI_COMM_WORLD has not started braid's bootstrap "
                                   "(stopped, or busy before creating its communicator)"));
  int localSize = 0;
  info.localRank = 0;
  for (int r = 0; r < info.size; ++r) {
    if (std::strncmp(names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME, name,
                     MPI_MAX_PROCESSOR_NAME) != 0) {
      continue;
    }
    if (r < info.rank) ++info.localRank;
    ++localSize;
  }
  // Every rank on one host: loopback is enough. Else the interface BRAID_SOCKET_IFNAME picks.
  const bool allLocal = localSize == info.size;

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
  rc = MPI_Ibcast(address, kAddressBytes, MPI_CHAR, 0, MPI_COMM_WORLD, &request);
  if (rc != MPI_SUCCESS) return mpiError("MPI_Ibcast of the store address", rc);
  BRAID_RETURN_IF_ERROR(completeBy(
      &request, deadline, timeoutMs, info.rank, "MPI_Ibcast of the store address from rank 0",
      info.rank == 0 ? "a rank of MPI_COMM_WORLD did not take it"
                     : "rank 0 did not send it (stopped, or still starting "
                       "the store)"));
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
