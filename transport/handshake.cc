#include "transport/handshake.h"

#include <algorithm>

#include "core/log.h"
#include "core/params.h"

namespace braid::transport {

size_t PendingHello::take(const void* data, size_t n) {
  const size_t taken = std::min(n, missing());
  std::memcpy(rest(), data, taken);
  advance(taken);
  return taken;
}

Handshake::Handshake(const HandshakeProtocol& protocol, const TransportOptions& options)
    : protocol_(protocol), jobSecret_(options.jobSecret), tcpAddress_(options.tcpAddress) {
  const int64_t timeoutMs = options.timeoutMs > 0 ? options.timeoutMs : kDefaultTimeoutMs;
  helloTimeoutNs_ = static_cast<uint64_t>(timeoutMs) * 1000000ull;
}

Result<SocketAddress> Handshake::listenAddress(Handle* handle,
                                               std::unique_ptr<ListenComm>* listenComm) const {
  if (handle == nullptr || listenComm == nullptr) {
    return invalidArgument(std::string(name()) + " listen: null handle or listenComm");
  }
  return transport::listenAddress(tcpAddress_, paramString("BRAID_SOCKET_IFNAME"), name());
}

HandleHeader Handshake::handleHeader(uint64_t nonce) const {
  HandleHeader h;
  std::memset(&h, 0, sizeof(h));
  h.magic = protocol_.handleMagic;
  h.kind = protocol_.handleKind;
  h.version = protocol_.version;
  h.jobSecret = jobSecret_;
  h.nonce = nonce;
  return h;
}

Result<Handshake::Dial> Handshake::dial(const HandleHeader& header,
                                        const SocketAddress::Packed& address,
                                        uint32_t nstreams) const {
  const std::string who = std::string(name()) + " connect";
  if (header.jobSecret != jobSecret_) {
    return invalidArgument(who +
                           ": the handle belongs to another job (job secret differs);"
                           " was it read from a stale store?");
  }
  Result<SocketAddress> listener = SocketAddress::unpack(address);
  if (!listener.isOk()) return listener.status().withContext(who + ": bad handle address");
  BRAID_ASSIGN_OR_RETURN(uint64_t connectionId, secureRandom64());
  Dial d;
  d.address = listener.value();
  std::memset(&d.hello, 0, sizeof(d.hello));
  d.hello.magic = protocol_.helloMagic;
  d.hello.version = protocol_.version;
  d.hello.nstreams = nstreams;
  d.hello.jobSecret = jobSecret_;
  d.hello.nonce = header.nonce;
  d.hello.connectionId = connectionId;
  return d;
}

Status Handshake::checkAccept(ListenComm* listenComm,
                              const std::unique_ptr<RecvComm>* recvComm) const {
  if (listenComm == nullptr || recvComm == nullptr) {
    return invalidArgument(std::string(name()) + " accept: null listenComm or recvComm");
  }
  const auto* lc = static_cast<const HandshakeListenComm*>(listenComm);
  if (lc->accepted) {
    return invalidUsage(std::string(name()) + " accept: this listen comm (" + lc->address +
                        ") already accepted its connection; listen() again for another peer");
  }
  return Status::ok();
}

bool Handshake::tooManyPending(const std::string& peer, const HandshakeListenComm& listener,
                               size_t pending) const {
  if (pending < kMaxPendingHellos) return false;
  refused(peer, listener, std::to_string(pending) + " connections already pending");
  return true;
}

HelloState Handshake::check(const PendingHello& p, uint64_t nonce, uint64_t nowNs,
                            std::string* why) const {
  const Hello& h = p.hello_;
  if (p.received_ >= sizeof(h.magic) && h.magic != protocol_.helloMagic) {
    *why = std::string("sent garbage instead of a braid ") + name() + " hello (not a braid peer?)";
    return HelloState::kRefused;
  }
  if (!p.complete()) {
    if (nowNs - p.startNs_ > helloTimeoutNs_) {
      *why = "sent no complete hello within " + std::to_string(helloTimeoutNs_ / 1000000) + " ms";
      return HelloState::kRefused;
    }
    return HelloState::kIncomplete;
  }
  if (h.version != protocol_.version) {
    *why = "speaks protocol version " + std::to_string(h.version) + ", not " +
           std::to_string(protocol_.version);
    return HelloState::kRefused;
  }
  if (h.jobSecret != jobSecret_) {
    *why = "wrong job secret (a process of another job?)";
    return HelloState::kRefused;
  }
  if (h.nonce != nonce) {
    *why = "wrong nonce (it used a handle of another listener, or a stale one)";
    return HelloState::kRefused;
  }
  return HelloState::kValid;
}

void Handshake::refused(const std::string& peer, const HandshakeListenComm& listener,
                        const std::string& why) const {
  BRAID_WARN("%s: refused connection from %s to %s: %s", name(), peer.c_str(),
             listener.address.c_str(), why.c_str());
}

}  // namespace braid::transport
