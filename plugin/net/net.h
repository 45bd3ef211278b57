// The one implementation of braid's NCCL net plugin; net_v12.cc, net_v11.cc, net_v10.cc and
// net_v9.cc are thin adapters that export it as ncclNetPlugin_v12/_v11/_v10/_v9. The
// implementation's signatures are v11's with v12's properties (its newest superset); older
// versions get theirs from getPropertiesV11. Everything here returns Status;
// the adapters turn it into ncclResult_t (toNccl) and catch any exception at the edge.
//
// Model (ABI doc §1.6, §8.2):
//  - Global state (device list, NCCL's logger) is refcounted by the per-communicator contexts
//    made by init() and released by the last finalize(); the library keeps no thread, so
//    nothing outlives that and a dlclose/dlopen cycle starts from scratch.
//  - A context owns one transport (BRAID_NET_TRANSPORT: tcp by default, ucx when built with UCX,
//    shm for tests) per device; its job secret is derived from NCCL's commId (equal on every
//    rank of a communicator).
//  - listen() hands out the transport's own 128-byte handle (magic, version, secret, random
//    nonce, address, checksum): a malformed or foreign handle fails connect() with
//    kInvalidArgument, a connection without the listener's nonce is refused by accept().
//  - connect()/accept() never block: they return a null comm until the transport connection is
//    up and a plugin hello (magic, protocol version, maxRecvs) went through it.
//  - Requests: a ring of max(64, 32 * maxRecvs) per comm; isend/irecv return a null request
//    when it is full. Transport messages are posted in FIFO order as the transport takes them.
//  - maxRecvs = BRAID_NET_MAX_RECVS (1 by default). When > 1, every send travels as a 0-byte
//    header message {tag, size} followed by its payload, and the receiver posts the payload
//    receive into the buffer of the oldest grouped receive whose tag matches: no staging copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "braid/status.h"
#include "plugin/nccl_abi.h"

namespace braid::plugin::net {

/// Largest single message (test() reports sizes as int).
inline constexpr size_t kMaxMessageBytes = size_t{1} << 30;
/// Upper bound of BRAID_NET_MAX_RECVS.
inline constexpr int kMaxGroupedRecvs = 8;

/// hasCommId: false for v9/v10 (no commId; one process-wide context).
Status init(void** ctx, uint64_t commId, bool hasCommId, abi::Logger logger);
Status finalize(void* ctx);
Status devices(int* ndev);
Status getProperties(int dev, abi::NetPropertiesV12* props);
/// The same as v11 (and, by prefix, v10/v9) see them: no rail/plane, a 4-device vProps.
Status getPropertiesV11(int dev, abi::NetPropertiesV11* props);

Status listen(void* ctx, int dev, void* handle, void** listenComm);
Status connect(void* ctx, int dev, const void* handle, void** sendComm);
Status accept(void* listenComm, void** recvComm);
Status closeListen(void* listenComm);
Status closeSend(void* sendComm);
Status closeRecv(void* recvComm);

Status regMr(void* comm, void* data, size_t size, int type, void** mhandle);
Status deregMr(void* comm, void* mhandle);

Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
             void** mhandles, void** request);
Status iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
Status test(void* request, int* done, int* sizes);

/// Status -> ncclResult_t; non-ok results are logged once here, under NET, naming `what`.
abi::Result toNccl(const Status& status, const char* what) noexcept;

/// Runs f (returning Status) and converts its result; nothing thrown leaves (kInternalError).
template <typename F>
abi::Result guard(const char* what, F&& f) noexcept {
  try {
    return toNccl(f(), what);
  } catch (const std::exception& e) {
    return toNccl(internalError(std::string("unexpected exception: ") + e.what()), what);
  } catch (...) {
    return toNccl(internalError("unexpected exception"), what);
  }
}

/// The process-wide context the v9/v10 init creates (they have no ctx argument); released when
/// the library is unloaded. Null before that init.
void* legacyContext();
Status initLegacy(abi::Logger logger);

}  // namespace braid::plugin::net
