// ncclNetPlugin_v10: init without ctx (called once per load, no finalize), listen/connect
// without ctx, connect with a CommConfig; properties without maxMultiRequestSize.
#include <cstring>

#include "plugin/net/net.h"

namespace braid::plugin::net {
namespace {

abi::Result v10Init(abi::Logger log, abi::ProfilerCallback prof) noexcept {
  (void)prof;
  return guard("init", [&] { return initLegacy(log); });
}
abi::Result v10Devices(int* ndev) noexcept {
  return guard("devices", [&] { return devices(ndev); });
}
abi::Result v10GetProperties(int dev, abi::NetPropertiesV10* props) noexcept {
  return guard("getProperties", [&] {
    if (props == nullptr) return invalidArgument("net getProperties: null props");
    abi::NetPropertiesV11 p11;
    BRAID_RETURN_IF_ERROR(getPropertiesV11(dev, &p11));
    std::memcpy(props, &p11, sizeof(*props));  // v10 is v11's prefix
    return Status::ok();
  });
}
abi::Result v10Listen(int dev, void* handle, void** listenComm) noexcept {
  return guard("listen", [&] { return listen(legacyContext(), dev, handle, listenComm); });
}
abi::Result v10Connect(int dev, abi::NetCommConfig* config, void* handle, void** sendComm,
                       abi::NetDeviceHandle** sendDevComm) noexcept {
  (void)config, (void)sendDevComm;
  return guard("connect", [&] { return connect(legacyContext(), dev, handle, sendComm); });
}
abi::Result v10Accept(void* listenComm, void** recvComm,
                      abi::NetDeviceHandle** recvDevComm) noexcept {
  (void)recvDevComm;
  return guard("accept", [&] { return accept(listenComm, recvComm); });
}
abi::Result v10RegMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return guard("regMr", [&] { return regMr(comm, data, size, type, mhandle); });
}
abi::Result v10DeregMr(void* comm, void* mhandle) noexcept {
  return guard("deregMr", [&] { return deregMr(comm, mhandle); });
}
abi::Result v10Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* pHandle,
                     void** request) noexcept {
  (void)pHandle;
  return guard("isend", [&] { return isend(sendComm, data, size, tag, mhandle, request); });
}
abi::Result v10Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** pHandles, void** request) noexcept {
  (void)pHandles;
  return guard("irecv", [&] { return irecv(recvComm, n, data, sizes, tags, mhandles, request); });
}
abi::Result v10Iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                      void** request) noexcept {
  return guard("iflush", [&] { return iflush(recvComm, n, data, sizes, mhandles, request); });
}
abi::Result v10Test(void* request, int* done, int* sizes) noexcept {
  return guard("test", [&] { return test(request, done, sizes); });
}
abi::Result v10CloseSend(void* comm) noexcept {
  return guard("closeSend", [&] { return closeSend(comm); });
}
abi::Result v10CloseRecv(void* comm) noexcept {
  return guard("closeRecv", [&] { return closeRecv(comm); });
}
abi::Result v10CloseListen(void* comm) noexcept {
  return guard("closeListen", [&] { return closeListen(comm); });
}

}  // namespace
}  // namespace braid::plugin::net

extern "C" __attribute__((visibility("default"))) const braid::abi::NetV10 ncclNetPlugin_v10 = {
    "braid",
    braid::plugin::net::v10Init,
    braid::plugin::net::v10Devices,
    braid::plugin::net::v10GetProperties,
    braid::plugin::net::v10Listen,
    braid::plugin::net::v10Connect,
    braid::plugin::net::v10Accept,
    braid::plugin::net::v10RegMr,
    nullptr,
    braid::plugin::net::v10DeregMr,
    braid::plugin::net::v10Isend,
    braid::plugin::net::v10Irecv,
    braid::plugin::net::v10Iflush,
    braid::plugin::net::v10Test,
    braid::plugin::net::v10CloseSend,
    braid::plugin::net::v10CloseRecv,
    braid::plugin::net::v10CloseListen,
    nullptr,
    nullptr,
    nullptr,
};
