// The C API: a thin, noexcept layer over Communicator. Status codes map one-to-one.
#include "braid/braid.h"

#include <sys/random.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "braid/comm.hpp"
#include "collectives/c_api_internal.h"
#include "core/params.h"
#include "transport/bootstrap/bootstrap.h"

namespace {

using braid::capi::badArg;
using braid::capi::guarded;
using braid::capi::toOp;
using braid::capi::toResult;
using braid::capi::toType;

using braid::DataType;
using braid::ReduceOp;

constexpr uint32_t kIdMagic = 0x62726964;  // "brid"

struct IdLayout {
  uint32_t magic;
  uint16_t port;
  uint16_t reserved;
  uint64_t secret;
  char host[64];
};
static_assert(sizeof(IdLayout) <= BRAID_UNIQUE_ID_BYTES, "unique id layout fits");

// Stores served by braidGetUniqueId live as long as the process.
std::mutex gServedMu;
std::vector<std::shared_ptr<braid::Store>>* gServed = new std::vector<std::shared_ptr<braid::Store>>();

#define BRAID_C_CHECK_COMM(comm) \
  if ((comm) == nullptr || !(comm)->comm) return badArg("communicator is null")

}  // namespace

extern "C" {

braidResult_t braidGetVersion(int* version) {
  if (version == nullptr) return badArg("version is null");
  *version = BRAID_VERSION_CODE;
  return braidSuccess;
}

const char* braidGetErrorString(braidResult_t result) {
  return braid::codeName(static_cast<braid::Code>(result));
}

const char* braidGetLastError(braidComm_t) { return braid::capi::lastError().c_str(); }

braidResult_t braidGetUniqueId(braidUniqueId* uniqueId) {
  if (uniqueId == nullptr) return badArg("uniqueId is null");
  return guarded([&]() -> braidResult_t {
    std::string host = "127.0.0.1";
    auto store = braid::createTcpStore(host, 0, true, braid::Deadline::afterMs(10000));
    if (!store.isOk()) return toResult(store.status());
    IdLayout id{};
    id.magic = kIdMagic;
    id.port = static_cast<uint16_t>(braid::tcpStorePort(store->get()));
    if (getrandom(&id.secret, sizeof(id.secret), 0) != sizeof(id.secret)) {
      return toResult(braid::systemError("getrandom failed"));
    }
    snprintf(id.host, sizeof(id.host), "%s", host.c_str());
    std::memset(uniqueId, 0, sizeof(*uniqueId));
    std::memcpy(uniqueId->internal, &id, sizeof(id));
    std::lock_guard<std::mutex> lock(gServedMu);
    gServed->push_back(std::shared_ptr<braid::Store>(std::move(store).value()));
    return braidSuccess;
  });
}

braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId commId, int rank) {
  if (comm == nullptr) return badArg("comm is null");
  *comm = nullptr;
  IdLayout id;
  std::memcpy(&id, commId.internal, sizeof(id));
  if (id.magic != kIdMagic || id.port == 0) return badArg("unique id is malformed (not from braidGetUniqueId?)");
  id.host[sizeof(id.host) - 1] = '\0';
  return guarded([&]() -> braidResult_t {
    const int64_t timeoutMs = braid::timeoutMsFromEnvironment();
    auto store = braid::createTcpStore(id.host, id.port, false,
                                       braid::Deadline::afterMs(timeoutMs), timeoutMs);
    if (!store.isOk()) return toResult(store.status());
    braid::CommOptions options;
    options.rank = rank;
    options.size = nranks;
    options.store = std::shared_ptr<braid::Store>(std::move(store).value());
    options.jobSecret = id.secret;
    options.timeoutMs = timeoutMs;
    auto c = braid::Communicator::create(std::move(options));
    if (!c.isOk()) return toResult(c.status());
    *comm = new braidComm{std::move(c).value()};
    return braidSuccess;
  });
}

