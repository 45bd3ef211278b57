// TcpStore: rank 0 runs a small key-value server on a background thread; every rank (rank 0
// too, over loopback) talks to it through one client connection.
//
// Protocol (host byte order; all ranks of a job share an architecture), one request at a time
// per connection:
//   request  = {magic, op, keyLength, 0, valueLength, arg} key value
//              op: ping | set | get (arg = wait in ms) | add (arg = delta) | erase (key = the
//              prefix of the keys to remove)
//   response = {magic, code, length} payload
//              code: 0 ok (get: the value; add: the new int64; ping: empty), else a braid Code
//              with a message as payload.
// A get of a missing key is parked on the server until the key is set or its wait ends (then
// kTimeout), so waiting costs no polling traffic. What any connection can make the server hold
// is bounded (see "Server" below and the limits in tcp_store.h). The server thread sleeps in poll()
// on the listening socket, the clients and an eventfd that the destructor signals before joining.
#include "transport/bootstrap/tcp_store.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
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
/// Extra time a client waits beyond its deadline for the server's timeout answer.
constexpr int64_t kReplyGraceMs = 2000;

enum class Op : uint32_t { kPing = 1, kSet = 2, kGet = 3, kAdd = 4, kErasePrefix = 5 };

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
//
// Anything that reaches rank 0's port reaches this server, not only the job's ranks, so what a
// connection can make it hold or do is bounded (the limits are in tcp_store.h):
//   - memory: a connection's input holds at most one request (header, key of at most
//     kStoreMaxKeyBytes, value of at most kStoreMaxValueBytes) plus one round's read; a header
//     that announces more, has another magic or an unknown operation closes that connection.
//     The server reads no further request from a connection while its last reply is unsent or
//     its get is parked, so a client that never reads its replies cannot make it queue them.
//   - time: a connection must complete its first request within kStoreFirstRequestMs of
//     connecting (foreign, idle or slow-loris connections), and every later one within
//     kStoreRequestMs of its first byte; between requests a connection that has spoken the
//     protocol may stay idle as long as it likes (a rank between phases of its job).
//   - count: at most storeConnectionLimit(). At the limit a new connection evicts the oldest one
//     that has not completed a request yet; when every connection has, the new one is closed.
//     When accept() runs out of descriptors, the listener rests for a moment instead of spinning.
//   - fairness: each poll round reads at most kReadBudget bytes from a connection, and nothing
//     blocks: a slow client only delays itself.

