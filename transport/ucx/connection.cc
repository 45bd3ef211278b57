#include "transport/ucx/connection.h"

#include <unistd.h>

#include <cstring>

#include "core/clock.h"
#include "core/log.h"

namespace braid::transport::ucx {
namespace {

constexpr uint8_t kHeader = 1;
constexpr uint8_t kData = 2;
constexpr uint8_t kRefusal = 3;
constexpr uint8_t kAccepted = 4;
constexpr uint64_t kSeqMask = (uint64_t{1} << 24) - 1;
constexpr uint64_t kFullMask = ~uint64_t{0};
constexpr uint64_t kKindConnMask = ~kSeqMask;
constexpr size_t kSlotBytes = kHeaderBytes + kInlineBytes;
/// How long a closing connection waits for its UCP requests to finish.
constexpr int64_t kCloseWaitMs = 2000;
/// How long a closing sender waits for its sent data to reach a peer in the same process (which
/// may be blocked on this thread); a peer in another process gets kCloseWaitMs.
constexpr int64_t kFlushWaitSameProcessMs = 50;

void sendDone(void* request, ucs_status_t status, void* user) {
  (void)request;
  auto* op = static_cast<Op*>(user);
  op->status = status;
  op->done = true;
}

void recvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  (void)request;
  auto* op = static_cast<Op*>(user);
  op->status = status;
  op->length = status == UCS_OK && info != nullptr ? info->length : 0;
  op->done = true;
}

/// Frees the UCP request of a finished op.
void reap(Op* op) {
  if (op->done && op->req != nullptr) {
    ucp_request_free(op->req);
    op->req = nullptr;
  }
}

}  // namespace