braidResult_t braidCommInitFromEnv(braidComm_t* comm) {
  if (comm == nullptr) return badArg("comm is null");
  *comm = nullptr;
  return guarded([&]() -> braidResult_t {
    auto c = braid::Communicator::createFromEnvironment();
    if (!c.isOk()) return toResult(c.status());
    *comm = new braidComm{std::move(c).value()};
    return braidSuccess;
  });
}

braidResult_t braidCommSplit(braidComm_t comm, int color, int key, braidComm_t* newcomm) {
  BRAID_C_CHECK_COMM(comm);
  if (newcomm == nullptr) return badArg("newcomm is null");
  *newcomm = nullptr;
  return guarded([&]() -> braidResult_t {
    auto c = comm->comm->split(color, key);
    if (!c.isOk()) return toResult(c.status());
    if (*c != nullptr) *newcomm = new braidComm{std::move(c).value()};
    return braidSuccess;
  });
}

braidResult_t braidCommShrink(braidComm_t comm, int* excludeRanksList, int excludeRanksCount,
                              braidComm_t* newcomm, int shrinkFlags) {
  BRAID_C_CHECK_COMM(comm);
  if (newcomm == nullptr) return badArg("newcomm is null");
  *newcomm = nullptr;
  if (excludeRanksCount < 0) return badArg("excludeRanksCount is negative");
  if (excludeRanksCount > 0 && excludeRanksList == nullptr)
    return badArg("excludeRanksList is null");
  if (shrinkFlags != BRAID_SHRINK_DEFAULT && shrinkFlags != BRAID_SHRINK_ABORT) {
    return badArg("shrinkFlags is neither BRAID_SHRINK_DEFAULT nor BRAID_SHRINK_ABORT");
  }
  return guarded([&]() -> braidResult_t {
    std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
    auto c = comm->comm->shrink(excluded, shrinkFlags == BRAID_SHRINK_ABORT
                                              ? braid::ShrinkMode::kAbort
                                              : braid::ShrinkMode::kDefault);
    if (!c.isOk()) return toResult(c.status());
    if (*c != nullptr) *newcomm = new braidComm{std::move(c).value()};
    return braidSuccess;
  });
}

braidResult_t braidCommSubgroup(braidComm_t comm, const int* ranks, int nranks,
                                braidComm_t* newcomm) {
  BRAID_C_CHECK_COMM(comm);
  if (newcomm == nullptr) return badArg("newcomm is null");
  *newcomm = nullptr;
  if (nranks < 1) return badArg("nranks must be >= 1");
  if (ranks == nullptr) return badArg("ranks is null");
  return guarded([&]() -> braidResult_t {
    auto c = comm->comm->subgroup(std::vector<int>(ranks, ranks + nranks));
    if (!c.isOk()) return toResult(c.status());
    *newcomm = new braidComm{std::move(c).value()};
    return braidSuccess;
  });
}

braidResult_t braidCommDestroy(braidComm_t comm) {
  if (comm == nullptr) return braidSuccess;
  return guarded([&]() -> braidResult_t {
    delete comm;
    return braidSuccess;
  });
}

braidResult_t braidCommAbort(braidComm_t comm) {
  if (comm == nullptr) return braidSuccess;
  return guarded([&]() -> braidResult_t {
    if (comm->comm) comm->comm->abort("braidCommAbort");
    delete comm;
    return braidSuccess;
  });
}

braidResult_t braidCommGetAsyncError(braidComm_t comm, braidResult_t* asyncError) {
  BRAID_C_CHECK_COMM(comm);
  if (asyncError == nullptr) return badArg("asyncError is null");
  *asyncError = toResult(comm->comm->health());
  return braidSuccess;
}

braidResult_t braidCommCount(const braidComm_t comm, int* count) {
  BRAID_C_CHECK_COMM(comm);
  if (count == nullptr) return badArg("count is null");
  *count = comm->comm->size();
  return braidSuccess;
}

braidResult_t braidCommUserRank(const braidComm_t comm, int* rank) {
  BRAID_C_CHECK_COMM(comm);
  if (rank == nullptr) return badArg("rank is null");
  *rank = comm->comm->rank();
  return braidSuccess;
}