constexpr size_t kReadBudget = 256 << 10;
constexpr uint64_t kMsNs = 1000000;
/// A get waits at most this long (a client's "forever" included): no deadline overflows.
constexpr int64_t kMaxWaitMs = int64_t{1} << 40;

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
    if (wake_.valid()) {
      uint64_t one = 1;
      ssize_t n = ::write(wake_.get(), &one, sizeof(one));
      (void)n;
    }
    if (thread_.joinable()) thread_.join();
  }

  const SocketAddress& bound() const { return bound_; }

 private:
  friend Status detail::replayStoreServerScript(const uint8_t* script, size_t size);

  struct Client {
    Fd fd;  ///< invalid for a simulated connection (replayStoreServerScript)
    uint64_t id = 0;
    std::string peer;
    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    size_t outPos = 0;
    bool waiting = false;  ///< a get is parked on waitKey
    std::string waitKey;
    uint64_t waitUntilNs = 0;
    bool closing = false;
    bool spoken = false;  ///< has completed a valid request
    uint64_t acceptedNs = 0;
    uint64_t requestStartNs = 0;  ///< when the first byte of the request in `in` arrived
    // A simulated connection's socket: bytes the client sent, whether it closed, whether it
    // reads its replies, and what it has read.
    std::vector<uint8_t> simSent;
    bool simClosed = false;
    bool simReading = true;
    std::vector<uint8_t> simReceived;
  };

  TcpStoreServer() = default;

  uint64_t now() const { return simulated_ ? simNowNs_ : nowNs(); }

  /// Reads the next request only when the last one is answered and sent.
  static bool wantsInput(const Client& c) {
    return !c.closing && !c.waiting && c.outPos == c.out.size();
  }

  /// The time by which c must have done something, or UINT64_MAX.
  static uint64_t deadlineOf(const Client& c) {
    uint64_t at = UINT64_MAX;
    if (!c.spoken) at = c.acceptedNs + static_cast<uint64_t>(kStoreFirstRequestMs) * kMsNs;
    if (c.spoken && !c.in.empty() && wantsInput(c)) {
      at = c.requestStartNs + static_cast<uint64_t>(kStoreRequestMs) * kMsNs;
    }
    if (c.waiting) at = std::min(at, c.waitUntilNs);
    return at;
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      const uint64_t t = now();
      const bool listening = t >= listenPausedUntilNs_;
      fds.push_back({wake_.get(), POLLIN, 0});
      fds.push_back({listening ? listen_.get() : -1, POLLIN, 0});
      uint64_t nextWake = listening ? UINT64_MAX : listenPausedUntilNs_;
      for (Client& c : clients_) {
        short events = POLLRDHUP;
        if (wantsInput(c)) events |= POLLIN;
        if (c.outPos < c.out.size()) events |= POLLOUT;
        fds.push_back({c.fd.get(), events, 0});
        nextWake = std::min(nextWake, deadlineOf(c));
      }
      int timeout = -1;
      if (nextWake != UINT64_MAX) {
        timeout = nextWake <= t
                      ? 0
                      : static_cast<int>(std::min<uint64_t>((nextWake - t) / kMsNs + 1, 60000));
      }
      int n = ::poll(fds.data(), fds.size(), timeout);
      if (n < 0 && errno != EINTR) {
        BRAID_ERROR("TCP store server: poll failed: %s", strerror(errno));
        return;
      }
      if (n < 0) continue;
      if (fds[0].revents != 0) return;       // shutdown
      const size_t polled = fds.size() - 2;  // acceptClients appends after these
      if (fds[1].revents != 0) acceptClients();
      for (size_t i = 0; i < polled; ++i) {
        Client& c = clients_[i];
        const short r = fds[i + 2].revents;
        if (c.closing) continue;
        if (r & POLLIN) readFrom(c);
        if (!c.closing && (r & POLLOUT)) {
          flush(c);
          if (wantsInput(c)) resume(c);
        }
        if (!c.closing && (r & (POLLHUP | POLLERR | POLLRDHUP)) && !(r & POLLIN)) {
          // Gone while a reply or parked get held its reads (a braid client never half-closes).
          c.closing = true;
        }
      }
      expire();
      sweep();
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
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          BRAID_WARN("TCP store server: cannot accept connections: %s (%zu open)", strerror(errno),
                     clients_.size());
          listenPausedUntilNs_ = now() + 100 * kMsNs;
        }
        return;
      }
      (void)transport::setNoDelay(fd);
      Client c;
      c.fd = Fd(fd);
      c.peer = SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&from), len).toString();
      admit(&c);
    }
  }

  /// Adds c, evicting the oldest connection that has not spoken when the table is full; false
  /// (c refused) when every connection has spoken.
  bool admit(Client* c) {
    size_t open = 0;
    Client* oldest = nullptr;
    for (Client& o : clients_) {
      if (o.closing) continue;
      ++open;
      if (!o.spoken && (oldest == nullptr || o.acceptedNs < oldest->acceptedNs)) oldest = &o;
    }
    if (open >= maxConnections_) {
      if (oldest == nullptr) {
        BRAID_WARN("TCP store server: refusing %s: %zu connections open, all of them clients",
                   c->peer.c_str(), open);
        return false;
      }
      BRAID_WARN("TCP store server: dropping %s (no request yet) to make room for %s",
                 oldest->peer.c_str(), c->peer.c_str());
      oldest->closing = true;
    }
    c->id = nextId_++;
    c->acceptedNs = now();
    clients_.push_back(std::move(*c));
    return true;
  }

  /// Receives into c.in (at most kReadBudget this round) and serves what arrived.
  void readFrom(Client& c) {
    uint8_t buf[65536];
    size_t taken = 0;
    bool eof = false;
    while (taken < kReadBudget) {
      ssize_t n = c.fd.valid() ? ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT)
                               : takeSimulated(c, buf, sizeof(buf));
      if (n > 0) {
        if (c.in.empty()) c.requestStartNs = now();
        c.in.insert(c.in.end(), buf, buf + n);
        taken += static_cast<size_t>(n);
        continue;
      }
      if (n == 0) {
        eof = true;  // serve what came before the close, then close
        break;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.closing = true;
      break;
    }
    handleRequests(c);
    if (eof) c.closing = true;
  }

  /// c may read again (its reply went out, or its parked get ended): the request already in
  /// c.in starts its clock now.
  void resume(Client& c) {
    c.requestStartNs = now();
    handleRequests(c);
  }

  static ssize_t takeSimulated(Client& c, uint8_t* buf, size_t size) {
    if (c.simSent.empty()) {
      if (c.simClosed) return 0;
      errno = EAGAIN;
      return -1;
    }
    const size_t n = std::min(size, c.simSent.size());
    std::memcpy(buf, c.simSent.data(), n);
    c.simSent.erase(c.simSent.begin(), c.simSent.begin() + static_cast<std::ptrdiff_t>(n));
    return static_cast<ssize_t>(n);
  }

  void drop(Client& c, const std::string& why) {
    BRAID_WARN("TCP store server: dropping client %s: %s", c.peer.c_str(), why.c_str());
    c.closing = true;
  }

  void handleRequests(Client& c) {
    size_t pos = 0;
    while (wantsInput(c) && c.in.size() - pos >= sizeof(kStoreMagic)) {
      // The magic is checked as soon as it is in: garbage shorter than a header is refused too.
      uint32_t magic;
      std::memcpy(&magic, c.in.data() + pos, sizeof(magic));
      if (magic != kStoreMagic) {
        drop(c, "malformed request (not a braid store client?)");
        break;
      }
      if (c.in.size() - pos < sizeof(RequestHeader)) break;
      RequestHeader h;
      std::memcpy(&h, c.in.data() + pos, sizeof(h));
      if (h.keyLength > kStoreMaxKeyBytes || h.valueLength > kStoreMaxValueBytes) {
        drop(c, "request of a " + std::to_string(h.keyLength) + "-byte key and a " +
                    std::to_string(h.valueLength) + "-byte value is over the limits (" +
                    std::to_string(kStoreMaxKeyBytes) + ", " + std::to_string(kStoreMaxValueBytes) +
                    ")");
        break;
      }
      if (h.op < static_cast<uint32_t>(Op::kPing) || h.op > static_cast<uint32_t>(Op::kErasePrefix)) {
        drop(c, "unknown operation " + std::to_string(h.op));
        break;
      }
      const size_t total = sizeof(h) + h.keyLength + h.valueLength;
      if (c.in.size() - pos < total) break;
      const uint8_t* p = c.in.data() + pos + sizeof(h);
      std::string key(reinterpret_cast<const char*>(p), h.keyLength);
      const uint8_t* value = p + h.keyLength;
      pos += total;
      c.spoken = true;
      c.requestStartNs = now();  // the next request's, if its bytes are already here
      serve(c, static_cast<Op>(h.op), key, value, h.valueLength, h.arg);
    }
    if (c.closing) {
      c.in.clear();
      return;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
  }

  void serve(Client& c, Op op, const std::string& key, const uint8_t* value, uint64_t size,
             int64_t arg) {
    switch (op) {
      case Op::kPing:
        respond(c, Code::kOk, nullptr, 0);
        return;
      case Op::kSet:
        data_[key].assign(value, value + size);
        respond(c, Code::kOk, nullptr, 0);
        wakeWaiters(key);
        return;
      case Op::kGet: {
        auto it = data_.find(key);
        if (it != data_.end()) {
          respond(c, Code::kOk, it->second.data(), it->second.size());
        } else {
          c.waiting = true;
          c.waitKey = key;
          c.waitUntilNs =
              now() + static_cast<uint64_t>(std::clamp<int64_t>(arg, 0, kMaxWaitMs)) * kMsNs;
        }
        return;
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
            if (text.size() > 64) text = text.substr(0, 64) + "...";
            respondError(c, Code::kInvalidUsage,
                         "key '" + key + "' holds '" + text +
                             "', not an integer; add() needs an integer key");
            return;
          }
          v = parsed;
        }
        if (__builtin_add_overflow(v, arg, &v)) {
          respondError(c, Code::kInvalidArgument,
                       "add(" + std::to_string(arg) + ") to key '" + key + "' overflows int64");
          return;
        }
        std::string text = std::to_string(v);
        data_[key].assign(text.begin(), text.end());
        respond(c, Code::kOk, reinterpret_cast<const uint8_t*>(&v), sizeof(v));
        wakeWaiters(key);
        return;
      }
      case Op::kErasePrefix: {
        // A get parked on an erased key stays parked until the key is set again or its wait ends.
        for (auto it = data_.begin(); it != data_.end();) {
          it = it->first.compare(0, key.size(), key) == 0 ? data_.erase(it) : std::next(it);
        }
        respond(c, Code::kOk, nullptr, 0);
        return;
      }
    }
  }

  void wakeWaiters(const std::string& key) {
    const std::vector<uint8_t>& value = data_[key];
    for (Client& w : clients_) {
      if (w.waiting && !w.closing && w.waitKey == key) {
        w.waiting = false;
        respond(w, Code::kOk, value.data(), value.size());
        resume(w);
      }
    }
  }

  /// Answers gets whose wait ended; drops connections past their deadline (deadlineOf).
  void expire() {
    const uint64_t t = now();
    for (Client& w : clients_) {
      if (w.closing || t < deadlineOf(w)) continue;
      if (w.waiting && t >= w.waitUntilNs) {
        w.waiting = false;
        respondError(w, Code::kTimeout, "key '" + w.waitKey + "' was not set in time");
        resume(w);
      } else if (!w.spoken) {
        drop(w, "no request within " + std::to_string(kStoreFirstRequestMs) +
                    " ms of connecting (not a braid store client?)");
      } else {
        drop(w,
             "request incomplete " + std::to_string(kStoreRequestMs) + " ms after its first byte");
      }
    }
  }

  void sweep() {
    clients_.erase(
        std::remove_if(clients_.begin(), clients_.end(), [](const Client& c) { return c.closing; }),
        clients_.end());
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
      ssize_t n;
      if (c.fd.valid()) {
        n = ::send(c.fd.get(), c.out.data() + c.outPos, c.out.size() - c.outPos,
                   MSG_NOSIGNAL | MSG_DONTWAIT);
      } else if (c.simReading) {
        c.simReceived.insert(c.simReceived.end(), c.out.begin() + static_cast<ptrdiff_t>(c.outPos),
                             c.out.end());
        n = static_cast<ssize_t>(c.out.size() - c.outPos);
      } else {
        return;
      }
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
  size_t maxConnections_ = storeConnectionLimit();
  uint64_t nextId_ = 1;
  uint64_t listenPausedUntilNs_ = 0;
  bool simulated_ = false;
  uint64_t simNowNs_ = 0;
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

  Status erasePrefix(const std::string& prefix) override {
    if (prefix.empty()) return invalidArgument("TCP store: erasePrefix of an empty prefix");
    std::vector<uint8_t> reply;
    return call(Op::kErasePrefix, prefix, nullptr, 0, 0, Deadline::afterMs(timeoutMs_), &reply);
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
    if (s.isOk() && (r.magic != kStoreMagic || r.length > kStoreMaxValueBytes)) {
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

size_t storeConnectionLimit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0 || l.rlim_cur == RLIM_INFINITY) return kStoreMaxConnections;
  const size_t byDescriptors = l.rlim_cur > 128 ? static_cast<size_t>(l.rlim_cur) - 64 : 64;
  return std::min(kStoreMaxConnections, byDescriptors);
}

// ---------------------------------------------------------------------------------------------
// The server without sockets (tcp_store.h)

namespace detail {

namespace {

/// Checks that `bytes` is a sequence of complete or (at its end) partial replies.
Status checkReplies(const std::vector<uint8_t>& bytes) {
  size_t pos = 0;
  while (bytes.size() - pos >= sizeof(ResponseHeader)) {
    ResponseHeader r;
    std::memcpy(&r, bytes.data() + pos, sizeof(r));
    if (r.magic != kStoreMagic || r.length > kStoreMaxValueBytes) {
      return internalError("store replay: malformed reply at byte " + std::to_string(pos));
    }
    if (bytes.size() - pos - sizeof(r) < r.length) break;
    pos += sizeof(r) + r.length;
  }
  return Status::ok();
}

std::vector<uint8_t> request(Op op, const std::string& key, const std::string& value, int64_t arg) {
  RequestHeader h{
      kStoreMagic, static_cast<uint32_t>(op), static_cast<uint32_t>(key.size()), 0, value.size(),
      arg};
  std::vector<uint8_t> out(sizeof(h));
  std::memcpy(out.data(), &h, sizeof(h));
  out.insert(out.end(), key.begin(), key.end());
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

}  // namespace

Status replayStoreServerScript(const uint8_t* script, size_t size) {
  TcpStoreServer s;
  s.simulated_ = true;
  s.simNowNs_ = 1;
  s.maxConnections_ = 6;  // fewer than the slots: evictions and refusals happen
  constexpr int kSlots = 8;
  uint64_t slot[kSlots] = {};  // client id per slot, 0 = none
  auto find = [&](uint64_t id) -> TcpStoreServer::Client* {
    for (auto& c : s.clients_) {
      if (c.id == id && !c.closing) return &c;
    }
    return nullptr;
  };
  auto connect = [&](int k) {
    if (auto* old = find(slot[k])) old->simClosed = true;
    TcpStoreServer::Client c;
    c.peer = "sim" + std::to_string(k);
    const uint64_t id = s.nextId_;
    slot[k] = s.admit(&c) ? id : 0;
  };
  // One poll round as run() does it, with every simulated socket ready as far as it holds data.
  auto pump = [&]() {
    for (auto& c : s.clients_) {
      if (c.closing) continue;
      if (TcpStoreServer::wantsInput(c) && (!c.simSent.empty() || c.simClosed)) s.readFrom(c);
      if (!c.closing && c.outPos < c.out.size() && c.simReading) {
        s.flush(c);
        if (TcpStoreServer::wantsInput(c)) s.resume(c);
      }
      if (!c.closing && c.simClosed && !TcpStoreServer::wantsInput(c)) c.closing = true;
    }
    s.expire();
    s.sweep();
  };
  auto check = [&]() -> Status {
    if (s.clients_.size() > s.maxConnections_) {
      return internalError("store replay: " + std::to_string(s.clients_.size()) + " connections");
    }
    for (auto& c : s.clients_) {
      if (c.in.size() >
          sizeof(RequestHeader) + kStoreMaxKeyBytes + kStoreMaxValueBytes + kReadBudget) {
        return internalError("store replay: " + std::to_string(c.in.size()) +
                             " bytes buffered for one connection");
      }
      BRAID_RETURN_IF_ERROR(checkReplies(c.simReceived));
    }
    return Status::ok();
  };
  for (int k = 0; k < 2; ++k) connect(k);
  size_t i = 0;
  while (i < size) {
    const uint8_t cmd = script[i++];
    const int k = cmd & 7;
    if (cmd < 0x80) {
      size_t n = 0;
      if (i < size) {
        n = script[i++];
        n = std::min(n, size - i);
      }
      if (auto* c = find(slot[k])) c->simSent.insert(c->simSent.end(), script + i, script + i + n);
      i += n;
    } else if (cmd < 0x88) {
      connect(k);
    } else if (cmd < 0x90) {
      if (auto* c = find(slot[k])) c->simClosed = true;
    } else if (cmd < 0x98) {
      if (auto* c = find(slot[k])) c->simReading = !c->simReading;
    } else {
      const uint64_t steps = i < size ? script[i++] : 1;
      s.simNowNs_ += steps * 250 * kMsNs;
    }
    pump();
    BRAID_RETURN_IF_ERROR(check());
  }
  // Still serving: a new connection's ping, set and get are answered.
  TcpStoreServer::Client fresh;
  fresh.peer = "sim-final";
  uint64_t id = s.nextId_;
  if (!s.admit(&fresh)) {
    // Only right when every open connection has spoken; then the clients leave and it gets in.
    for (auto& c : s.clients_) {
      if (!c.closing && !c.spoken) {
        return internalError("store replay: a new connection was refused, not " + c.peer);
      }
      c.simClosed = true;
    }
    pump();
    fresh = TcpStoreServer::Client();
    fresh.peer = "sim-final";
    id = s.nextId_;
    if (!s.admit(&fresh)) return internalError("store replay: refused with no client left");
  }
  for (auto& r : {request(Op::kPing, "", "", 0), request(Op::kSet, "final", "value", 0),
                  request(Op::kGet, "final", "", 1000)}) {
    if (auto* c = find(id)) c->simSent.insert(c->simSent.end(), r.begin(), r.end());
    pump();
    pump();
  }
  auto* c = find(id);
  if (c == nullptr) return internalError("store replay: the final connection was dropped");
  BRAID_RETURN_IF_ERROR(checkReplies(c->simReceived));
  const size_t expected = 3 * sizeof(ResponseHeader) + 5;
  if (c->simReceived.size() != expected) {
    return internalError("store replay: the final connection got " +
                         std::to_string(c->simReceived.size()) + " reply bytes, not " +
                         std::to_string(expected));
  }
  for (size_t off = 0; off < 3 * sizeof(ResponseHeader); off += sizeof(ResponseHeader)) {
    ResponseHeader r;
    std::memcpy(&r, c->simReceived.data() + off, sizeof(r));
    if (r.code != 0) return internalError("store replay: the final connection got an error");
  }
  if (std::memcmp(c->simReceived.data() + 3 * sizeof(ResponseHeader), "value", 5) != 0) {
    return internalError("store replay: the final get returned another value");
  }
  return Status::ok();
}

}  // namespace detail

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
      auto store = std::make_unique<TcpStore>(std::move(server), std::move(fd.value()),
                                              address.toString(), timeoutMs);
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
