#include "transport/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace braid::transport {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

// ---------------------------------------------------------------------------------------------
// SocketAddress

SocketAddress::SocketAddress() { std::memset(&storage_, 0, sizeof(storage_)); }

namespace {

std::string stripBrackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

Result<SocketAddress> lookup(const std::string& host, int port, bool numericOnly) {
  if (port < 0 || port > 65535) {
    return invalidArgument("port " + std::to_string(port) + " is out of range 0..65535");
  }
  std::string name = stripBrackets(host);
  if (name.empty()) return invalidArgument("empty host name");
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = numericOnly ? AI_NUMERICHOST : 0;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(name.c_str(), nullptr, &hints, &list);
  if (rc != 0 || list == nullptr) {
    return invalidArgument("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  // Prefer IPv4: it is what a hostname with both families usually means in a cluster.
  const addrinfo* pick = nullptr;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
    if (a->ai_family == AF_INET6 && pick == nullptr) pick = a;
  }
  if (pick == nullptr) {
    freeaddrinfo(list);
    return invalidArgument("host '" + host + "' has no IPv4 or IPv6 address");
  }
  SocketAddress out = SocketAddress::fromSockaddr(pick->ai_addr, pick->ai_addrlen);
  freeaddrinfo(list);
  out.setPort(port);
  return out;
}

bool isLinkLocal6(const sockaddr_in6* a) {
  return a->sin6_addr.s6_addr[0] == 0xfe && (a->sin6_addr.s6_addr[1] & 0xc0) == 0x80;
}

}  // namespace

Result<SocketAddress> SocketAddress::parseNumeric(const std::string& host, int port) {
  return lookup(host, port, /*numericOnly=*/true);
}

Result<SocketAddress> SocketAddress::resolve(const std::string& host, int port) {
  Result<SocketAddress> numeric = lookup(host, port, /*numericOnly=*/true);
  if (numeric.isOk()) return numeric;
  return lookup(host, port, /*numericOnly=*/false);
}

Result<SocketAddress> SocketAddress::parseHostPort(const std::string& hostPort) {
  size_t colon = hostPort.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= hostPort.size()) {
    return invalidArgument("'" + hostPort + "' is not of the form host:port");
  }
  std::string host = hostPort.substr(0, colon);
  std::string portText = hostPort.substr(colon + 1);
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return invalidArgument("'" + hostPort + "': write IPv6 addresses as [addr]:port");
  }
  char* end = nullptr;
  errno = 0;
  long port = std::strtol(portText.c_str(), &end, 10);
  if (errno != 0 || end == portText.c_str() || *end != '\0' || port < 0 || port > 65535) {
    return invalidArgument("'" + hostPort + "': bad port '" + portText + "'");
  }
  return resolve(host, static_cast<int>(port));
}

SocketAddress SocketAddress::fromSockaddr(const sockaddr* addr, socklen_t length) {
  SocketAddress out;
  if (addr == nullptr) return out;
  socklen_t want = addr->sa_family == AF_INET    ? sizeof(sockaddr_in)
                   : addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                 : 0;
  if (want == 0 || length < want) return out;
  std::memcpy(&out.storage_, addr, want);
  out.length_ = want;
  return out;
}

SocketAddress SocketAddress::any(int family, int port) {
  SocketAddress out;
  if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&out.storage_);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    out.length_ = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&out.storage_);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    out.length_ = sizeof(sockaddr_in);
  }
  out.setPort(port);
  return out;
}

SocketAddress SocketAddress::loopback(int family, int port) {
  SocketAddress out = any(family, port);
  if (family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&out.storage_)->sin6_addr = in6addr_loopback;
  } else {
    reinterpret_cast<sockaddr_in*>(&out.storage_)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  return out;
}

int SocketAddress::port() const {
  if (family() == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  }
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  }
  return 0;
}

void SocketAddress::setPort(int port) {
  if (family() == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(static_cast<uint16_t>(port));
  } else if (family() == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(static_cast<uint16_t>(port));
  }
}

bool SocketAddress::isLoopback() const {
  if (family() == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr);
    return (a >> 24) == 127;
  }
  if (family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage_);
    if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) return a->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

bool SocketAddress::isAny() const {
  if (family() == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (family() == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
  }
  return false;
}

std::string SocketAddress::hostString() const {
  char text[INET6_ADDRSTRLEN] = {0};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, text,
              sizeof(text));
    return text;
  }
  if (family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage_);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    std::string out = text;
    if (a->sin6_scope_id != 0) out += "%" + std::to_string(a->sin6_scope_id);
    return out;
  }
  return "<unknown>";
}

