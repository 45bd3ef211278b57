// bootstrapFromEnvironment: picks torchrun-style variables, a file store or MPI (see bootstrap.h),
// validates what the launcher set, builds the Store, and exchanges the job secret through it.
#include "transport/bootstrap/bootstrap.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/params.h"
#include "transport/tcp/socket.h"

namespace braid {
namespace detail {
#ifdef BRAID_WITH_MPI
/// In mpi_bootstrap.cc, compiled only with MPI.
Result<BootstrapInfo> bootstrapFromMpi(Deadline deadline);
#endif
}  // namespace detail

namespace {

constexpr const char* kSecretKey = "braid/secret";

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

/// Parses integer variable `name`; `needs` names the method and its variables for the message.
Result<int64_t> intVariable(const char* name, int64_t min, int64_t max, const std::string& needs) {
  const char* text = env(name);
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

/// RANK, WORLD_SIZE and the optional LOCAL_RANK.
Status rankAndSize(BootstrapInfo* info, const std::string& needs) {
  BRAID_ASSIGN_OR_RETURN(int64_t size, intVariable("WORLD_SIZE", 1, 1 << 24, needs));
  BRAID_ASSIGN_OR_RETURN(
      int64_t rank,
      intVariable("RANK", 0, size - 1,
                  needs + " (RANK must be below WORLD_SIZE=" + std::to_string(size) + ")"));
  info->rank = static_cast<int>(rank);
  info->size = static_cast<int>(size);
  info->localRank = -1;
  if (env("LOCAL_RANK") != nullptr) {
    BRAID_ASSIGN_OR_RETURN(int64_t local, intVariable("LOCAL_RANK", 0, size - 1, needs));
    info->localRank = static_cast<int>(local);
  }
  return Status::ok();
}

/// The port rank 0 serves braid's store on (see BRAID_STORE_PORT). A real torchrun launch
/// (torch.distributed.run sets TORCHELASTIC_RUN_ID in every worker) keeps its own c10d store on
/// MASTER_PORT (served by the agent, or by worker 0 once it calls init_process_group), so braid
/// moves next door, to MASTER_PORT + 1; launches that only set the variables (braid-run, tests,
/// job scripts) keep MASTER_PORT itself.
Result<int> storePort(int masterPort) {
  const int64_t forced = paramInt("BRAID_STORE_PORT");
  if (forced < 0 || forced > 65535) {
    return invalidArgument("BRAID_STORE_PORT=" + std::to_string(forced) +
                           " is out of range 0..65535 (0 = automatic)");
  }
  if (forced > 0) return static_cast<int>(forced);
  if (env("TORCHELASTIC_RUN_ID") == nullptr) return masterPort;
  if (masterPort == 65535) {
    return invalidArgument(
        "MASTER_PORT=65535 under torchrun leaves no port for braid's store "
        "(MASTER_PORT + 1); set BRAID_STORE_PORT");
  }
  return masterPort + 1;
}

Result<BootstrapInfo> fromTorchrun(Deadline deadline) {
  const std::string needs =
      "the torchrun bootstrap needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
      "(LOCAL_RANK optional)";
  BootstrapInfo info;
  info.method = "torchrun";
  BRAID_RETURN_IF_ERROR(rankAndSize(&info, needs));
  const char* addr = env("MASTER_ADDR");
  if (addr == nullptr) return invalidArgument("MASTER_ADDR is not set; " + needs);
  BRAID_ASSIGN_OR_RETURN(int64_t masterPort, intVariable("MASTER_PORT", 1, 65535, needs));
  Result<transport::SocketAddress> resolved = transport::SocketAddress::resolve(addr, 0);
  if (!resolved.isOk()) {
    return invalidArgument("MASTER_ADDR='" + std::string(addr) +
                           "' cannot be resolved: " + resolved.status().message() + "; " + needs);
  }
  BRAID_ASSIGN_OR_RETURN(int port, storePort(static_cast<int>(masterPort)));
  Result<std::unique_ptr<Store>> store = createTcpStore(addr, port, info.rank == 0, deadline);
  if (!store.isOk()) {
    return store.status().withContext(
        "rank " + std::to_string(info.rank) + ": torchrun bootstrap with MASTER_ADDR=" + addr +
        " MASTER_PORT=" + std::to_string(masterPort) +
        (port != masterPort
             ? " (braid's store on port " + std::to_string(port) + ", see BRAID_STORE_PORT)"
             : std::string()));
  }
  info.store = std::move(store.value());
  return info;
}

Result<BootstrapInfo> fromFile(Deadline) {
  const std::string needs = "the file bootstrap needs BRAID_FILE_STORE, RANK and WORLD_SIZE";
  std::string dir = paramString("BRAID_FILE_STORE");
  if (dir.empty()) return invalidArgument("BRAID_FILE_STORE is not set; " + needs);
  BootstrapInfo info;
  info.method = "file";
  BRAID_RETURN_IF_ERROR(rankAndSize(&info, needs));
  Result<std::unique_ptr<Store>> store = createFileStore(dir);
  if (!store.isOk()) return store.status().withContext("BRAID_FILE_STORE=" + dir);
  info.store = std::move(store.value());
  return info;
}

bool launchedByMpiexec() {
  return env("PMI_RANK") != nullptr || env("OMPI_COMM_WORLD_RANK") != nullptr;
}

Result<BootstrapInfo> fromMpi(Deadline deadline) {
#ifdef BRAID_WITH_MPI
  return detail::bootstrapFromMpi(deadline);
#else
  (void)deadline;
  return invalidArgument(
      "BRAID_BOOTSTRAP=mpi (or an mpiexec launch) needs braid built with MPI "
      "(BRAID_WITH_MPI); set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE instead");
#endif
}

}  // namespace

Result<BootstrapInfo> bootstrapFromEnvironment(Deadline deadline) {
  std::string method = paramString("BRAID_BOOTSTRAP");
  if (method.empty() || method == "auto") {
    if (!paramString("BRAID_FILE_STORE").empty()) {
      method = "file";
    } else if (env("MASTER_ADDR") != nullptr) {
      method = "env";
    } else if (launchedByMpiexec()) {
      method = "mpi";
    } else {
      return invalidArgument(
          "no bootstrap found in the environment: launch with torchrun (MASTER_ADDR, MASTER_PORT, "
          "RANK, WORLD_SIZE), with mpiexec (braid built with MPI), or set BRAID_FILE_STORE=<dir> "
          "with RANK and WORLD_SIZE");
    }
  }
  Result<BootstrapInfo> info = invalidArgument("");
  if (method == "env" || method == "torchrun") {
    info = fromTorchrun(deadline);
  } else if (method == "file") {
    info = fromFile(deadline);
  } else if (method == "mpi") {
    info = fromMpi(deadline);
  } else {
    return invalidArgument("BRAID_BOOTSTRAP='" + method + "' is not one of auto, env, mpi, file");
  }
  if (!info.isOk()) return info.status();
  Result<uint64_t> secret = exchangeJobSecret(info->store.get(), info->rank, deadline);
  if (!secret.isOk()) {
    return secret.status().withContext("rank " + std::to_string(info->rank) + " of " +
                                       std::to_string(info->size) + " (" + info->method +
                                       " bootstrap)");
  }
  info->jobSecret = secret.value();
  return info;
}

Result<uint64_t> exchangeJobSecret(Store* store, int rank, Deadline deadline) {
  if (store == nullptr || rank < 0) return invalidArgument("exchangeJobSecret: no store or rank");
  if (rank == 0) {
    BRAID_ASSIGN_OR_RETURN(uint64_t secret, transport::secureRandom64());
    std::vector<uint8_t> bytes(sizeof(secret));
    std::memcpy(bytes.data(), &secret, sizeof(secret));
    BRAID_RETURN_IF_ERROR(store->set(kSecretKey, bytes));
    return secret;
  }
  Result<std::vector<uint8_t>> bytes = store->get(kSecretKey, deadline);
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
