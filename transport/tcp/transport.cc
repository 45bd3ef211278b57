// The tcp backend's setup half: handles, listen/connect/accept and the Transport entry points.
// The data path (framing, striping, progress, errors) is in connection.h.
//
// listen() binds port 0 and writes a handle {magic, kind, version, job secret, random nonce,
// address, nstreams, stripe threshold, checksum}. connect() validates the handle (kInvalidArgument
// for a foreign, corrupted or other-job handle), starts nstreams non-blocking connects and
// returns; isend/test finish them and send on each socket a hello {magic, job secret, nonce,
// connection id, stream index, nstreams}. accept() reads hellos without blocking, refuses (closes
// and warns, naming the remote address) sockets with a wrong secret or nonce, garbage, or no
// complete hello within TransportOptions::timeoutMs (those checks are transport/handshake.h's,
// shared with ucx), or an inconsistent or duplicate stream, and returns the RecvComm once every
// stream of one connection id has arrived; the listener then closes (it serves exactly one
// connection).
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "core/params.h"
#include "transport/backends.h"
#include "transport/handshake.h"
#include "transport/socket.h"
#include "transport/tcp/connection.h"

namespace braid::transport {
namespace {

using detail::kMaxStreams;
using detail::TcpHandle;
using detail::TcpRecvComm;
using detail::TcpRequest;
using detail::TcpSendComm;


class TcpListenComm : public HandshakeListenComm {
 public:
  /// A socket whose hello is on its way; validated once it is this job's, and a consistent
  /// stream.
  struct Pending : PendingHello {
    using PendingHello::PendingHello;
    Fd fd;
    std::string peer;
    bool validated = false;
  };

  Fd fd;
  int nstreams = 0;
  size_t stripeMin = 0;
  std::vector<Pending> pending;
};

class TcpTransport : public Transport {
 public:
  explicit TcpTransport(const TransportOptions& options)
      : handshake_(detail::kTcpHandshake, options) {
    int64_t streams = paramInt("BRAID_TCP_STREAMS");
    if (streams < 1 || streams > kMaxStreams) {
      BRAID_WARN("BRAID_TCP_STREAMS=%lld is outside 1..%d; using %d",
                 static_cast<long long>(streams), kMaxStreams,
                 static_cast<int>(std::clamp<int64_t>(streams, 1, kMaxStreams)));
      streams = std::clamp<int64_t>(streams, 1, kMaxStreams);
    }
    nstreams_ = static_cast<int>(streams);
    int64_t stripeMin = paramInt("BRAID_TCP_STRIPE_MIN");
    stripeMin_ = stripeMin < 1 ? 1 : static_cast<size_t>(stripeMin);
  }

  const char* name() const override { return "tcp"; }

  Status listen(Handle* handle, std::unique_ptr<ListenComm>* listenComm) override {
    BRAID_ASSIGN_OR_RETURN(SocketAddress address, handshake_.listenAddress(handle, listenComm));
    ListenOptions lo;
    lo.bufferBytes = detail::kSocketBufferBytes;
    SocketAddress bound;
    Result<Fd> fd = listenOn(address, lo, &bound);
    if (!fd.isOk()) return fd.status().withContext("tcp listen");
    if (bound.isAny()) {
      // Listening on every address: advertise the one peers should use.
      BRAID_ASSIGN_OR_RETURN(InterfaceAddress chosen,
                             selectInterface(paramString("BRAID_SOCKET_IFNAME")));
      int port = bound.port();
      bound = chosen.address;
      bound.setPort(port);
    }
    BRAID_ASSIGN_OR_RETURN(uint64_t nonce, secureRandom64());
    (void)setNoDelay(fd.value().get());

    auto comm = std::make_unique<TcpListenComm>();
    comm->fd = std::move(fd.value());
    comm->address = bound.toString();
    comm->nonce = nonce;
    comm->nstreams = nstreams_;
    comm->stripeMin = stripeMin_;

    TcpHandle h;
    std::memset(&h, 0, sizeof(h));
    h.header = handshake_.handleHeader(nonce);
    h.stripeMin = stripeMin_;
    h.nstreams = static_cast<uint32_t>(nstreams_);
    h.address = bound.pack();
    writeHandle(&h, handle);
    BRAID_INFO("tcp: listening on %s with %d streams", comm->address.c_str(), nstreams_);
    *listenComm = std::move(comm);
    return Status::ok();
  }

