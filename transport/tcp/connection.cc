#include "transport/tcp/connection.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "core/log.h"

namespace braid::transport::detail {
namespace {

constexpr size_t kPartAlign = 4096;
constexpr size_t kStagingBytes = 64 << 10;
/// Stream-0 payload remainders at least this large are read straight into the user's buffer.
constexpr size_t kDirectReadMin = 16 << 10;
/// Syscalls per stream per progress call: bounds the time one test() can take.
constexpr int kSyscallBudget = 16;
/// Messages gathered into one sendmsg on stream 0.
constexpr int kGatherMessages = 16;

/// The byte range of a message that travels on stream s.
struct Part {
  size_t offset;
  size_t length;
};

inline Part partOf(size_t size, bool striped, int nstreams, int s) {
  if (!striped) return s == 0 ? Part{0, size} : Part{0, 0};
  size_t chunk = (size + static_cast<size_t>(nstreams) - 1) / static_cast<size_t>(nstreams);
  chunk = (chunk + kPartAlign - 1) / kPartAlign * kPartAlign;
  size_t begin = std::min(size, chunk * static_cast<size_t>(s));
  size_t end = std::min(size, begin + chunk);
  return Part{begin, end - begin};
}

Status refusedError(const std::string& peer) {
  return remoteError("connection to peer " + peer + " refused (has the listening process exited?)");
}

}  // namespace

Status closedError(const std::string& peer) {
  return remoteError("connection to peer " + peer + " closed (peer process exited?)");
}

// ---------------------------------------------------------------------------------------------
// TcpConn

TcpConn::TcpConn(bool isSend, int nstreams, size_t stripeMin, std::string peer)
    : isSend_(isSend), nstreams_(nstreams), stripeMin_(stripeMin), peer_(std::move(peer)) {
  for (TcpRequest& r : requests_) r.conn = this;
}

TcpRequest* TcpConn::post(const void* data, size_t size) {
  TcpRequest& r = requests_[posted_ % kMaxRequests];
  if (!r.claim(kTcpMagics.request, posted_, data, size)) return nullptr;
  ++posted_;
  r.striped = size >= stripeMin_;
  return &r;
}

void TcpConn::release(TcpRequest* r) {
  r->magic = 0;
  r->inUse = false;
}

void TcpConn::progress() {
  if (!broken_.isOk() || !ready()) return;
  if (isSend_) {
    sendStream0();
    for (int s = 1; s < nstreams_ && broken_.isOk(); ++s) sendStream(s);
  } else {
    recvStream0();
    for (int s = 1; s < nstreams_; ++s) recvStream(s);
  }
  uint64_t done = streams_[0].seq;
  for (int s = 1; s < nstreams_; ++s) done = std::min(done, streams_[s].seq);
  completed_ = done;
  if (!isSend_) breakIfStalled();
}

void TcpConn::fail(Status status) {
  if (!broken_.isOk()) return;
  BRAID_INFO("tcp: connection to %s broken: %s", peer_.c_str(), status.toString().c_str());
  broken_ = std::move(status);
  for (int s = 0; s < nstreams_; ++s) streams_[s].fd.reset();
}

void TcpConn::failErrno(const char* what, int err) {
  if (err == EPIPE || err == ECONNRESET) {
    fail(peerRefusalOr(closedError(peer_)));
    return;
  }
  fail(errnoError(std::string(what) + " peer " + peer_, err));
}

Status TcpConn::peerRefusalOr(Status fallback) {
  RefusalRecord rec;
  if (!streams_[0].fd.valid()) return fallback;
  ssize_t n = ::recv(streams_[0].fd.get(), &rec, sizeof(rec), MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(sizeof(rec)) || rec.magic != kTcpMagics.refusal) return fallback;
  return refusedByPeer(peer_, rec);
}

void TcpConn::stall(int s, Status status) {
  if (streams_[s].stall.isOk()) streams_[s].stall = std::move(status);
}

void TcpConn::stallErrno(int s, int err) {
  stall(s, err == ECONNRESET ? closedError(peer_) : errnoError("recv from peer " + peer_, err));
}

void TcpConn::breakIfStalled() {
  for (int s = 0; s < nstreams_; ++s) {
    if (streams_[s].stall.isOk() || streams_[s].seq != completed_) continue;
    if (refusal_.magic == kTcpMagics.refusal && streams_[0].fd.valid()) {
      // Tell the sender why before closing (best effort; it may report kRemote instead).
      (void)::send(streams_[0].fd.get(), &refusal_, sizeof(refusal_), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    fail(streams_[s].stall);
    return;
  }
}

// ---- send side ------------------------------------------------------------------------------

void TcpConn::sendStream0() {
  Stream& st = streams_[0];
  for (int budget = 0; budget < kSyscallBudget && st.seq < posted_; ++budget) {
    iovec iov[2 * kGatherMessages];
    int count = 0;
    size_t offset = st.offset;
    for (uint64_t k = st.seq; k < posted_ && k < st.seq + kGatherMessages; ++k, offset = 0) {
      TcpRequest& r = slot(k);
      Part p = partOf(r.size, r.striped, nstreams_, 0);
      if (offset < kHeaderBytes) {
        iov[count++] = {reinterpret_cast<char*>(&r.header) + offset, kHeaderBytes - offset};
      }
      size_t payloadDone = offset > kHeaderBytes ? offset - kHeaderBytes : 0;
      if (p.length > payloadDone) {
        iov[count++] = {r.data + p.offset + payloadDone, p.length - payloadDone};
      }
    }
    msghdr msg;
    std::memset(&msg, 0, sizeof(msg));
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(st.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      failErrno("send to", errno);
      return;
    }
    size_t left = static_cast<size_t>(n);
    while (left > 0) {
      TcpRequest& r = slot(st.seq);
      size_t portion = kHeaderBytes + partOf(r.size, r.striped, nstreams_, 0).length;
      size_t take = std::min(left, portion - st.offset);
      st.offset += take;
      left -= take;
      if (st.offset == portion) {
        ++st.seq;
        st.offset = 0;
      }
    }
  }
}

void TcpConn::sendStream(int s) {
  Stream& st = streams_[s];
  int budget = 0;
  while (st.seq < posted_) {
    TcpRequest& r = slot(st.seq);
    Part p = partOf(r.size, r.striped, nstreams_, s);
    if (st.offset == p.length) {
      ++st.seq;
      st.offset = 0;
      continue;
    }
    if (budget++ == kSyscallBudget) return;
    ssize_t n = ::send(st.fd.get(), r.data + p.offset + st.offset, p.length - st.offset,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      failErrno("send to", errno);
      return;
    }
    st.offset += static_cast<size_t>(n);
  }
}

// ---- receive side ---------------------------------------------------------------------------

bool TcpConn::fillStaging() {
  for (;;) {
    ssize_t n = ::recv(streams_[0].fd.get(), staging_.data(), staging_.size(), MSG_DONTWAIT);
    if (n > 0) {
      stageBegin_ = 0;
      stageEnd_ = static_cast<size_t>(n);
      return true;
    }
    if (n == 0) {
      stall(0, closedError(peer_));
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) stallErrno(0, errno);
    return false;
  }
}

bool TcpConn::acceptHeader(TcpRequest& r) {
  std::memcpy(&r.header, rxHeader_, kHeaderBytes);
  if (r.header.magic != kTcpMagics.frame) {
    stall(0, remoteError("peer " + peer_ +
                         " sent a malformed frame header (protocol mismatch or corrupted stream)"));
    return false;
  }
  if (r.header.size > r.capacity) {
    refusal_ = refusalRecord(kTcpMagics.refusal, r.header.size, r.capacity);
    stall(0, messageTooLarge(peer_, r.header.size, r.capacity));
    return false;
  }
  r.size = r.header.size;
  r.striped = r.size >= stripeMin_;
  headersKnown_ = r.seq + 1;
  return true;
}

void TcpConn::recvStream0() {
  Stream& st = streams_[0];
  int budget = 0;
  while (st.seq < posted_ && st.stall.isOk()) {
    TcpRequest& r = slot(st.seq);
    size_t avail = stageEnd_ - stageBegin_;
    if (st.offset < kHeaderBytes) {
      if (avail == 0) {
        if (budget++ == kSyscallBudget || !fillStaging()) return;
        avail = stageEnd_ - stageBegin_;
      }
      size_t take = std::min(kHeaderBytes - st.offset, avail);
      std::memcpy(rxHeader_ + st.offset, staging_.data() + stageBegin_, take);
      stageBegin_ += take;
      st.offset += take;
      if (st.offset == kHeaderBytes && !acceptHeader(r)) return;
      continue;
    }
    Part p = partOf(r.size, r.striped, nstreams_, 0);
    size_t done = st.offset - kHeaderBytes;
    if (done == p.length) {
      ++st.seq;
      st.offset = 0;
      continue;
    }
    size_t remaining = p.length - done;
    char* dst = r.data + p.offset + done;
    if (avail > 0) {
      size_t take = std::min(remaining, avail);
      std::memcpy(dst, staging_.data() + stageBegin_, take);
      stageBegin_ += take;
      st.offset += take;
      continue;
    }
    if (budget++ == kSyscallBudget) return;
    if (remaining < kDirectReadMin) {
      if (!fillStaging()) return;
      continue;
    }
    ssize_t n = ::recv(st.fd.get(), dst, remaining, MSG_DONTWAIT);
    if (n > 0) {
      st.offset += static_cast<size_t>(n);
    } else if (n == 0) {
      stall(0, closedError(peer_));
    } else if (errno != EINTR) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) stallErrno(0, errno);
      return;
    }
  }
}

void TcpConn::recvStream(int s) {
  Stream& st = streams_[s];
  int budget = 0;
  while (st.seq < headersKnown_ && st.stall.isOk()) {
    TcpRequest& r = slot(st.seq);
    Part p = partOf(r.size, r.striped, nstreams_, s);
    if (st.offset == p.length) {
      ++st.seq;
      st.offset = 0;
      continue;
    }
    if (budget++ == kSyscallBudget) return;
    ssize_t n =
        ::recv(st.fd.get(), r.data + p.offset + st.offset, p.length - st.offset, MSG_DONTWAIT);
    if (n > 0) {
      st.offset += static_cast<size_t>(n);
    } else if (n == 0) {
      stall(s, closedError(peer_));
    } else if (errno != EINTR) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) stallErrno(s, errno);
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// TcpSendComm

TcpSendComm::TcpSendComm(int nstreams, size_t stripeMin, std::string peer)
    : TcpConn(/*isSend=*/true, nstreams, stripeMin, std::move(peer)) {
  established_ = false;
}

Status TcpSendComm::start(const SocketAddress& address, const Hello& hello) {
  for (int s = 0; s < nstreams_; ++s) {
    Stream& st = streams_[s];
    BRAID_ASSIGN_OR_RETURN(st.fd, createSocket(address.family(), /*nonBlocking=*/true));
    setBufferSizes(st.fd.get(), kSocketBufferBytes);
    BRAID_RETURN_IF_ERROR(setNoDelay(st.fd.get()));
    st.hello = hello;
    st.hello.streamIndex = static_cast<uint16_t>(s);
    int rc;
    do {
      rc = ::connect(st.fd.get(), address.get(), address.length());
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
      st.connected = true;
    } else if (errno != EINPROGRESS) {
      return errno == ECONNREFUSED ? refusedError(peer_)
                                   : errnoError("connect to peer " + peer_, errno);
    }
  }
  progressConnect();
  return Status::ok();
}

void TcpSendComm::progressConnect() {
  if (established_ || !broken_.isOk()) return;
  pollfd fds[kMaxStreams];
  int index[kMaxStreams];
  int count = 0;
  for (int s = 0; s < nstreams_; ++s) {
    if (!streams_[s].connected) {
      fds[count] = {streams_[s].fd.get(), POLLOUT, 0};
      index[count++] = s;
    }
  }
  if (count > 0 && ::poll(fds, static_cast<nfds_t>(count), 0) > 0) {
    for (int i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      int err = 0;
      socklen_t len = sizeof(err);
      if (getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        fail(err == ECONNREFUSED ? refusedError(peer_)
                                 : errnoError("connect to peer " + peer_, err));
        return;
      }
      streams_[index[i]].connected = true;
    }
  }
  bool all = true;
  for (int s = 0; s < nstreams_; ++s) {
    Stream& st = streams_[s];
    if (!st.connected) {
      all = false;
      continue;
    }
    while (st.helloSent < sizeof(Hello)) {
      ssize_t n = ::send(st.fd.get(), reinterpret_cast<char*>(&st.hello) + st.helloSent,
                         sizeof(Hello) - st.helloSent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        st.helloSent += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        failErrno("send hello to", errno);
        return;
      }
    }
    if (st.helloSent < sizeof(Hello)) all = false;
  }
  established_ = all;
}

TcpRequest* TcpSendComm::postSend(const void* data, size_t size, const Meta& meta) {
  TcpRequest* r = post(data, size);
  if (r == nullptr) return nullptr;
  r->header.magic = kTcpMagics.frame;
  r->header.reserved = 0;
  r->header.size = size;
  r->header.meta = meta;
  return r;
}

// ---------------------------------------------------------------------------------------------
// TcpRecvComm

TcpRecvComm::TcpRecvComm(int nstreams, size_t stripeMin, std::string peer, std::vector<Fd> fds)
    : TcpConn(/*isSend=*/false, nstreams, stripeMin, std::move(peer)) {
  for (int s = 0; s < nstreams; ++s) streams_[s].fd = std::move(fds[static_cast<size_t>(s)]);
  staging_.resize(kStagingBytes);
}

TcpRequest* TcpRecvComm::postRecv(void* data, size_t size, Meta* meta) {
  TcpRequest* r = post(data, size);
  if (r != nullptr) r->metaOut = meta;
  return r;
}

}  // namespace braid::transport::detail
