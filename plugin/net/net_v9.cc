// ncclNetPlugin_v9: like v10 without the profiler (init(log)), without CommConfig in connect
// and without pHandle(s) in isend/irecv.
#include <cstring>

#include "plugin/net/net.h"

namespace braid::plugin::net {
namespace {

abi::Result v9Init(abi::Logger log) noexcept {
  return guard("init", [&] { return initLegacy(log); });
}
abi::Result v9Devices(int* ndev) noexcept {
  return guard("devices", [&] { return devices(ndev); });
}
abi::Result v9GetProperties(int dev, abi::NetPropertiesV9* props) noexcept {
  return guard("getProperties", [&] {
    if (props == nullptr) return invalidArgument("net getProperties: null props");
    abi::NetPropertiesV11 p11;
    BRAID_RETURN_IF_ERROR(getPropertiesV11(dev, &p11));
    std::memcpy(props, &p11, sizeof(*props));  // v9 is v11's prefix
    return Status::ok();
  });
}
abi::Result v9Listen(int dev, void* handle, void** listenComm) noexcept {
  return guard("listen", [&] { return listen(legacyContext(), dev, handle, listenComm); });
}
abi::Result v9Connect(int dev, void* handle, void** sendComm,
                      abi::NetDeviceHandle** sendDevComm) noexcept {
  (void)sendDevComm;
  return guard("connect", [&] { return connect(legacyContext(), dev, handle, sendComm); });
}
abi::Result v9Accept(void* listenComm, void** recvComm,
                     abi::NetDeviceHandle** recvDevComm) noexcept {
  (void)recvDevComm;
  return guard("accept", [&] { return accept(listenComm, recvComm); });
}
abi::Result v9RegMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return guard("regMr", [&] { return regMr(comm, data, size, type, mhandle); });
}
abi::Result v9DeregMr(void* comm, void* mhandle) noexcept {
  return guard("deregMr", [&] { return deregMr(comm, mhandle); });
}
abi::Result v9Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                    void** request) noexcept {
  return guard("isend", [&] { return isend(sendComm, data, size, tag, mhandle, request); });
}
abi::Result v9Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                    void** request) noexcept {
  return guard("irecv", [&] { return irecv(recvComm, n, data, sizes, tags, mhandles, request); });
}
abi::Result v9Iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                     void** request) noexcept {
  return guard("iflush", [&] { return iflush(recvComm, n, data, sizes, mhandles, request); });
}
abi::Result v9Test(void* request, int* done, int* sizes) noexcept {
  return guard("test", [&] { return test(request, done, sizes); });
}
abi::Result v9CloseSend(void* comm) noexcept {
  return guard("closeSend", [&] { return closeSend(comm); });
}
abi::Result v9CloseRecv(void* comm) noexcept {
  return guard("closeRecv", [&] { return closeRecv(comm); });
}
abi::Result v9CloseListen(void* comm) noexcept {
  return guard("closeListen", [&] { return closeListen(comm); });
}

}  // namespace
}  // namespace braid::plugin::net

extern "C" __attribute__((visibility("default"))) const braid::abi::NetV9 ncclNetPlugin_v9 = {
    "braid",
    braid::plugin::net::v9Init,
    braid::plugin::net::v9Devices,
    braid::plugin::net::v9GetProperties,
    braid::plugin::net::v9Listen,
    braid::plugin::net::v9Connect,
    braid::plugin::net::v9Accept,
    braid::plugin::net::v9RegMr,
    nullptr,
    braid::plugin::net::v9DeregMr,
    braid::plugin::net::v9Isend,
    braid::plugin::net::v9Irecv,
    braid::plugin::net::v9Iflush,
    braid::plugin::net::v9Test,
    braid::plugin::net::v9CloseSend,
    braid::plugin::net::v9CloseRecv,
    braid::plugin::net::v9CloseListen,
    nullptr,
    nullptr,
    nullptr,
};
