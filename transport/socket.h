// Small socket utilities shared by the tcp backend and the TCP store: an owning file descriptor,
// IPv4/IPv6 addresses, interface selection (BRAID_SOCKET_IFNAME), and deadline-bounded
// read/write/connect helpers for setup code. The data path of the tcp backend does its own
// non-blocking I/O and uses only Fd, SocketAddress and the option setters from here.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"
#include "core/clock.h"

namespace braid::transport {

/// Owns a file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// An IPv4 or IPv6 socket address (with port).
class SocketAddress {
 public:
  SocketAddress();

  /// Parses a numeric IPv4 or IPv6 address ("10.0.0.1", "::1", "[::1]"), no name lookup.
  static Result<SocketAddress> parseNumeric(const std::string& host, int port);
  /// Like parseNumeric, then falls back to a name lookup (getaddrinfo; IPv4 preferred).
  static Result<SocketAddress> resolve(const std::string& host, int port);
  /// "host:port" or "[v6host]:port".
  static Result<SocketAddress> parseHostPort(const std::string& hostPort);
  static SocketAddress fromSockaddr(const sockaddr* addr, socklen_t length);
  /// The unspecified address of a family (0.0.0.0 or ::).
  static SocketAddress any(int family, int port);
  static SocketAddress loopback(int family, int port);

  int family() const { return storage_.ss_family; }
  int port() const;
  void setPort(int port);
  bool isLoopback() const;
  bool isAny() const;

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  sockaddr* mutableGet() { return reinterpret_cast<sockaddr*>(&storage_); }
  socklen_t length() const { return length_; }

  /// "1.2.3.4" or "fe80::1" (no port, no brackets).
  std::string hostString() const;
  /// "1.2.3.4:5" or "[::1]:5"; "<unknown>" for an empty address.
  std::string toString() const;

  /// Compact, position-independent form for handles: family, port, 16 address bytes, scope id.
  struct Packed {
    uint16_t family;  ///< 4 or 6 (not AF_*: the value must mean the same on every host)
    uint16_t port;    ///< host byte order
    uint32_t scopeId;
    uint8_t addr[16];
  };
  Packed pack() const;
  static Result<SocketAddress> unpack(const Packed& packed);

 private:
  sockaddr_storage storage_;
  socklen_t length_ = 0;
};

/// One address of a network interface.
struct InterfaceAddress {
  std::string name;
  SocketAddress address;
  bool loopback = false;  ///< IFF_LOOPBACK
};

/// Whether interface `name` is selected by `spec` (NCCL_SOCKET_IFNAME semantics): a
/// comma-separated list of name prefixes; a leading '^' turns the list into exclusions; a leading
/// '=' (after any '^') demands exact names. An empty spec selects every interface.
bool interfaceMatches(const std::string& name, const std::string& spec);

/// Interfaces that are up and carry an IPv4 or (non-link-local) IPv6 address, in getifaddrs
/// order, IPv4 addresses of an interface before its IPv6 ones.
std::vector<InterfaceAddress> listInterfaces();

/// The address to listen on: with a non-empty spec, the first interface it selects (an error
/// naming the spec and the interfaces present when none matches); without one, the first
/// non-loopback interface that is up, else 127.0.0.1.
Result<InterfaceAddress> selectInterface(const std::string& spec);

/// Where a listener binds (port 0): `numeric` (an explicit address such as
/// TransportOptions::tcpAddress) when set, else selectInterface(spec). `who` prefixes errors.
Result<SocketAddress> listenAddress(const std::string& numeric, const std::string& spec,
                                    const char* who);

/// Creates a socket of `family` with SOCK_CLOEXEC (and SOCK_NONBLOCK when nonBlocking).
Result<Fd> createSocket(int family, bool nonBlocking);
Status setNonBlocking(int fd);
/// TCP_NODELAY on.
Status setNoDelay(int fd);
/// SO_SNDBUF and SO_RCVBUF to `bytes` (the kernel caps them at wmem_max/rmem_max; best effort).
void setBufferSizes(int fd, int bytes);

struct ListenOptions {
  int backlog = 128;
  bool nonBlocking = true;
  bool reuseAddress = false;  ///< SO_REUSEADDR (servers on a well-known port)
  int bufferBytes = 0;        ///< > 0: setBufferSizes before listen (accepted sockets inherit it)
};

/// Binds and listens; *bound (may be null) receives the bound address, with the port the kernel
/// chose for port 0.
Result<Fd> listenOn(const SocketAddress& address, const ListenOptions& options,
                    SocketAddress* bound);

/// Connects a blocking-mode-agnostic socket within the deadline (poll on a non-blocking connect);
/// the returned socket is non-blocking.
Result<Fd> connectTo(const SocketAddress& address, Deadline deadline);

SocketAddress localAddress(int fd);
SocketAddress peerAddress(int fd);

/// Writes/reads exactly size bytes on a non-blocking socket, polling until the deadline.
/// EOF and connection resets give kRemote naming `peer`; the deadline gives kTimeout.
Status writeAll(int fd, const void* data, size_t size, Deadline deadline, const std::string& peer);
Status readAll(int fd, void* data, size_t size, Deadline deadline, const std::string& peer);

/// 64 random bits from getrandom(); never zero.
Result<uint64_t> secureRandom64();

}  // namespace braid::transport
