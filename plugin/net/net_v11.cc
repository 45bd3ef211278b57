// ncclNetPlugin_v11: what NCCL 2.28/2.29 bind (and 2.30 when a library has no v12, through its
// v11 shim). The same calls as v12 but v11's properties (no rail/plane, 4-device vProps).
#include "plugin/net/net.h"

namespace braid::plugin::net {
namespace {

abi::Result v11Init(void** ctx, uint64_t commId, abi::NetCommConfig* config, abi::Logger log,
                    abi::ProfilerCallback prof) noexcept {
  (void)config, (void)prof;  // no traffic classes; no profiler events yet
  return guard("init", [&] { return init(ctx, commId, true, log); });
}
abi::Result v11Devices(int* ndev) noexcept {
  return guard("devices", [&] { return devices(ndev); });
}
abi::Result v11GetProperties(int dev, abi::NetPropertiesV11* props) noexcept {
  return guard("getProperties", [&] { return getPropertiesV11(dev, props); });
}
abi::Result v11Listen(void* ctx, int dev, void* handle, void** listenComm) noexcept {
  return guard("listen", [&] { return listen(ctx, dev, handle, listenComm); });
}
abi::Result v11Connect(void* ctx, int dev, void* handle, void** sendComm,
                       abi::NetDeviceHandle** sendDevComm) noexcept {
  (void)sendDevComm;  // host plugin: left alone
  return guard("connect", [&] { return connect(ctx, dev, handle, sendComm); });
}
abi::Result v11Accept(void* listenComm, void** recvComm,
                      abi::NetDeviceHandle** recvDevComm) noexcept {
  (void)recvDevComm;
  return guard("accept", [&] { return accept(listenComm, recvComm); });
}
abi::Result v11RegMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return guard("regMr", [&] { return regMr(comm, data, size, type, mhandle); });
}
abi::Result v11DeregMr(void* comm, void* mhandle) noexcept {
  return guard("deregMr", [&] { return deregMr(comm, mhandle); });
}
abi::Result v11Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* pHandle,
                     void** request) noexcept {
  (void)pHandle;
  return guard("isend", [&] { return isend(sendComm, data, size, tag, mhandle, request); });
}
abi::Result v11Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** pHandles, void** request) noexcept {
  (void)pHandles;
  return guard("irecv", [&] { return irecv(recvComm, n, data, sizes, tags, mhandles, request); });
}
abi::Result v11Iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                      void** request) noexcept {
  return guard("iflush", [&] { return iflush(recvComm, n, data, sizes, mhandles, request); });
}
abi::Result v11Test(void* request, int* done, int* sizes) noexcept {
  return guard("test", [&] { return test(request, done, sizes); });
}
abi::Result v11CloseSend(void* comm) noexcept {
  return guard("closeSend", [&] { return closeSend(comm); });
}
abi::Result v11CloseRecv(void* comm) noexcept {
  return guard("closeRecv", [&] { return closeRecv(comm); });
}
abi::Result v11CloseListen(void* comm) noexcept {
  return guard("closeListen", [&] { return closeListen(comm); });
}
abi::Result v11Finalize(void* ctx) noexcept {
  return guard("finalize", [&] { return finalize(ctx); });
}

}  // namespace
}  // namespace braid::plugin::net

extern "C" __attribute__((visibility("default"))) const braid::abi::NetV11 ncclNetPlugin_v11 = {
    "braid",
    braid::plugin::net::v11Init,
    braid::plugin::net::v11Devices,
    braid::plugin::net::v11GetProperties,
    braid::plugin::net::v11Listen,
    braid::plugin::net::v11Connect,
    braid::plugin::net::v11Accept,
    braid::plugin::net::v11RegMr,
    nullptr,  // regMrDmaBuf: no DMABUF in ptrSupport
    braid::plugin::net::v11DeregMr,
    braid::plugin::net::v11Isend,
    braid::plugin::net::v11Irecv,
    braid::plugin::net::v11Iflush,
    braid::plugin::net::v11Test,
    braid::plugin::net::v11CloseSend,
    braid::plugin::net::v11CloseRecv,
    braid::plugin::net::v11CloseListen,
    nullptr,  // getDeviceMr: no device offload
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice: physical devices only
    braid::plugin::net::v11Finalize,
    nullptr,  // setNetAttr: no use for the hint yet
};
