// The net plugin's setup half: global state, init/finalize, devices and properties,
// listen/connect/accept/close. See net.h for the model and data_path.cc for requests.
#include "plugin/net/net.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/params.h"
#include "plugin/net/comm.h"
#include "plugin/net/devices.h"
#include "plugin/plugin_log.h"

namespace braid::plugin::net {

using detail::Context;
using detail::ListenCommImpl;
using detail::RecvCommImpl;
using detail::SendCommImpl;

namespace {

/// Job secret of contexts without a commId (v9/v10): all such processes share it; the
/// listener's random nonce still ties a connection to its handle.
constexpr uint64_t kLegacySecret = 0x79636167656c4e42ull;

struct Global {
  std::mutex mu;
  int refs = 0;
  std::vector<NetDevice> devices;
  std::string transport;
  int maxRecvs = 1;
  Context* legacy = nullptr;
};

Global& global() {
  static Global g;  // destroyed when NCCL dlcloses the library (or at exit)
  return g;
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}

uint64_t timeoutNs() {
  return static_cast<uint64_t>(timeoutMsFromEnvironment()) * 1000000ull;
}

Status checkContext(void* ctx, const char* what) {
  if (ctx == nullptr || static_cast<Context*>(ctx)->magic != detail::kContextMagic) {
    return invalidArgument(std::string("net ") + what + ": not a context from init");
  }
  return Status::ok();
}

/// Reads the per-load configuration; called on the first init under the global lock.
Status configure(Global& g) {
  Result<std::vector<NetDevice>> devs = discoverNetDevices(paramString("BRAID_NET_IFNAME"));
  if (!devs.isOk()) return devs.status();
  g.devices = std::move(devs.value());
  g.transport = paramString("BRAID_NET_TRANSPORT");
  const int64_t maxRecvs = paramInt("BRAID_NET_MAX_RECVS");
  g.maxRecvs = static_cast<int>(std::clamp<int64_t>(maxRecvs, 1, kMaxGroupedRecvs));
  if (g.maxRecvs != maxRecvs) {
    BRAID_PLUGIN_WARN(abi::kSubsysNet, "BRAID_NET_MAX_RECVS=%lld is outside 1..%d; using %d",
                      static_cast<long long>(maxRecvs), kMaxGroupedRecvs, g.maxRecvs);
  }
  for (size_t i = 0; i < g.devices.size(); ++i) {
    const NetDevice& d = g.devices[i];
    BRAID_PLUGIN_INFO(abi::kSubsysNet | abi::kSubsysInit,
                      "NET/braid: device %zu %s address %s speed %d Mb/s pci %s transport %s", i,
                      d.name.c_str(), d.address.c_str(), d.speedMbps,
                      d.pciPath.empty() ? "(virtual)" : d.pciPath.c_str(), g.transport.c_str());
  }
  return Status::ok();
}

Status initLocked(Global& g, void** ctx, uint64_t secret) {
  if (g.refs == 0) BRAID_RETURN_IF_ERROR(configure(g));
  auto* c = new Context;
  c->secret = secret;
  c->transports.resize(g.devices.size());
  ++g.refs;
  *ctx = c;
  return Status::ok();
}

void finalizeLocked(Global& g, Context* c) {
  delete c;
  if (--g.refs == 0) {
    g.devices.clear();
    clearNcclLogger();
  }
}

/// Drops the v9/v10 context when the library goes away (those versions have no finalize).
struct LegacyReaper {
  ~LegacyReaper() {
    Global& g = global();
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.legacy != nullptr) finalizeLocked(g, g.legacy);
    g.legacy = nullptr;
  }
};

}  // namespace

Result<std::shared_ptr<transport::Transport>> Context::transportFor(int dev) {
  Global& g = global();
  std::string name;
  std::string address;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (dev < 0 || static_cast<size_t>(dev) >= g.devices.size()) {
      return invalidArgument("net: device " + std::to_string(dev) + " does not exist (" +
                             std::to_string(g.devices.size()) + " devices)");
    }
    name = g.transport;
    address = g.devices[static_cast<size_t>(dev)].address;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<size_t>(dev) >= transports.size())
    transports.resize(static_cast<size_t>(dev) + 1);
  std::shared_ptr<transport::Transport>& tp = transports[static_cast<size_t>(dev)];
  if (tp == nullptr) {
    transport::TransportOptions options;
    options.jobSecret = secret;
    options.tcpAddress = address;
    options.timeoutMs = timeoutMsFromEnvironment();
    Result<std::unique_ptr<transport::Transport>> made = transport::createTransport(name, options);
    if (!made.isOk()) return made.status().withContext("net: BRAID_NET_TRANSPORT");
    tp = std::move(made.value());
  }
  return tp;
}