uint32_t connectionTag(uint64_t nonce, uint64_t connectionId) {
  uint64_t x = nonce ^ (connectionId * 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>(x ^ (x >> 31));
}

UcxConn::UcxConn(bool isSend, std::string peer)
    : isSend_(isSend), peer_(std::move(peer)) {
  staging_.resize(kMaxRequests * kSlotBytes);
  for (size_t i = 0; i < requests_.size(); ++i) {
    requests_[i].conn = this;
    requests_[i].staging = staging_.data() + i * kSlotBytes;
  }
}

void UcxConn::attach(std::unique_ptr<Worker> worker, ucp_ep_h ep, uint32_t connTag,
                     const Hello* hello) {
  worker_ = std::move(worker);
  connTag_ = connTag;
  ep_ = ep;
  if (isSend_) {
    hello_ = *hello;
    helloOp_.active = true;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = sendDone;
    param.user_data = &helloOp_;
    ucs_status_ptr_t r = ucp_stream_send_nbx(ep_, &hello_, sizeof(hello_), &param);
    if (UCS_PTR_IS_PTR(r)) {
      helloOp_.req = r;
    } else {
      helloOp_.done = true;
      helloOp_.status = UCS_PTR_STATUS(r);
    }
    recvOp(&refusalOp_, &refusal_, sizeof(refusal_), tagOf(kRefusal, 0), kKindConnMask);
    recvOp(&acceptOp_, &accepted_, sizeof(accepted_), tagOf(kAccepted, 0), kFullMask);
  } else {
    accepted_ = static_cast<uint64_t>(getpid());
    sendOp(&acceptOp_, &accepted_, sizeof(accepted_), tagOf(kAccepted, 0));
  }
}

UcxConn::~UcxConn() {
  if (worker_ == nullptr) return;
  // Receives are posted on the worker, not the endpoint: cancel them. Sends still in flight are
  // dropped by the forced close (a flushing close waits for the peer's disconnect, which a peer
  // blocked on this very thread never sends).
  bool sendsInFlight = false;
  auto cancel = [this](Op* op) {
    if (op->req != nullptr && !op->done) ucp_request_cancel(worker_->get(), op->req);
  };
  for (UcxRequest& r : requests_) {
    if (isSend_) {
      sendsInFlight |= (r.header.req != nullptr && !r.header.done) ||
                       (r.payload.req != nullptr && !r.payload.done);
    } else {
      cancel(&r.header);
      cancel(&r.payload);
    }
  }
  sendsInFlight |= helloOp_.req != nullptr && !helloOp_.done;
  if (isSend_ && broken_.isOk() && !acceptOp_.done) {
    // The listener has not confirmed the connection yet: its endpoint could fail before it read
    // the hello (a failed endpoint's stream data is dropped), so wait (bounded) for it. Once it
    // is confirmed, tagged messages that were sent survive the forced close below.
    Deadline ackDeadline = Deadline::afterMs(kCloseWaitMs);
    while (!acceptOp_.done && broken_.isOk() && !ackDeadline.expired()) worker_->progress();
  }
  if (isSend_ && !sendsInFlight && broken_.isOk() && ep_ != nullptr) {
    // Flush (bounded): UCP discards data a failed endpoint had not read yet, so data whose send
    // completed must reach the peer's worker before the forced close below.
    ucp_request_param_t param{};
    ucs_status_ptr_t f = ucp_ep_flush_nbx(ep_, &param);
    if (UCS_PTR_IS_PTR(f)) {
      // A peer in this process may be blocked on this very thread and never progress.
      const bool samePid = accepted_ == static_cast<uint64_t>(getpid());
      Deadline flushDeadline = Deadline::afterMs(samePid ? kFlushWaitSameProcessMs : kCloseWaitMs);
      while (ucp_request_check_status(f) == UCS_INPROGRESS && !flushDeadline.expired()) {
        worker_->progress();
      }
      ucp_request_free(f);
    }
  }
  if (isSend_) {
    cancel(&refusalOp_);
    cancel(&acceptOp_);
  }
  worker_->closeEndpoint(ep_, /*force=*/true);
  ep_ = nullptr;
  // Every callback must have run before the ring goes away.
  Deadline deadline = Deadline::afterMs(kCloseWaitMs);
  auto pending = [this] {
    bool any = false;
    for (const Op* op : {&refusalOp_, &helloOp_, &acceptOp_}) {
      any |= op->req != nullptr && !op->done;
    }
    for (const UcxRequest& r : requests_) {
      any |= (r.header.req != nullptr && !r.header.done) ||
             (r.payload.req != nullptr && !r.payload.done);
    }
    return any;
  };
  while (pending() && !deadline.expired()) worker_->progress();
  if (pending()) {
    BRAID_WARN("ucx: connection to %s closed with UCP requests still in flight", peer_.c_str());
  }
  for (UcxRequest& r : requests_) {
    reap(&r.header);
    reap(&r.payload);
  }
  reap(&refusalOp_);
  reap(&helloOp_);
  reap(&acceptOp_);
  worker_.reset();  // destroys the worker while the ring is still alive
}

uint64_t UcxConn::tagOf(uint8_t kind, uint64_t seq) const {
  return (uint64_t{kind} << 56) | (uint64_t{connTag_} << 24) | (seq & kSeqMask);
}

void UcxConn::sendOp(Op* op, const void* buf, size_t len, uint64_t tag) {
  *op = Op{};
  op->active = true;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = sendDone;
  param.user_data = op;
  ucs_status_ptr_t r = ucp_tag_send_nbx(ep_, buf, len, tag, &param);
  if (UCS_PTR_IS_PTR(r)) {
    op->req = r;
  } else {
    op->done = true;
    op->status = UCS_PTR_STATUS(r);
  }
}

void UcxConn::recvOp(Op* op, void* buf, size_t len, uint64_t tag, uint64_t mask) {
  *op = Op{};
  op->active = true;
  // Always through the callback: UCX 1.13 reported length 0 for immediately completed receives
  // in recv_info.
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = recvDone;
  param.user_data = op;
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_->get(), buf, len, tag, mask, &param);
  if (UCS_PTR_IS_PTR(r)) {
    op->req = r;
  } else {
    op->done = true;
    op->status = UCS_PTR_STATUS(r);
  }
}

UcxRequest* UcxConn::take(const void* data, size_t size) {
  UcxRequest& r = slot(posted_);
  if (!r.claim(kUcxMagics.request, posted_, data, size)) return nullptr;
  ++posted_;
  r.headerSeen = false;
  r.header = Op{};
  r.payload = Op{};
  return &r;
}

UcxRequest* UcxConn::postSend(const void* data, size_t size, const Meta& meta) {
  UcxRequest* r = take(data, size);
  if (r == nullptr) return nullptr;
  FrameHeader h{kUcxMagics.frame, 0, size, meta};
  std::memcpy(r->staging, &h, kHeaderBytes);
  if (size <= kInlineBytes) {
    if (size > 0) std::memcpy(r->staging + kHeaderBytes, data, size);
    sendOp(&r->header, r->staging, kHeaderBytes + size, tagOf(kHeader, r->seq));
  } else {
    sendOp(&r->header, r->staging, kHeaderBytes, tagOf(kHeader, r->seq));
    sendOp(&r->payload, data, size, tagOf(kData, r->seq));
  }
  return r;
}

UcxRequest* UcxConn::postRecv(void* data, size_t size, Meta* meta) {
  UcxRequest* r = take(data, size);
  if (r == nullptr) return nullptr;
  r->metaOut = meta;
  recvOp(&r->header, r->staging, kSlotBytes, tagOf(kHeader, r->seq), kFullMask);
  return r;
}

