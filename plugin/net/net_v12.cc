// ncclNetPlugin_v12: what NCCL 2.30.3+ binds first (ABI doc §9.1). The table is v11's, slot for
// slot; the properties are the implementation's own (railId/planeId, 8-device vProps).
#include "plugin/net/net.h"

namespace braid::plugin::net {
namespace {

abi::Result v12Init(void** ctx, uint64_t commId, abi::NetCommConfig* config, abi::Logger log,
                    abi::ProfilerCallback prof) noexcept {
  (void)config, (void)prof;  // no traffic classes; no profiler events yet
  return guard("init", [&] { return init(ctx, commId, true, log); });
}
abi::Result v12Devices(int* ndev) noexcept {
  return guard("devices", [&] { return devices(ndev); });
}
abi::Result v12GetProperties(int dev, abi::NetPropertiesV12* props) noexcept {
  return guard("getProperties", [&] { return getProperties(dev, props); });
}
abi::Result v12Listen(void* ctx, int dev, void* handle, void** listenComm) noexcept {
  return guard("listen", [&] { return listen(ctx, dev, handle, listenComm); });
}
abi::Result v12Connect(void* ctx, int dev, void* handle, void** sendComm,
                       abi::NetDeviceHandle** sendDevComm) noexcept {
  (void)sendDevComm;  // host plugin: left alone
  return guard("connect", [&] { return connect(ctx, dev, handle, sendComm); });
}
abi::Result v12Accept(void* listenComm, void** recvComm,
                      abi::NetDeviceHandle** recvDevComm) noexcept {
  (void)recvDevComm;
  return guard("accept", [&] { return accept(listenComm, recvComm); });
}
abi::Result v12RegMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return guard("regMr", [&] { return regMr(comm, data, size, type, mhandle); });
}
abi::Result v12DeregMr(void* comm, void* mhandle) noexcept {
  return guard("deregMr", [&] { return deregMr(comm, mhandle); });
}
abi::Result v12Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* pHandle,
                     void** request) noexcept {
  (void)pHandle;
  return guard("isend", [&] { return isend(sendComm, data, size, tag, mhandle, request); });
}
abi::Result v12Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** pHandles, void** request) noexcept {
  (void)pHandles;
  return guard("irecv", [&] { return irecv(recvComm, n, data, sizes, tags, mhandles, request); });
}
abi::Result v12Iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                      void** request) noexcept {
  return guard("iflush", [&] { return iflush(recvComm, n, data, sizes, mhandles, request); });
}
abi::Result v12Test(void* request, int* done, int* sizes) noexcept {
  return guard("test", [&] { return test(request, done, sizes); });
}
abi::Result v12CloseSend(void* comm) noexcept {
  return guard("closeSend", [&] { return closeSend(comm); });
}
abi::Result v12CloseRecv(void* comm) noexcept {
  return guard("closeRecv", [&] { return closeRecv(comm); });
}
abi::Result v12CloseListen(void* comm) noexcept {
  return guard("closeListen", [&] { return closeListen(comm); });
}
abi::Result v12Finalize(void* ctx) noexcept {
  return guard("finalize", [&] { return finalize(ctx); });
}

}  // namespace
}  // namespace braid::plugin::net

extern "C" __attribute__((visibility("default"))) const braid::abi::NetV12 ncclNetPlugin_v12 = {
    "braid",
    braid::plugin::net::v12Init,
    braid::plugin::net::v12Devices,
    braid::plugin::net::v12GetProperties,
    braid::plugin::net::v12Listen,
    braid::plugin::net::v12Connect,
    braid::plugin::net::v12Accept,
    braid::plugin::net::v12RegMr,
    nullptr,  // regMrDmaBuf: no DMABUF in ptrSupport
    braid::plugin::net::v12DeregMr,
    braid::plugin::net::v12Isend,
    braid::plugin::net::v12Irecv,
    braid::plugin::net::v12Iflush,
    braid::plugin::net::v12Test,
    braid::plugin::net::v12CloseSend,
    braid::plugin::net::v12CloseRecv,
    braid::plugin::net::v12CloseListen,
    nullptr,  // getDeviceMr: no device offload
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice: physical devices only
    braid::plugin::net::v12Finalize,
    nullptr,  // setNetAttr: no use for the hint yet
};
