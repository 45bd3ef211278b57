// TcpStore: rank 0 runs a small key-value server on a background thread; every rank (rank 0
// too, over loopback) talks to it through one client connection.
//
// Protocol (host byte order; all ranks of a job share an architecture), one request at a time
// per connection:
//   request  = {magic, op, keyLength, 0, valueLength, arg} key value
//              op: ping | set | get (arg = wait in ms) | add (arg = delta)
//   response = {magic, code, length} payload
//              code: 0 ok (get: the value; add: the new int64; ping: empty), else a braid Code
//              with a message as payload.
// A get of a missing key is parked on the server until the key is set or its wait ends (then
// kTimeout), so waiting costs no polling traffic. The server thread sleeps in poll() on the
// listening socket, the clients and an eventfd that the destructor signals before joining.
#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/log.h"
#include "core/params.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/socket.h"

namespace braid {
namespace {

using transport::Fd;
using transport::SocketAddress;

constexpr uint32_t kStoreMagic = 0x54535442;  // "BTST"
constexpr uint32_t kMaxKeyBytes = 64 << 10;
constexpr uint64_t kMaxValueBytes = 1ull << 30;
/// Extra time a client waits beyond its deadline for the server's timeout answer.
constexpr int64_t kReplyGraceMs = 2000;

enum class Op : uint32_t { kPing = 1, kSet = 2, kGet = 3, kAdd = 4 };

struct RequestHeader {
  uint32_t magic;
  uint32_t op;
  uint32_t keyLength;
  uint32_t reserved;
  uint64_t valueLength;
  int64_t arg;
};

struct ResponseHeader {
  uint32_t magic;
  uint32_t code;
  uint64_t length;
};


// ---------------------------------------------------------------------------------------------
// Server

class TcpStoreServer {
 public:
  static Result<std::unique_ptr<TcpStoreServer>> create(const SocketAddress& address) {
    auto server = std::unique_ptr<TcpStoreServer>(new TcpStoreServer());
    transport::ListenOptions lo;
    lo.backlog = 1024;
    lo.reuseAddress = true;
    Result<Fd> fd = transport::listenOn(address, lo, &server->bound_);
    if (!fd.isOk() && !address.isAny()) {
      // The name may resolve to an address this host does not own (a hostname mapped to another
      // interface): serve on every address of the family instead.
      Result<Fd> any = transport::listenOn(SocketAddress::any(address.family(), address.port()), lo,
                                           &server->bound_);
      if (any.isOk()) fd = std::move(any);
    }
    if (!fd.isOk()) {
      return fd.status().withContext("TCP store server on " + address.toString() +
                                     " (is the port in use by another process or job?)");
    }
    server->listen_ = std::move(fd.value());
    int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake < 0) return errnoError("TCP store: eventfd", errno);
    server->wake_ = Fd(wake);
    server->thread_ = std::thread([s = server.get()] { s->run(); });
    return server;
  }

  ~TcpStoreServer() {
    uint64_t one = 1;
    ssize_t n = ::write(wake_.get(), &one, sizeof(one));
    (void)n;
    if (thread_.joinable()) thread_.join();
  }

  const SocketAddress& bound() const { return bound_; }

 private:
  struct Client {
    Fd fd;
    std::string peer;
    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    size_t outPos = 0;
    bool waiting = false;  ///< a get is parked on waitKey
    std::string waitKey;
    uint64_t waitUntilNs = 0;
    bool closing = false;
  };