  Status connect(const Handle& handle, std::unique_ptr<SendComm>* sendComm) override {
    TcpHandle h;
    BRAID_RETURN_IF_ERROR(handshake_.readHandle(handle, sendComm, &h));
    if (h.nstreams < 1 || h.nstreams > static_cast<uint32_t>(kMaxStreams) || h.stripeMin == 0) {
      return invalidArgument("tcp connect: the handle has " + std::to_string(h.nstreams) +
                             " streams (valid 1.." + std::to_string(kMaxStreams) + ")");
    }
    BRAID_ASSIGN_OR_RETURN(Handshake::Dial dial, handshake_.dial(h.header, h.address, h.nstreams));
    auto comm = std::make_unique<TcpSendComm>(
        static_cast<int>(h.nstreams), static_cast<size_t>(h.stripeMin), dial.address.toString());
    BRAID_RETURN_IF_ERROR(comm->start(dial.address, dial.hello));
    *sendComm = std::move(comm);
    return Status::ok();
  }

  Status accept(ListenComm* listenComm, std::unique_ptr<RecvComm>* recvComm) override {
    BRAID_RETURN_IF_ERROR(handshake_.checkAccept(listenComm, recvComm));
    auto* lc = static_cast<TcpListenComm*>(listenComm);
    acceptNew(lc);
    readHellos(lc);
    return completeConnection(lc, recvComm);
  }

  Status isend(SendComm* comm, const void* data, size_t size, const Meta& meta,
               Request** request) override {
    BRAID_RETURN_IF_ERROR(checkPost("tcp", "isend", comm, data, size, request));
    auto* c = static_cast<TcpSendComm*>(comm);
    if (!c->ready()) c->progressConnect();
    if (!c->broken().isOk()) return c->broken();
    if (!c->ready()) return Status::ok();
    TcpRequest* r = c->postSend(data, size, meta);
    if (r == nullptr) return Status::ok();
    c->progress();
    *request = reinterpret_cast<Request*>(r);
    return Status::ok();
  }

  Status progressConnect(SendComm* comm, bool* ready) override {
    if (comm == nullptr || ready == nullptr) return invalidArgument("tcp progressConnect: null comm");
    auto* c = static_cast<TcpSendComm*>(comm);
    if (!c->ready()) c->progressConnect();
    *ready = c->ready();
    return c->broken();
  }

  Status irecv(RecvComm* comm, void* data, size_t size, Meta* meta, Request** request) override {
    BRAID_RETURN_IF_ERROR(checkPost("tcp", "irecv", comm, data, size, request));
    auto* c = static_cast<TcpRecvComm*>(comm);
    if (!c->broken().isOk()) return c->broken();
    TcpRequest* r = c->postRecv(data, size, meta);
    if (r == nullptr) return Status::ok();
    c->progress();
    *request = reinterpret_cast<Request*>(r);
    return Status::ok();
  }

  Status test(Request* request, bool* done, size_t* size) override {
    auto* r = reinterpret_cast<TcpRequest*>(request);
    BRAID_RETURN_IF_ERROR(checkTest("tcp", r, detail::kTcpMagics.request, done));
    detail::TcpConn* c = r->conn;
    if (!c->complete(r)) {
      if (c->isSend()) static_cast<TcpSendComm*>(c)->progressConnect();
      c->progress();
    }
    if (c->complete(r) && r->metaOut != nullptr) *r->metaOut = r->header.meta;
    return finishTest(c, r, done, size);
  }

