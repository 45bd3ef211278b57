// The listener's handshake that the network backends (tcp, ucx) share, from the handle that
// listen() writes to the hello that accept() validates. Each backend names its own magics and
// protocol version (HandshakeProtocol) and moves the bytes; the checks and their messages are
// here, so that both backends refuse the same peers in the same words.
//
//   listen()   listenAddress(): the arguments checked and the address to bind
//              (TransportOptions::tcpAddress, else the interface BRAID_SOCKET_IFNAME selects).
//              The handle starts with handleHeader(nonce) {magic, kind, version, job secret, the
//              listener's random nonce} and ends with its checksum (handle.h, writeHandle).
//   connect()  readHandle(): the handle is this backend's, of this version and intact; then
//              dial(): it belongs to this job (a stale store's otherwise), where to connect, and
//              the Hello to send first on each stream {magic, version, stream index, nstreams,
//              job secret, the handle's nonce, a random connection id}.
//   accept()   checkAccept(); each connecting peer waits as a PendingHello (at most
//              kMaxPendingHellos at once; tooManyPending() refuses the others) that the backend
//              feeds, without blocking, whatever bytes arrived. check() refuses a peer that sends
//              garbage (not the hello magic), another protocol version, the wrong job secret or
//              nonce, or no complete hello within TransportOptions::timeoutMs; the backend closes
//              it and refused() warns, naming it and the listener. What a valid hello means next
//              (tcp: one stream of a connection id) is the backend's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "braid/status.h"
#include "transport/handle.h"
#include "transport/socket.h"
#include "transport/transport.h"

namespace braid::transport {

/// What tells one backend's handshake from another's.
struct HandshakeProtocol {
  const char* name;  ///< "tcp", "ucx": starts every message
  uint32_t handleMagic;
  uint16_t handleKind;
  uint16_t version;  ///< of the handle and the hello
  uint32_t helloMagic;
};

/// First bytes on every stream of a new connection (connecting peer to listener).
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t streamIndex;  ///< tcp: which of the connection's streams; ucx: 0
  uint32_t nstreams;     ///< tcp: the connection's streams; ucx: 1
  uint32_t reserved;
  uint64_t jobSecret;
  uint64_t nonce;  ///< the listener's, from its handle
  uint64_t connectionId;
};
static_assert(sizeof(Hello) == 40, "hello layout");

/// Peers a listener lets wait for their hello at once; more are refused.
inline constexpr size_t kMaxPendingHellos = 256;

/// A connecting peer's hello as far as it has arrived, and since when the listener waits for it.
class PendingHello {
 public:
  explicit PendingHello(uint64_t startNs = 0) : startNs_(startNs) {}

  /// Where the hello's next bytes go, and how many it still lacks.
  char* rest() { return reinterpret_cast<char*>(&hello_) + received_; }
  size_t missing() const { return sizeof(Hello) - received_; }
  /// n (at most missing()) more bytes were written to rest().
  void advance(size_t n) { received_ += n; }
  /// Copies what of data the hello still lacks; returns the bytes taken.
  size_t take(const void* data, size_t n);

  bool complete() const { return received_ == sizeof(Hello); }
  const Hello& hello() const { return hello_; }

 private:
  friend class Handshake;
  uint64_t startNs_;
  size_t received_ = 0;
  Hello hello_{};
};

/// What a network backend's ListenComm shares: the address it listens on (for messages), the
/// nonce its handle carries, and whether it has accepted its one connection.
class HandshakeListenComm : public ListenComm {
 public:
  std::string address;
  uint64_t nonce = 0;
  bool accepted = false;
};

enum class HelloState {
  kIncomplete,  ///< may still arrive
  kValid,       ///< this listener's job, protocol and nonce
  kRefused,     ///< close the peer
};

/// One backend's handshake, made once per Transport from its options.
class Handshake {
 public:
  Handshake(const HandshakeProtocol& protocol, const TransportOptions& options);

  const char* name() const { return protocol_.name; }

  // listen()

  /// kInvalidArgument for null arguments; else the address to listen on.
  Result<SocketAddress> listenAddress(Handle* handle,
                                      std::unique_ptr<ListenComm>* listenComm) const;
  /// The start of the handle of a listener with this nonce.
  HandleHeader handleHeader(uint64_t nonce) const;

  // connect()

  /// Copies the backend's handle struct H out of handle; kInvalidArgument for a null sendComm, or
  /// a handle another transport or protocol version made, or a corrupted one.
  template <class H>
  Status readHandle(const Handle& handle, const std::unique_ptr<SendComm>* sendComm, H* h) const {
    if (sendComm == nullptr) {
      return invalidArgument(std::string(name()) + " connect: null sendComm");
    }
    std::memcpy(h, handle.bytes, sizeof(H));
    return checkHandleHeader(*h, protocol_.handleMagic, protocol_.handleKind, protocol_.version,
                             name());
  }
  /// Where a connecting peer goes, and what it says first.
  struct Dial {
    SocketAddress address;
    Hello hello;  ///< streamIndex 0
  };
  /// kInvalidArgument when the handle belongs to another job or holds no valid address; else the
  /// listener's address and the hello of a new connection of nstreams streams.
  Result<Dial> dial(const HandleHeader& header, const SocketAddress::Packed& address,
                    uint32_t nstreams) const;

  // accept()

  /// kInvalidArgument for null arguments, kInvalidUsage when listenComm (a HandshakeListenComm)
  /// has accepted its connection already.
  Status checkAccept(ListenComm* listenComm, const std::unique_ptr<RecvComm>* recvComm) const;
  /// True, and the peer refused with a warning, when `pending` peers already wait at listener.
  bool tooManyPending(const std::string& peer, const HandshakeListenComm& listener,
                      size_t pending) const;
  /// What p's hello says so far, at nowNs, to the listener with this nonce; *why for kRefused.
  HelloState check(const PendingHello& p, uint64_t nonce, uint64_t nowNs, std::string* why) const;
  /// The warning for a peer the listener closes: why is check()'s, or the backend's own reason.
  void refused(const std::string& peer, const HandshakeListenComm& listener,
               const std::string& why) const;

 private:
  HandshakeProtocol protocol_;
  uint64_t jobSecret_;
  std::string tcpAddress_;
  uint64_t helloTimeoutNs_;
};

}  // namespace braid::transport