  TcpStoreServer() = default;

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      fds.push_back({listen_.get(), POLLIN, 0});
      uint64_t now = nowNs();
      uint64_t nextWake = UINT64_MAX;
      for (Client& c : clients_) {
        short events = POLLIN;
        if (c.outPos < c.out.size()) events |= POLLOUT;
        fds.push_back({c.fd.get(), events, 0});
        if (c.waiting) nextWake = std::min(nextWake, c.waitUntilNs);
      }
      int timeout = -1;
      if (nextWake != UINT64_MAX) {
        timeout = nextWake <= now
                      ? 0
                      : static_cast<int>(std::min<uint64_t>((nextWake - now) / 1000000 + 1, 60000));
      }
      int n = ::poll(fds.data(), fds.size(), timeout);
      if (n < 0 && errno != EINTR) {
        BRAID_ERROR("TCP store server: poll failed: %s", strerror(errno));
        return;
      }
      if (fds[0].revents != 0) return;  // shutdown
      if (fds[1].revents != 0) acceptClients();
      for (size_t i = 2; i < fds.size(); ++i) {
        Client& c = clients_[i - 2];
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) readFrom(c);
        if (!c.closing && (fds[i].revents & POLLOUT)) flush(c);
      }
      expireWaits();
      clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                    [](const Client& c) { return c.closing; }),
                     clients_.end());
    }
  }

  void acceptClients() {
    for (;;) {
      sockaddr_storage from;
      socklen_t len = sizeof(from);
      int fd = ::accept4(listen_.get(), reinterpret_cast<sockaddr*>(&from), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      (void)transport::setNoDelay(fd);
      Client c;
      c.fd = Fd(fd);
      c.peer = SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&from), len).toString();
      clients_.push_back(std::move(c));
    }
  }

  void readFrom(Client& c) {
    uint8_t buf[65536];
    for (;;) {
      ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        c.in.insert(c.in.end(), buf, buf + n);
        continue;
      }
      if (n == 0) {
        c.closing = true;
        return;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.closing = true;
      break;
    }
    handleRequests(c);
  }

  void handleRequests(Client& c) {
    size_t pos = 0;
    while (!c.closing && !c.waiting && c.in.size() - pos >= sizeof(RequestHeader)) {
      RequestHeader h;
      std::memcpy(&h, c.in.data() + pos, sizeof(h));
      if (h.magic != kStoreMagic || h.keyLength > kMaxKeyBytes || h.valueLength > kMaxValueBytes) {
        BRAID_WARN(
            "TCP store server: dropping client %s: malformed request (not a braid store "
            "client?)",
            c.peer.c_str());
        c.closing = true;
        return;
      }
      size_t total = sizeof(h) + h.keyLength + h.valueLength;
      if (c.in.size() - pos < total) break;
      const uint8_t* p = c.in.data() + pos + sizeof(h);
      std::string key(reinterpret_cast<const char*>(p), h.keyLength);
      const uint8_t* value = p + h.keyLength;
      pos += total;
      switch (static_cast<Op>(h.op)) {
        case Op::kPing:
          respond(c, Code::kOk, nullptr, 0);
          break;
        case Op::kSet: {
          data_[key].assign(value, value + h.valueLength);
          respond(c, Code::kOk, nullptr, 0);
          wakeWaiters(key);
          break;
        }
        case Op::kGet: {
          auto it = data_.find(key);
          if (it != data_.end()) {
            respond(c, Code::kOk, it->second.data(), it->second.size());
          } else {
            c.waiting = true;
            c.waitKey = key;
            c.waitUntilNs = nowNs() + static_cast<uint64_t>(std::max<int64_t>(h.arg, 0)) * 1000000;
          }
          break;
        }
        case Op::kAdd: {
          auto it = data_.find(key);
          int64_t v = 0;
          if (it != data_.end()) {
            std::string text(it->second.begin(), it->second.end());
            char* end = nullptr;
            errno = 0;
            long long parsed = std::strtoll(text.c_str(), &end, 10);
            if (text.empty() || errno != 0 || *end != '\0') {
              respondError(c, Code::kInvalidUsage,
                           "key '" + key + "' holds '" + text +
                               "', not an integer; add() needs an integer key");
              break;
            }
            v = parsed;
          }
          v += h.arg;
          std::string text = std::to_string(v);
          data_[key].assign(text.begin(), text.end());
          respond(c, Code::kOk, reinterpret_cast<const uint8_t*>(&v), sizeof(v));
          wakeWaiters(key);
          break;
        }
        default:
          BRAID_WARN("TCP store server: dropping client %s: unknown operation %u", c.peer.c_str(),
                     h.op);
          c.closing = true;
          return;
      }
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
  }

  void wakeWaiters(const std::string& key) {
    const std::vector<uint8_t>& value = data_[key];
    for (Client& w : clients_) {
      if (w.waiting && !w.closing && w.waitKey == key) {
        w.waiting = false;
        respond(w, Code::kOk, value.data(), value.size());
        handleRequests(w);
      }
    }
  }

  void expireWaits() {
    uint64_t now = nowNs();
    for (Client& w : clients_) {
      if (w.waiting && !w.closing && now >= w.waitUntilNs) {
        w.waiting = false;
        respondError(w, Code::kTimeout, "key '" + w.waitKey + "' was not set in time");
        handleRequests(w);
      }
    }
  }

  void respondError(Client& c, Code code, const std::string& message) {
    respond(c, code, reinterpret_cast<const uint8_t*>(message.data()), message.size());
  }

  void respond(Client& c, Code code, const uint8_t* payload, size_t size) {
    ResponseHeader h{kStoreMagic, static_cast<uint32_t>(code), size};
    const auto* hp = reinterpret_cast<const uint8_t*>(&h);
    c.out.insert(c.out.end(), hp, hp + sizeof(h));
    if (size > 0) c.out.insert(c.out.end(), payload, payload + size);
    flush(c);
  }

  void flush(Client& c) {
    while (c.outPos < c.out.size()) {
      ssize_t n = ::send(c.fd.get(), c.out.data() + c.outPos, c.out.size() - c.outPos,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.outPos += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.closing = true;
      return;
    }
    c.out.clear();
    c.outPos = 0;
  }

  Fd listen_;
  Fd wake_;
  SocketAddress bound_;
  std::thread thread_;
  // Owned by the server thread once it runs.
  std::vector<Client> clients_;
  std::unordered_map<std::string, std::vector<uint8_t>> data_;
};

// ---------------------------------------------------------------------------------------------
// Client (and the Store)

class TcpStore : public Store {
 public:
  TcpStore(std::unique_ptr<TcpStoreServer> server, Fd fd, std::string peer, int64_t timeoutMs)
      : server_(std::move(server)),
        fd_(std::move(fd)),
        peer_(std::move(peer)),
        timeoutMs_(timeoutMs > 0 ? timeoutMs : kDefaultTimeoutMs) {}

  int serverPort() const { return server_ ? server_->bound().port() : -1; }

  Status ping(Deadline deadline) {
    std::vector<uint8_t> reply;
    return call(Op::kPing, "", nullptr, 0, 0, deadline, &reply);
  }

  Status set(const std::string& key, const std::vector<uint8_t>& value) override {
    if (key.empty()) return invalidArgument("TCP store: empty key");
    std::vector<uint8_t> reply;
    return call(Op::kSet, key, value.data(), value.size(), 0, Deadline::afterMs(timeoutMs_),
                &reply);
  }

  Result<std::vector<uint8_t>> get(const std::string& key, Deadline deadline) override {
    if (key.empty()) return invalidArgument("TCP store: empty key");
    std::vector<uint8_t> reply;
    int64_t waitMs = deadline.remainingMs();
    Deadline replyBy =
        deadline.atNs() == UINT64_MAX ? deadline : Deadline::afterMs(waitMs + kReplyGraceMs);
    if (deadline.atNs() == UINT64_MAX) waitMs = INT64_MAX / 2000000;
    Status s = call(Op::kGet, key, nullptr, 0, waitMs, replyBy, &reply);
    if (!s.isOk()) return s;
    return reply;
  }

  Result<int64_t> add(const std::string& key, int64_t delta) override {
    if (key.empty()) return invalidArgument("TCP store: empty key");
    std::vector<uint8_t> reply;
    BRAID_RETURN_IF_ERROR(
        call(Op::kAdd, key, nullptr, 0, delta, Deadline::afterMs(timeoutMs_), &reply));
    if (reply.size() != sizeof(int64_t)) {
      return internalError("TCP store: add reply of " + std::to_string(reply.size()) + " bytes");
    }
    int64_t v;
    std::memcpy(&v, reply.data(), sizeof(v));
    return v;
  }

 private:
  Status call(Op op, const std::string& key, const uint8_t* value, size_t valueSize, int64_t arg,
              Deadline deadline, std::vector<uint8_t>* reply) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.isOk()) return broken_;
    RequestHeader h{
        kStoreMagic, static_cast<uint32_t>(op), static_cast<uint32_t>(key.size()), 0, valueSize,
        arg};
    // Any I/O failure leaves the stream at an unknown position: the connection is then unusable.
    Status s = transport::writeAll(fd_.get(), &h, sizeof(h), deadline, storeName());
    if (s.isOk() && !key.empty()) {
      s = transport::writeAll(fd_.get(), key.data(), key.size(), deadline, storeName());
    }
    if (s.isOk() && valueSize > 0) {
      s = transport::writeAll(fd_.get(), value, valueSize, deadline, storeName());
    }
    ResponseHeader r{};
    if (s.isOk()) s = transport::readAll(fd_.get(), &r, sizeof(r), deadline, storeName());
    if (s.isOk() && (r.magic != kStoreMagic || r.length > kMaxValueBytes)) {
      s = remoteError("the server at " + peer_ +
                      " does not speak the braid store protocol (is the port used by another "
                      "service, e.g. the launcher's own store?)");
    }
    if (s.isOk()) {
      reply->resize(r.length);
      if (r.length > 0) {
        s = transport::readAll(fd_.get(), reply->data(), r.length, deadline, storeName());
      }
    }
    if (!s.isOk()) {
      broken_ = s.withContext("TCP store");
      return broken_;
    }
    if (r.code != 0) {
      std::string message(reply->begin(), reply->end());
      if (static_cast<Code>(r.code) == Code::kTimeout) {
        return timeoutError("TCP store " + peer_ + ": " + message +
                            " (has every rank started and reached this point?)");
      }
      return Status(static_cast<Code>(r.code), "TCP store " + peer_ + ": " + message);
    }
    return Status::ok();
  }

  std::string storeName() const { return "TCP store " + peer_; }

  std::unique_ptr<TcpStoreServer> server_;  // destroyed after the client connection
  Fd fd_;
  std::string peer_;
  int64_t timeoutMs_;  ///< bounds set and add (get takes its caller's deadline)
  std::mutex mu_;
  Status broken_;
};

}  // namespace