std::string SocketAddress::toString() const {
  if (family() == AF_INET) return hostString() + ":" + std::to_string(port());
  if (family() == AF_INET6) return "[" + hostString() + "]:" + std::to_string(port());
  return "<unknown>";
}

SocketAddress::Packed SocketAddress::pack() const {
  Packed p;
  std::memset(&p, 0, sizeof(p));
  if (family() == AF_INET) {
    p.family = 4;
    std::memcpy(p.addr, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, 4);
  } else if (family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage_);
    p.family = 6;
    p.scopeId = a->sin6_scope_id;
    std::memcpy(p.addr, &a->sin6_addr, 16);
  }
  p.port = static_cast<uint16_t>(port());
  return p;
}

Result<SocketAddress> SocketAddress::unpack(const Packed& packed) {
  SocketAddress out;
  if (packed.family == 4) {
    auto* a = reinterpret_cast<sockaddr_in*>(&out.storage_);
    a->sin_family = AF_INET;
    std::memcpy(&a->sin_addr, packed.addr, 4);
    out.length_ = sizeof(sockaddr_in);
  } else if (packed.family == 6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&out.storage_);
    a->sin6_family = AF_INET6;
    a->sin6_scope_id = packed.scopeId;
    std::memcpy(&a->sin6_addr, packed.addr, 16);
    out.length_ = sizeof(sockaddr_in6);
  } else {
    return invalidArgument("address family " + std::to_string(packed.family) +
                           " is neither IPv4 nor IPv6");
  }
  if (packed.port == 0) return invalidArgument("address has port 0");
  out.setPort(packed.port);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Interfaces

bool interfaceMatches(const std::string& name, const std::string& spec) {
  size_t pos = 0;
  bool exclude = false;
  bool exact = false;
  if (pos < spec.size() && spec[pos] == '^') {
    exclude = true;
    ++pos;
  }
  if (pos < spec.size() && spec[pos] == '=') {
    exact = true;
    ++pos;
  }
  std::string list = spec.substr(pos);
  if (list.empty()) return true;
  bool listed = false;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(start, comma - start);
    if (!item.empty()) {
      bool hit = exact ? name == item : name.compare(0, item.size(), item) == 0;
      if (hit) {
        listed = true;
        break;
      }
    }
    start = comma + 1;
  }
  return exclude ? !listed : listed;
}

std::vector<InterfaceAddress> listInterfaces() {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  std::vector<std::string> order;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0) continue;
    int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6 && isLinkLocal6(reinterpret_cast<const sockaddr_in6*>(i->ifa_addr))) {
      continue;  // would need a scope id on every peer; not worth supporting
    }
    socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    InterfaceAddress entry;
    entry.name = i->ifa_name;
    entry.address = SocketAddress::fromSockaddr(i->ifa_addr, length);
    entry.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    if (std::find(order.begin(), order.end(), entry.name) == order.end()) {
      order.push_back(entry.name);
    }
    out.push_back(std::move(entry));
  }
  freeifaddrs(list);
  auto rank = [&](const InterfaceAddress& a) {
    size_t index = std::find(order.begin(), order.end(), a.name) - order.begin();
    return index * 2 + (a.address.family() == AF_INET ? 0 : 1);
  };
  std::stable_sort(
      out.begin(), out.end(),
      [&](const InterfaceAddress& a, const InterfaceAddress& b) { return rank(a) < rank(b); });
  return out;
}

Result<InterfaceAddress> selectInterface(const std::string& spec) {
  std::vector<InterfaceAddress> all = listInterfaces();
  if (!spec.empty()) {
    for (const InterfaceAddress& a : all) {
      if (interfaceMatches(a.name, spec)) return a;
    }
    std::string present;
    for (const InterfaceAddress& a : all) {
      if (present.find(a.name) == std::string::npos)
        present += (present.empty() ? "" : ",") + a.name;
    }
    return invalidArgument("BRAID_SOCKET_IFNAME='" + spec +
                           "' selects no interface that is up with an address; present: " +
                           (present.empty() ? "none" : present));
  }
  for (const InterfaceAddress& a : all) {
    if (!a.loopback) return a;
  }
  InterfaceAddress lo;
  lo.name = "lo";
  lo.address = SocketAddress::loopback(AF_INET, 0);
  lo.loopback = true;
  return lo;
}

Result<SocketAddress> listenAddress(const std::string& numeric, const std::string& spec,
                                    const char* who) {
  if (!numeric.empty()) {
    Result<SocketAddress> parsed = SocketAddress::parseNumeric(numeric, 0);
    if (!parsed.isOk()) {
      return parsed.status().withContext(std::string(who) + ": TransportOptions::tcpAddress '" +
                                         numeric + "'");
    }
    return parsed;
  }
  BRAID_ASSIGN_OR_RETURN(InterfaceAddress chosen, selectInterface(spec));
  SocketAddress address = chosen.address;
  address.setPort(0);
  return address;
}