abi::Result toNccl(const Status& status, const char* what) noexcept {
  if (status.isOk()) return abi::kSuccess;
  try {
    BRAID_PLUGIN_WARN(abi::kSubsysNet, "NET/braid %s failed: %s", what, status.toString().c_str());
  } catch (...) {
  }
  switch (status.code()) {
    case Code::kOk:
      return abi::kSuccess;
    case Code::kUnhandledCuda:
      return abi::kUnhandledCudaError;
    case Code::kSystem:
      return abi::kSystemError;
    case Code::kInternal:
      return abi::kInternalError;
    case Code::kInvalidArgument:
      return abi::kInvalidArgument;
    case Code::kInvalidUsage:
      return abi::kInvalidUsage;
    case Code::kRemote:
    case Code::kTimeout:  // a silent peer
      return abi::kRemoteError;
    case Code::kInProgress:
      return abi::kInternalError;  // never reported to NCCL (§1.6: connect/accept)
  }
  return abi::kInternalError;
}

Status init(void** ctx, uint64_t commId, bool hasCommId, abi::Logger logger) {
  if (ctx == nullptr) return invalidArgument("net init: null ctx");
  *ctx = nullptr;
  setNcclLogger(logger);
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  return initLocked(g, ctx, hasCommId ? mix64(commId) : kLegacySecret);
}

Status initLegacy(abi::Logger logger) {
  Global& g = global();
  static LegacyReaper reaper;  // constructed after g, so destroyed (at unload) before g
  (void)reaper;
  setNcclLogger(logger);
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.legacy != nullptr) return Status::ok();  // NCCL calls it once; tolerate more
  void* ctx = nullptr;
  BRAID_RETURN_IF_ERROR(initLocked(g, &ctx, kLegacySecret));
  g.legacy = static_cast<Context*>(ctx);
  return Status::ok();
}

void* legacyContext() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.legacy;
}

Status finalize(void* ctx) {
  if (ctx == nullptr) return Status::ok();  // after a failed init
  BRAID_RETURN_IF_ERROR(checkContext(ctx, "finalize"));
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  finalizeLocked(g, static_cast<Context*>(ctx));
  return Status::ok();
}

Status devices(int* ndev) {
  if (ndev == nullptr) return invalidArgument("net devices: null ndev");
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.refs == 0) return invalidUsage("net devices: called before init");
  *ndev = static_cast<int>(g.devices.size());
  return Status::ok();
}

Status getProperties(int dev, abi::NetPropertiesV12* props) {
  if (props == nullptr) return invalidArgument("net getProperties: null props");
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (dev < 0 || static_cast<size_t>(dev) >= g.devices.size()) {
    return invalidArgument("net getProperties: device " + std::to_string(dev) + " of " +
                           std::to_string(g.devices.size()));
  }
  const NetDevice& d = g.devices[static_cast<size_t>(dev)];
  std::memset(props, 0, sizeof(*props));
  // NCCL keeps these pointers; they stay valid until the last finalize (then NCCL unloads us).
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
  props->guid = d.guid;
  props->ptrSupport = abi::kPtrHost;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d.speedMbps;
  props->port = 0;
  props->latency = static_cast<float>(d.latencyUs);  // 0 (NCCL's default) unless the topology says
  props->maxComms = 65536;
  props->maxRecvs = g.maxRecvs;
  props->netDeviceType = abi::kNetDeviceHost;
  props->netDeviceVersion = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = kMaxMessageBytes;
  props->maxCollBytes = kMaxMessageBytes;
  props->maxMultiRequestSize = 1;
  props->railId = d.railId;  // -1 for now: see NetDevice::railId
  props->planeId = d.planeId;
  return Status::ok();
}

