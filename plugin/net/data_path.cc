// The net plugin's data path: isend/irecv/test over the transport, no allocation per message.
//
// A request is a slot of its comm's ring (max(64, 32 * maxRecvs) slots, taken in sequence, so a
// slot comes back only when NCCL has tested the request it held). Transport messages are posted
// strictly in request order by pump(): NCCL's FIFO matching is the transport's FIFO matching.
//
// Grouped receives (maxRecvs > 1): each send is two transport messages, a 0-byte header whose
// Meta is {kHeaderMagic, tag, size} and the payload. The receiver posts a header receive, and
// when it arrives posts the payload receive straight into the first unfilled buffer of the
// oldest grouped receive with that tag; a tag no buffer has, or a size larger than that buffer,
// breaks the comm (kInvalidUsage). Only one header is outstanding at a time, since the buffer of
// the next payload depends on it.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "plugin/net/comm.h"

namespace braid::plugin::net {
namespace detail {

CommBase::CommBase(uint32_t magic, Dir dir, std::shared_ptr<transport::Transport> tp, int maxRecvs)
    : magic(magic), dir(dir), grouped(maxRecvs > 1), tp(std::move(tp)) {
  const int slots = std::max(64, abi::kNetMaxRequests * maxRecvs);
  ring_.resize(static_cast<size_t>(slots));
  for (Request& r : ring_) r.comm = this;
}

Request* CommBase::take() {
  Request& r = ring_[next_ % ring_.size()];
  if (r.inUse) return nullptr;
  r.magic = kRequestMagic;
  r.inUse = true;
  r.seq = next_++;
  r.n = 1;
  r.posted = 0;
  r.fullyPosted = false;
  r.header = nullptr;
  r.headerPosted = false;
  r.headerDone = false;
  for (int i = 0; i < kMaxGroupedRecvs; ++i) {
    r.payload[i] = nullptr;
    r.payloadDone[i] = false;
    r.filled[i] = false;
    r.bytes[i] = 0;
  }
  return &r;
}

void CommBase::release(Request* r) {
  r->magic = 0;
  r->inUse = false;
}

void CommBase::fail(Status s) {
  if (broken.isOk()) broken = std::move(s);
}

bool CommBase::poll(transport::Request** tr, bool* done, size_t* size) {
  *done = false;
  if (*tr == nullptr) return true;
  bool d = false;
  Status s = tp->test(*tr, &d, size);
  if (!s.isOk()) {
    *tr = nullptr;  // the transport freed it
    fail(std::move(s));
    return false;
  }
  if (d) {
    *tr = nullptr;
    *done = true;
  }
  return true;
}

bool CommBase::advance(Request* r) {
  if (dir == Dir::kSend) {
    if (grouped && !r->headerPosted) {
      transport::Meta m{{kHeaderMagic, static_cast<uint64_t>(static_cast<uint32_t>(r->tags[0])),
                         r->capacity[0], 0}};
      Status s = postSend(nullptr, 0, m, &r->header);
      if (!s.isOk()) return fail(std::move(s)), true;
      if (r->header == nullptr) return false;
      r->headerPosted = true;
    }
    transport::Meta m{{static_cast<uint64_t>(static_cast<uint32_t>(r->tags[0])), 0, 0, 0}};
    Status s = postSend(r->data[0], r->capacity[0], m, &r->payload[0]);
    if (!s.isOk()) return fail(std::move(s)), true;
    if (r->payload[0] == nullptr) return false;
    r->posted = 1;
    return true;
  }
  if (!grouped) {
    Status s = postRecv(r->data[0], r->capacity[0], nullptr, &r->payload[0]);
    if (!s.isOk()) return fail(std::move(s)), true;
    if (r->payload[0] == nullptr) return false;
    r->posted = 1;
    return true;
  }
  while (r->posted < r->n) {
    if (!r->headerPosted) {
      Status s = postRecv(nullptr, 0, &r->headerMeta, &r->header);
      if (!s.isOk()) return fail(std::move(s)), true;
      if (r->header == nullptr) return false;
      r->headerPosted = true;
      r->headerDone = false;
    }
    if (!r->headerDone) {
      bool done = false;
      if (!poll(&r->header, &done, nullptr)) return true;
      if (!done) return false;
      r->headerDone = true;
      const transport::Meta& h = r->headerMeta;
      if (h.words[0] != kHeaderMagic) {
        fail(
            internalError("net plugin: a grouped receive got no message header (the peer's "
                          "BRAID_NET_MAX_RECVS differs?)"));
        return true;
      }
      const int tag = static_cast<int>(static_cast<uint32_t>(h.words[1]));
      int j = -1;
      for (int i = 0; i < r->n && j < 0; ++i) {
        if (!r->filled[i] && r->tags[i] == tag) j = i;
      }
      if (j < 0) {
        fail(invalidUsage("net plugin: a message with tag " + std::to_string(tag) +
                          " arrived but the oldest grouped receive has no unfilled buffer with "
                          "that tag"));
        return true;
      }
      if (h.words[2] > r->capacity[j]) {
        fail(invalidUsage("net plugin: a message of " + std::to_string(h.words[2]) +
                          " bytes arrived for a receive buffer of " +
                          std::to_string(r->capacity[j]) +
                          " bytes (receives must be at least as large as their sends)"));
        return true;
      }
      r->filled[j] = true;
      r->tags[j] = INT_MIN;  // taken: a second message with this tag needs another buffer
      r->headerMeta.words[3] = static_cast<uint64_t>(j);
    }
    const int j = static_cast<int>(r->headerMeta.words[3]);
    Status s = postRecv(r->data[j], r->capacity[j], nullptr, &r->payload[j]);
    if (!s.isOk()) return fail(std::move(s)), true;
    if (r->payload[j] == nullptr) return false;
    ++r->posted;
    r->headerPosted = false;
  }
  return true;
}

void CommBase::reap() {
  const uint64_t size = ring_.size();
  const uint64_t first = next_ > size ? next_ - size : 0;
  for (uint64_t seq = first; seq < pump_ && broken.isOk(); ++seq) {
    Request& r = ring_[seq % size];
    if (!r.inUse || r.seq != seq) continue;
    bool done = false;
    size_t bytes = 0;
    if (r.header != nullptr && r.headerPosted && dir == Dir::kSend) {
      if (!poll(&r.header, &done, nullptr)) return;
    }
    for (int i = 0; i < r.n; ++i) {
      if (r.payload[i] == nullptr) continue;
      if (!poll(&r.payload[i], &done, &bytes)) return;
      if (done) {
        r.payloadDone[i] = true;
        r.bytes[i] = bytes;
      }
    }
  }
}

void CommBase::pump() {
  bool reaped = false;
  while (pump_ < next_ && broken.isOk()) {
    Request& r = ring_[pump_ % ring_.size()];
    if (advance(&r)) {
      r.fullyPosted = true;
      ++pump_;
      continue;
    }
    if (reaped) return;
    reap();
    reaped = true;
  }
}

Status CommBase::testRequest(Request* r, bool* done) {
  *done = false;
  if (broken.isOk() && !r->fullyPosted) pump();
  if (!broken.isOk()) return broken;
  if (!r->fullyPosted) return Status::ok();
  bool all = true;
  if (r->header != nullptr) {  // send side: the header message
    bool d = false;
    if (!poll(&r->header, &d, nullptr)) return broken;
    all &= r->header == nullptr;
  }
  for (int i = 0; i < r->n; ++i) {
    if (r->payloadDone[i]) continue;
    bool d = false;
    size_t bytes = 0;
    if (!poll(&r->payload[i], &d, &bytes)) return broken;
    if (d) {
      r->payloadDone[i] = true;
      r->bytes[i] = bytes;
    }
    all &= r->payloadDone[i];
  }
  *done = all;
  return Status::ok();
}

}  // namespace detail

using detail::CommBase;
using detail::Dir;
using detail::MemRegion;
using detail::RecvCommImpl;
using detail::Request;
using detail::SendCommImpl;

Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return invalidArgument("net regMr: null comm/mhandle");
  const uint32_t magic = static_cast<CommBase*>(comm)->magic;
  if (magic != detail::kSendMagic && magic != detail::kRecvMagic) {
    return invalidArgument("net regMr: not a braid send or receive comm");
  }
  if (type != abi::kPtrHost) {
    return invalidArgument("net regMr: memory type " + std::to_string(type) +
                           " is not supported; braid's net plugin reports host memory only "
                           "(ptrSupport = NCCL_PTR_HOST)");
  }
  auto* region = new MemRegion;
  region->base = static_cast<const char*>(data);
  region->size = size;
  *mhandle = region;
  return Status::ok();
}