// ---------------------------------------------------------------------------------------------
// Sockets

Result<Fd> createSocket(int family, bool nonBlocking) {
  int flags = SOCK_STREAM | SOCK_CLOEXEC | (nonBlocking ? SOCK_NONBLOCK : 0);
  int fd = ::socket(family, flags, 0);
  if (fd < 0) return errnoError("socket()", errno);
  return Fd(fd);
}

Status setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return errnoError("fcntl(O_NONBLOCK)", errno);
  }
  return Status::ok();
}

Status setNoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return errnoError("setsockopt(TCP_NODELAY)", errno);
  }
  return Status::ok();
}

void setBufferSizes(int fd, int bytes) {
  // Best effort: the kernel clamps to net.core.{w,r}mem_max, and a failure only costs speed.
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

Result<Fd> listenOn(const SocketAddress& address, const ListenOptions& options,
                    SocketAddress* bound) {
  BRAID_ASSIGN_OR_RETURN(Fd fd, createSocket(address.family(), options.nonBlocking));
  if (options.reuseAddress) {
    int one = 1;
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }
  if (options.bufferBytes > 0) setBufferSizes(fd.get(), options.bufferBytes);
  if (::bind(fd.get(), address.get(), address.length()) != 0) {
    return errnoError("bind to " + address.toString(), errno);
  }
  if (::listen(fd.get(), options.backlog) != 0) {
    return errnoError("listen on " + address.toString(), errno);
  }
  if (bound != nullptr) *bound = localAddress(fd.get());
  return fd;
}

Result<Fd> connectTo(const SocketAddress& address, Deadline deadline) {
  BRAID_ASSIGN_OR_RETURN(Fd fd, createSocket(address.family(), /*nonBlocking=*/true));
  int rc;
  do {
    rc = ::connect(fd.get(), address.get(), address.length());
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) return errnoError("connect to " + address.toString(), errno);
  if (rc != 0) {
    for (;;) {
      pollfd p{fd.get(), POLLOUT, 0};
      int64_t wait = deadline.remainingMs();
      int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(wait, 1000)));
      if (n < 0 && errno != EINTR) return errnoError("poll", errno);
      if (n > 0) break;
      if (deadline.expired()) {
        return timeoutError("connecting to " + address.toString() + " did not complete in time");
      }
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return errnoError("connect to " + address.toString(), err);
  }
  return fd;
}

SocketAddress localAddress(int fd) {
  sockaddr_storage s;
  socklen_t len = sizeof(s);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&s), &len) != 0) return SocketAddress();
  return SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&s), len);
}

SocketAddress peerAddress(int fd) {
  sockaddr_storage s;
  socklen_t len = sizeof(s);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&s), &len) != 0) return SocketAddress();
  return SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&s), len);
}

namespace {

// Waits until fd is ready for `events` or the deadline passes.
Status waitReady(int fd, short events, Deadline deadline, const char* what,
                 const std::string& peer) {
  for (;;) {
    if (deadline.expired()) {
      return timeoutError(std::string(what) + " " + peer + " did not complete in time");
    }
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(deadline.remainingMs() + 1, 1000)));
    if (n > 0) return Status::ok();
    if (n < 0 && errno != EINTR) return errnoError("poll", errno);
  }
}

Status closedError(const std::string& peer) {
  return remoteError("connection to peer " + peer + " closed (peer process exited?)");
}

}  // namespace

Status writeAll(int fd, const void* data, size_t size, Deadline deadline, const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      BRAID_RETURN_IF_ERROR(waitReady(fd, POLLOUT, deadline, "sending to", peer));
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return closedError(peer);
    return errnoError("send to " + peer, errno);
  }
  return Status::ok();
}

Status readAll(int fd, void* data, size_t size, Deadline deadline, const std::string& peer) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, p, size, 0);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return closedError(peer);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      BRAID_RETURN_IF_ERROR(waitReady(fd, POLLIN, deadline, "receiving from", peer));
      continue;
    }
    if (errno == ECONNRESET) return closedError(peer);
    return errnoError("recv from " + peer, errno);
  }
  return Status::ok();
}

Result<uint64_t> secureRandom64() {
  for (;;) {
    uint64_t value = 0;
    ssize_t n = getrandom(&value, sizeof(value), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(value))) return errnoError("getrandom", errno);
    if (value != 0) return value;
  }
}

}  // namespace braid::transport