#define BRAID_C_CALL(comm, expr)                                              \
  BRAID_C_CHECK_COMM(comm);                                                   \
  return guarded([&]() -> braidResult_t { return toResult(comm->comm->expr); })

braidResult_t braidAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, braidRedOp_t op, braidComm_t comm) {
  BRAID_C_CALL(comm, allReduce(sendbuff, recvbuff, count, toType(datatype),
                               toOp(op)));
}

braidResult_t braidReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 braidDataType_t datatype, braidRedOp_t op, braidComm_t comm) {
  BRAID_C_CALL(comm, reduceScatter(sendbuff, recvbuff, recvcount, toType(datatype),
                                   toOp(op)));
}

braidResult_t braidAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             braidDataType_t datatype, braidComm_t comm) {
  BRAID_C_CALL(comm, allGather(sendbuff, recvbuff, sendcount, toType(datatype)));
}

braidResult_t braidBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, int root, braidComm_t comm) {
  BRAID_C_CALL(comm, broadcast(sendbuff, recvbuff, count, toType(datatype), root));
}

braidResult_t braidReduce(const void* sendbuff, void* recvbuff, size_t count,
                          braidDataType_t datatype, braidRedOp_t op, int root, braidComm_t comm) {
  BRAID_C_CALL(comm, reduce(sendbuff, recvbuff, count, toType(datatype),
                            toOp(op), root));
}

braidResult_t braidAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            braidDataType_t datatype, braidComm_t comm) {
  BRAID_C_CALL(comm, allToAll(sendbuff, recvbuff, count, toType(datatype)));
}

braidResult_t braidBarrier(braidComm_t comm) { BRAID_C_CALL(comm, barrier()); }

braidResult_t braidCommAllocShared(braidComm_t comm, size_t size, void** ptr) {
  BRAID_C_CHECK_COMM(comm);
  if (ptr == nullptr) return badArg("ptr is null");
  *ptr = nullptr;
  return guarded([&]() -> braidResult_t {
    braid::Result<void*> p = comm->comm->allocShared(size);
    if (!p.isOk()) return toResult(p.status());
    *ptr = *p;
    return braidSuccess;
  });
}

braidResult_t braidCommFreeShared(braidComm_t comm, void* ptr) {
  BRAID_C_CALL(comm, freeShared(ptr));
}

braidResult_t braidCommSharedQuery(braidComm_t comm, const void* window, int rank, void** ptr,
                                   size_t* size) {
  BRAID_C_CHECK_COMM(comm);
  if (ptr == nullptr || size == nullptr) return badArg("ptr or size is null");
  *ptr = nullptr;
  *size = 0;
  return guarded([&]() -> braidResult_t {
    braid::Result<braid::SharedPart> p = comm->comm->sharedPart(window, rank);
    if (!p.isOk()) return toResult(p.status());
    *ptr = p->ptr;
    *size = p->bytes;
    return braidSuccess;
  });
}

braidResult_t braidSend(const void* sendbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm) {
  BRAID_C_CALL(comm, send(sendbuff, count, toType(datatype), peer));
}

braidResult_t braidRecv(void* recvbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm) {
  BRAID_C_CALL(comm, recv(recvbuff, count, toType(datatype), peer));
}

braidResult_t braidSendRecvGroup(const braidP2pOp_t* ops, size_t nops, braidComm_t comm) {
  BRAID_C_CHECK_COMM(comm);
  if (ops == nullptr && nops > 0) return badArg("ops is null");
  return guarded([&]() -> braidResult_t {
    std::vector<braid::P2pOp> group(nops);
    for (size_t i = 0; i < nops; ++i) {
      group[i] = {ops[i].isSend != 0, ops[i].buff, ops[i].count, toType(ops[i].datatype),
                  ops[i].peer};
    }
    return toResult(comm->comm->sendRecvGroup(std::move(group)));
  });
}

}  // extern "C"