void UcxConn::progress() {
  if (worker_ == nullptr) return;
  worker_->progress();
  if (isSend_) {
    checkRefusal();
  } else {
    if (acceptOp_.done) reap(&acceptOp_);
    advanceReceives();
  }
}

void UcxConn::checkRefusal() {
  if (helloOp_.done) {
    reap(&helloOp_);
    if (helloOp_.status != UCS_OK) fail(ucsError("ucx: hello to peer " + peer_, helloOp_.status));
  }
  if (acceptOp_.done) reap(&acceptOp_);
  if (!refusalOp_.done || !broken_.isOk()) return;
  reap(&refusalOp_);
  if (refusalOp_.status == UCS_OK && refusal_.magic == kUcxMagics.refusal) {
    fail(refusedByPeer(peer_, refusal_));
  }
}

void UcxConn::advanceReceives() {
  for (; scanned_ < posted_; ++scanned_) {
    UcxRequest& r = slot(scanned_);
    if (!r.header.done) return;
    reap(&r.header);
    if (r.header.status != UCS_OK) {
      fail(ucsError("ucx: receive from peer " + peer_, r.header.status));
      return;
    }
    FrameHeader h;
    if (r.header.length < kHeaderBytes) {
      fail(remoteError("ucx: peer " + peer_ + " sent a truncated frame header (" +
                       std::to_string(r.header.length) + " bytes)"));
      return;
    }
    std::memcpy(&h, r.staging, kHeaderBytes);
    if (h.magic != kUcxMagics.frame) {
      fail(remoteError("ucx: peer " + peer_ + " sent a malformed frame header"));
      return;
    }
    if (h.size > r.capacity) {
      r.size = h.size;
      refuse(r);
      return;
    }
    r.size = h.size;
    if (r.metaOut != nullptr) *r.metaOut = h.meta;
    if (h.size <= kInlineBytes) {
      if (r.header.length != kHeaderBytes + h.size) {
        fail(remoteError("ucx: peer " + peer_ + " sent a frame whose size does not match"));
        return;
      }
      if (h.size > 0) std::memcpy(r.data, r.staging + kHeaderBytes, h.size);
    } else {
      recvOp(&r.payload, r.data, h.size, tagOf(kData, r.seq), kFullMask);
    }
    r.headerSeen = true;
  }
}

void UcxConn::refuse(UcxRequest& r) {
  refusal_ = refusalRecord(kUcxMagics.refusal, r.size, r.capacity);
  // Best effort: the record goes out eagerly; its request is reaped with the connection.
  sendOp(&refusalOp_, &refusal_, sizeof(refusal_), tagOf(kRefusal, 0));
  fail(messageTooLarge(peer_, r.size, r.capacity));
}

bool UcxConn::opsDone(const UcxRequest& r) const {
  if (!r.header.done) return false;
  if (!isSend_ && !r.headerSeen) return false;
  return !r.payload.active || r.payload.done;
}

bool UcxConn::complete(UcxRequest* r) {
  if (!opsDone(*r)) progress();
  // A dead peer: first deliver what had already arrived.
  for (int i = 0; i < 4 && !opsDone(*r) && broken_.code() == Code::kRemote; ++i) progress();
  if (!opsDone(*r)) return false;
  reap(&r->header);
  reap(&r->payload);
  for (const Op* op : {&r->header, &r->payload}) {
    if (op->active && op->status != UCS_OK) {
      fail(ucsError(std::string("ucx: ") + (isSend_ ? "send to" : "receive from") + " peer " +
                        peer_,
                    op->status));
      return false;
    }
  }
  if (!isSend_ && r->payload.active && r->payload.length != r->size) {
    fail(remoteError("ucx: peer " + peer_ + " sent a payload whose size does not match"));
    return false;
  }
  return true;
}

void UcxConn::release(UcxRequest* r) {
  r->magic = 0;
  // A request whose UCP operations are still in flight keeps its slot (the connection is
  // broken then, and takes no new requests).
  if ((r->header.req == nullptr || r->header.done) &&
      (r->payload.req == nullptr || r->payload.done)) {
    r->inUse = false;
  }
}

void UcxConn::fail(Status status) {
  if (!broken_.isOk()) return;
  BRAID_INFO("ucx: connection to %s broken: %s", peer_.c_str(), status.toString().c_str());
  broken_ = std::move(status);
}

void UcxConn::onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  auto* c = static_cast<UcxConn*>(arg);
  c->fail(ucsError("ucx: connection to peer " + c->peer_, status));
}

}  // namespace braid::transport::ucx