Status getPropertiesV11(int dev, abi::NetPropertiesV11* props) {
  if (props == nullptr) return invalidArgument("net getProperties: null props");
  abi::NetPropertiesV12 p;
  BRAID_RETURN_IF_ERROR(getProperties(dev, &p));
  std::memset(props, 0, sizeof(*props));
  props->name = p.name;
  props->pciPath = p.pciPath;
  props->guid = p.guid;
  props->ptrSupport = p.ptrSupport;
  props->regIsGlobal = p.regIsGlobal;
  props->forceFlush = p.forceFlush;
  props->speed = p.speed;
  props->port = p.port;
  props->latency = p.latency;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = p.netDeviceType;
  props->netDeviceVersion = p.netDeviceVersion;
  // A physical device is its own 1-device vNIC, which fits the v11 list.
  props->vProps.ndevs = std::min(p.vProps.ndevs, abi::kNetMaxDevsPerNic);
  for (int i = 0; i < props->vProps.ndevs; ++i) props->vProps.devs[i] = p.vProps.devs[i];
  props->maxP2pBytes = p.maxP2pBytes;
  props->maxCollBytes = p.maxCollBytes;
  props->maxMultiRequestSize = p.maxMultiRequestSize;
  return Status::ok();
}

Status listen(void* ctx, int dev, void* handle, void** listenComm) {
  BRAID_RETURN_IF_ERROR(checkContext(ctx, "listen"));
  if (handle == nullptr || listenComm == nullptr) {
    return invalidArgument("net listen: null handle or listenComm");
  }
  *listenComm = nullptr;
  auto* c = static_cast<Context*>(ctx);
  BRAID_ASSIGN_OR_RETURN(std::shared_ptr<transport::Transport> tp, c->transportFor(dev));
  auto lc = std::make_unique<ListenCommImpl>();
  lc->dev = dev;
  {
    Global& g = global();
    std::lock_guard<std::mutex> lock(g.mu);
    lc->maxRecvs = g.maxRecvs;
  }
  transport::Handle h;
  BRAID_RETURN_IF_ERROR(tp->listen(&h, &lc->tl));
  lc->tp = std::move(tp);
  std::memcpy(handle, h.bytes, abi::kNetHandleMaxSize);
  *listenComm = lc.release();
  return Status::ok();
}

Status connect(void* ctx, int dev, const void* handle, void** sendComm) {
  BRAID_RETURN_IF_ERROR(checkContext(ctx, "connect"));
  if (handle == nullptr || sendComm == nullptr) {
    return invalidArgument("net connect: null handle or sendComm");
  }
  *sendComm = nullptr;
  auto* c = static_cast<Context*>(ctx);
  detail::HandleKey key;
  std::memcpy(key.data(), handle, key.size());
  int maxRecvs = 1;
  {
    Global& g = global();
    std::lock_guard<std::mutex> lock(g.mu);
    maxRecvs = g.maxRecvs;
  }

  std::unique_ptr<SendCommImpl> sc;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    auto it = c->pending.find(key);
    if (it != c->pending.end()) {
      sc = std::move(it->second);
      c->pending.erase(it);
    }
  }
  if (sc == nullptr) {
    BRAID_ASSIGN_OR_RETURN(std::shared_ptr<transport::Transport> tp, c->transportFor(dev));
    transport::Handle h;
    std::memcpy(h.bytes, handle, sizeof(h.bytes));
    std::unique_ptr<transport::SendComm> tc;
    BRAID_RETURN_IF_ERROR(tp->connect(h, &tc));
    sc = std::make_unique<SendCommImpl>(std::move(tp), maxRecvs, std::move(tc));
    sc->startNs = nowNs();
  }
  // Post the hello (the transport takes it once connected), then wait for it to leave.
  if (!sc->helloPosted) {
    transport::Meta hello{{detail::kHelloMagic, detail::kProtocolVersion,
                           static_cast<uint64_t>(maxRecvs), static_cast<uint64_t>(::getpid())}};
    BRAID_RETURN_IF_ERROR(sc->tp->isend(sc->tc.get(), nullptr, 0, hello, &sc->hello));
    sc->helloPosted = sc->hello != nullptr;
  }
  bool done = false;
  if (sc->helloPosted) {
    size_t ignored = 0;
    BRAID_RETURN_IF_ERROR(sc->tp->test(sc->hello, &done, &ignored));
  }
  if (done) {
    sc->hello = nullptr;
    *sendComm = sc.release();
    return Status::ok();
  }
  if (nowNs() - sc->startNs > timeoutNs()) {
    return timeoutError("net connect: no connection within BRAID_TIMEOUT_MS=" +
                        std::to_string(timeoutNs() / 1000000) +
                        " ms (is the listening process alive and reachable?)");
  }
  std::lock_guard<std::mutex> lock(c->mu);
  c->pending[key] = std::move(sc);
  return Status::ok();
}