Result<std::unique_ptr<Store>> createTcpStore(const std::string& host, int port, bool isServer,
                                              Deadline deadline, int64_t timeoutMs) {
  if (port < 0 || port > 65535 || (!isServer && port == 0)) {
    return invalidArgument("TCP store: port " + std::to_string(port) + " is not valid" +
                           (isServer ? "" : " for a client (needs the server's port)"));
  }
  BRAID_ASSIGN_OR_RETURN(SocketAddress address, SocketAddress::resolve(host, port));
  std::unique_ptr<TcpStoreServer> server;
  if (isServer) {
    BRAID_ASSIGN_OR_RETURN(server, TcpStoreServer::create(address));
    address = server->bound();
    if (address.isAny()) address = SocketAddress::loopback(address.family(), address.port());
  }
  // Connect, retrying while the server is not up yet.
  Status last;
  int64_t sleepMs = 5;
  for (;;) {
    Result<Fd> fd = transport::connectTo(address, deadline);
    if (fd.isOk()) {
      (void)transport::setNoDelay(fd.value().get());
      auto store =
          std::make_unique<TcpStore>(std::move(server), std::move(fd.value()), address.toString(),
                                     timeoutMs);
      BRAID_RETURN_IF_ERROR(store->ping(deadline));
      return std::unique_ptr<Store>(std::move(store));
    }
    last = fd.status();
    if (deadline.expired() || last.code() == Code::kTimeout) break;
    int64_t pause = std::min<int64_t>(sleepMs, std::max<int64_t>(deadline.remainingMs(), 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));
    sleepMs = std::min<int64_t>(sleepMs * 2, 200);
  }
  return timeoutError("could not reach the TCP store at " + address.toString() +
                      " before the deadline (last error: " + last.message() +
                      "); is rank 0 running, and are the address and port right?");
}

int tcpStorePort(Store* store) {
  auto* tcp = dynamic_cast<TcpStore*>(store);
  return tcp != nullptr ? tcp->serverPort() : -1;
}

}  // namespace braid