 private:
  void refuse(TcpListenComm* lc, size_t i, const std::string& why) {
    handshake_.refused(lc->pending[i].peer, *lc, why);
    lc->pending.erase(lc->pending.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void acceptNew(TcpListenComm* lc) {
    for (;;) {
      sockaddr_storage from;
      socklen_t len = sizeof(from);
      int fd = ::accept4(lc->fd.get(), reinterpret_cast<sockaddr*>(&from), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          BRAID_WARN("tcp: accept on %s failed: %s", lc->address.c_str(), strerror(errno));
        }
        return;
      }
      Fd socket(fd);
      std::string peer =
          SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&from), len).toString();
      if (handshake_.tooManyPending(peer, *lc, lc->pending.size())) continue;
      (void)setNoDelay(fd);
      TcpListenComm::Pending p(nowNs());
      p.fd = std::move(socket);
      p.peer = std::move(peer);
      lc->pending.push_back(std::move(p));
    }
  }

  void readHellos(TcpListenComm* lc) {
    uint64_t now = nowNs();
    for (size_t i = 0; i < lc->pending.size();) {
      TcpListenComm::Pending& p = lc->pending[i];
      if (p.validated) {
        ++i;
        continue;
      }
      ssize_t n;
      do {
        n = ::recv(p.fd.get(), p.rest(), p.missing(), MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
      if (n == 0) {
        refuse(lc, i, "closed before completing its hello");
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        refuse(lc, i, std::string("error reading its hello: ") + strerror(errno));
        continue;
      }
      if (n > 0) p.advance(static_cast<size_t>(n));
      std::string why;
      const HelloState state = handshake_.check(p, lc->nonce, now, &why);
      if (state == HelloState::kRefused) {
        refuse(lc, i, why);
        continue;
      }
      if (state == HelloState::kIncomplete) {
        ++i;
        continue;
      }
      const Hello& h = p.hello();
      if (h.nstreams != static_cast<uint32_t>(lc->nstreams) || h.streamIndex >= h.nstreams) {
        refuse(lc, i,
               "inconsistent stream index " + std::to_string(h.streamIndex) + " of " +
                   std::to_string(h.nstreams));
        continue;
      }
      bool duplicate = false;
      for (const TcpListenComm::Pending& q : lc->pending) {
        duplicate |= q.validated && q.hello().connectionId == h.connectionId &&
                     q.hello().streamIndex == h.streamIndex;
      }
      if (duplicate) {
        refuse(lc, i, "duplicate stream " + std::to_string(h.streamIndex));
        continue;
      }
      p.validated = true;
      ++i;
    }
  }

  Status completeConnection(TcpListenComm* lc, std::unique_ptr<RecvComm>* recvComm) {
    for (const TcpListenComm::Pending& first : lc->pending) {
      if (!first.validated) continue;
      uint64_t id = first.hello().connectionId;
      int have = 0;
      for (const TcpListenComm::Pending& q : lc->pending) {
        have += q.validated && q.hello().connectionId == id;
      }
      if (have != lc->nstreams) continue;
      std::vector<Fd> fds(static_cast<size_t>(lc->nstreams));
      std::string peer;
      for (auto it = lc->pending.begin(); it != lc->pending.end();) {
        if (it->validated && it->hello().connectionId == id) {
          if (it->hello().streamIndex == 0) peer = it->peer;
          fds[it->hello().streamIndex] = std::move(it->fd);
          it = lc->pending.erase(it);
        } else {
          ++it;
        }
      }
      BRAID_INFO("tcp: accepted %d streams from %s on %s", lc->nstreams, peer.c_str(),
                 lc->address.c_str());
      *recvComm = std::make_unique<TcpRecvComm>(lc->nstreams, lc->stripeMin, peer, std::move(fds));
      lc->accepted = true;
      // The listener is done: drop whatever else is pending so that it is not left dangling.
      lc->pending.clear();
      lc->fd.reset();
      return Status::ok();
    }
    return Status::ok();
  }

  Handshake handshake_;
  int nstreams_ = 4;
  size_t stripeMin_ = 262144;
};

}  // namespace

Result<std::unique_ptr<Transport>> createTcpTransport(const TransportOptions& options) {
  return std::unique_ptr<Transport>(std::make_unique<TcpTransport>(options));
}

}  // namespace braid::transport