Status accept(void* listenComm, void** recvComm) {
  auto* lc = static_cast<ListenCommImpl*>(listenComm);
  if (lc == nullptr || lc->magic != detail::kListenMagic || recvComm == nullptr) {
    return invalidArgument("net accept: not a braid listen comm, or null recvComm");
  }
  *recvComm = nullptr;
  if (lc->accepted == nullptr) {
    BRAID_RETURN_IF_ERROR(lc->tp->accept(lc->tl.get(), &lc->accepted));
    if (lc->accepted == nullptr) return Status::ok();
    lc->acceptedNs = nowNs();
  }
  if (lc->hello == nullptr) {
    BRAID_RETURN_IF_ERROR(
        lc->tp->irecv(lc->accepted.get(), nullptr, 0, &lc->helloMeta, &lc->hello));
    if (lc->hello == nullptr) return Status::ok();
  }
  bool done = false;
  size_t bytes = 0;
  Status s = lc->tp->test(lc->hello, &done, &bytes);
  if (!s.isOk()) {
    lc->hello = nullptr;
    lc->accepted.reset();
    return s.withContext("net accept: waiting for the peer's hello");
  }
  if (!done) {
    if (nowNs() - lc->acceptedNs > timeoutNs()) {
      return timeoutError(
          "net accept: the peer connected but sent no hello within "
          "BRAID_TIMEOUT_MS");
    }
    return Status::ok();
  }
  lc->hello = nullptr;
  const transport::Meta& m = lc->helloMeta;
  if (m.words[0] != detail::kHelloMagic || bytes != 0) {
    lc->accepted.reset();
    return invalidUsage("net accept: the peer is not a braid net plugin (bad hello)");
  }
  if (m.words[1] != detail::kProtocolVersion) {
    lc->accepted.reset();
    return invalidUsage("net accept: the peer speaks plugin protocol " +
                        std::to_string(m.words[1]) + ", this library " +
                        std::to_string(detail::kProtocolVersion) + " (mixed braid versions?)");
  }
  if (m.words[2] != static_cast<uint64_t>(lc->maxRecvs)) {
    lc->accepted.reset();
    return invalidUsage("net accept: the peer (pid " + std::to_string(m.words[3]) +
                        ") has BRAID_NET_MAX_RECVS=" + std::to_string(m.words[2]) +
                        ", this process " + std::to_string(lc->maxRecvs) +
                        "; set the same value on every rank");
  }
  *recvComm = new RecvCommImpl(lc->tp, lc->maxRecvs, std::move(lc->accepted));
  return Status::ok();
}

Status closeListen(void* listenComm) {
  auto* lc = static_cast<ListenCommImpl*>(listenComm);
  if (lc == nullptr) return Status::ok();
  if (lc->magic != detail::kListenMagic)
    return invalidArgument("net closeListen: not a listen comm");
  lc->magic = 0;
  delete lc;
  return Status::ok();
}

Status closeSend(void* sendComm) {
  auto* sc = static_cast<SendCommImpl*>(sendComm);
  if (sc == nullptr) return Status::ok();
  if (sc->magic != detail::kSendMagic) return invalidArgument("net closeSend: not a send comm");
  sc->magic = 0;
  delete sc;  // requests in flight die with it (NCCL forgets them)
  return Status::ok();
}

Status closeRecv(void* recvComm) {
  auto* rc = static_cast<RecvCommImpl*>(recvComm);
  if (rc == nullptr) return Status::ok();
  if (rc->magic != detail::kRecvMagic) return invalidArgument("net closeRecv: not a recv comm");
  rc->magic = 0;
  delete rc;
  return Status::ok();
}

}  // namespace braid::plugin::net