Status deregMr(void* comm, void* mhandle) {
  (void)comm;
  auto* region = static_cast<MemRegion*>(mhandle);
  if (region == nullptr) return Status::ok();
  if (region->magic != detail::kRegionMagic) {
    return invalidArgument("net deregMr: not a handle from regMr");
  }
  region->magic = 0;
  delete region;
  return Status::ok();
}

Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  (void)mhandle;
  if (request == nullptr) return invalidArgument("net isend: null request");
  *request = nullptr;
  auto* c = static_cast<SendCommImpl*>(sendComm);
  if (c == nullptr || c->magic != detail::kSendMagic) {
    return invalidArgument("net isend: not a braid send comm");
  }
  if (data == nullptr && size > 0) return invalidArgument("net isend: null data");
  if (size > kMaxMessageBytes) {
    return invalidArgument("net isend: " + std::to_string(size) + " bytes exceeds maxP2pBytes " +
                           std::to_string(kMaxMessageBytes));
  }
  if (!c->broken.isOk()) return c->broken;
  Request* r = c->take();
  if (r == nullptr) {
    c->pump();
    return c->broken;  // full: NCCL retries later
  }
  r->data[0] = data;
  r->capacity[0] = size;
  r->tags[0] = tag;
  c->pump();
  *request = r;
  return Status::ok();
}

Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
             void** mhandles, void** request) {
  (void)mhandles;
  if (request == nullptr) return invalidArgument("net irecv: null request");
  *request = nullptr;  // also replaces NCCL's 0x1 hint: we always return a real request
  auto* c = static_cast<RecvCommImpl*>(recvComm);
  if (c == nullptr || c->magic != detail::kRecvMagic) {
    return invalidArgument("net irecv: not a braid receive comm");
  }
  const int maxN = c->grouped ? kMaxGroupedRecvs : 1;
  if (n < 1 || n > maxN || data == nullptr || sizes == nullptr || (n > 1 && tags == nullptr)) {
    return invalidArgument("net irecv: n = " + std::to_string(n) + " (valid 1.." +
                           std::to_string(maxN) + ") or null data/sizes/tags");
  }
  for (int i = 0; i < n; ++i) {
    if (data[i] == nullptr && sizes[i] > 0) return invalidArgument("net irecv: null buffer");
  }
  if (!c->broken.isOk()) return c->broken;
  Request* r = c->take();
  if (r == nullptr) {
    c->pump();
    return c->broken;
  }
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = data[i];
    r->capacity[i] = sizes[i];
    r->tags[i] = tags != nullptr ? tags[i] : 0;
  }
  c->pump();
  *request = r;
  return Status::ok();
}

Status iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  (void)recvComm, (void)n, (void)data, (void)sizes, (void)mhandles;
  if (request != nullptr) *request = nullptr;  // host memory: nothing to flush
  return Status::ok();
}

Status test(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  if (r == nullptr || done == nullptr || r->magic != detail::kRequestMagic || !r->inUse) {
    return invalidArgument("net test: not a live braid request (already completed?)");
  }
  *done = 0;
  CommBase* c = r->comm;
  bool d = false;
  Status s = c->testRequest(r, &d);
  if (!s.isOk()) {
    c->release(r);
    return s;
  }
  if (!d) return Status::ok();
  if (sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) {
      sizes[i] = static_cast<int>(c->dir == Dir::kSend ? r->capacity[i] : r->bytes[i]);
    }
  }
  *done = 1;
  c->release(r);
  return Status::ok();
}

}  // namespace braid::plugin::net
