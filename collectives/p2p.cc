#include "collectives/p2p.h"

#include <cinttypes>
#include <algorithm>
#include <cstring>

#include "core/log.h"
#include "core/trace.h"

namespace braid::detail {

std::string Fingerprint::describe() const {
  std::string s = collectiveName(collective);
  s += "(count=" + std::to_string(count) + ", " + dataTypeName(type);
  if (collective == Collective::kAllReduce || collective == Collective::kReduce ||
      collective == Collective::kReduceScatter) {
    s += std::string(", ") + reduceOpName(op);
  }
  if (fingerprintRoot(root) >= 0) s += ", root=" + std::to_string(fingerprintRoot(root));
  if (sharedWindowsMarked(root)) s += ", buffers in shared windows";
  if (root == kRootWindowAlloc) s += ": allocShared";
  if (root == kRootWindowFree) s += ": freeShared";
  if (root == kRootWindowQuery) s += ": sharedPart";
  return s + ")";
}

uint64_t packFingerprint(const Fingerprint& fp) {
  return (uint64_t{static_cast<uint8_t>(fp.collective)} << 48) |
         (uint64_t{static_cast<uint8_t>(fp.type)} << 40) |
         (uint64_t{static_cast<uint8_t>(fp.op)} << 32) | static_cast<uint32_t>(fp.root);
}

Fingerprint unpackFingerprint(uint64_t word, uint64_t count) {
  Fingerprint fp;
  fp.collective = static_cast<Collective>((word >> 48) & 0xff);
  fp.type = static_cast<DataType>((word >> 40) & 0xff);
  fp.op = static_cast<ReduceOp>((word >> 32) & 0xff);
  fp.root = static_cast<int32_t>(word & 0xffffffffu);
  fp.count = count;
  return fp;
}

Status collectiveMismatch(int rank, uint64_t seq, const Fingerprint& fp, int otherRank,
                          uint64_t otherSeq, const Fingerprint& otherFp) {
  return invalidUsage("collective mismatch between ranks: rank " + std::to_string(rank) +
                      " issued #" + std::to_string(seq) + " " + fp.describe() + " but rank " +
                      std::to_string(otherRank) + " issued #" + std::to_string(otherSeq) + " " +
                      otherFp.describe() +
                      "; every rank must issue the same collectives in the same order");
}

transport::Meta encodeMeta(FrameKind kind, const Fingerprint& fp, uint64_t seq, int sender,
                           int code) {
  transport::Meta m{};
  m.words[0] = (uint64_t{static_cast<uint8_t>(kind)} << 56) | packFingerprint(fp);
  m.words[1] = seq;
  m.words[2] = fp.count;
  m.words[3] = (uint64_t{static_cast<uint32_t>(sender)} << 32) | static_cast<uint32_t>(code);
  return m;
}

void decodeMeta(const transport::Meta& m, FrameKind* kind, Fingerprint* fp, uint64_t* seq,
                int* sender, int* code) {
  *kind = static_cast<FrameKind>(m.words[0] >> 56);
  *fp = unpackFingerprint(m.words[0] & ((uint64_t{1} << 56) - 1), m.words[2]);
  *seq = m.words[1];
  *sender = static_cast<int>(m.words[3] >> 32);
  *code = static_cast<int>(m.words[3] & 0xffffffffu);
}

P2p::P2p(int rank, int size, std::vector<PeerLink>* links, int64_t timeoutMs,
         std::function<Status()> checkAbort)
    : rank_(rank),
      size_(size),
      links_(links),
      timeoutMs_(timeoutMs),
      checkAbort_(std::move(checkAbort)),
      blockedSend_(size),
      blockedRecv_(size),
      heardNs_(size, 0) {
  ops_.reserve(1024);
}

void P2p::begin(uint64_t seq, const Fingerprint& fp) {
  seq_ = seq;
  fp_ = fp;
  dataMeta_ = encodeMeta(FrameKind::kData, fp, seq, rank_, 0);
  stallReported_ = false;
  stalledPeers_.clear();
}

P2p::Handle P2p::postSend(int peer, const void* buf, size_t bytes) {
  ops_.push_back(
      Op{peer, true, const_cast<void*>(buf), bytes, nullptr, dataMeta_, false, 0, 0, fp_});
  return static_cast<Handle>(ops_.size() - 1);
}

P2p::Handle P2p::postRecv(int peer, void* buf, size_t bytes) {
  ops_.push_back(Op{peer, false, buf, bytes, nullptr, transport::Meta{}, false, 0, 0, fp_});
  return static_cast<Handle>(ops_.size() - 1);
}

Status P2p::checkRecvMeta(const Op& op) {
  FrameKind kind;
  Fingerprint theirs;
  uint64_t seq;
  int sender, code;
  decodeMeta(op.meta, &kind, &theirs, &seq, &sender, &code);
  if (kind == FrameKind::kAbort) {
    return remoteError("rank " + std::to_string(rank_) + ": peer rank " + std::to_string(op.peer) +
                       " aborted the communicator (" + codeName(static_cast<Code>(code)) +
                       ", first reported by rank " + std::to_string(static_cast<int>(seq)) +
                       "); see that rank's error for the cause");
  }
  if (kind != FrameKind::kData || sender != op.peer) {
    return internalError("rank " + std::to_string(rank_) + ": malformed frame from rank " +
                         std::to_string(op.peer));
  }
  if (seq != seq_ || theirs != op.fp) {
    if (seq == 0 && pointToPointReceive(op) && theirs.collective == Collective::kSend) {
      return receiveMismatch(op, std::to_string(theirs.count) + " " + dataTypeName(theirs.type),
                             " (messages between two ranks pair up in issue order)");
    }
    return collectiveMismatch(rank_, seq_, op.fp, op.peer, seq, theirs);
  }
  return Status::ok();
}

// Send and recv take sequence 0 and describe every message as a send (collectives.cc).
bool P2p::pointToPointReceive(const Op& op) const {
  return !op.isSend && seq_ == 0 && op.fp.collective == Collective::kSend;
}

Status P2p::receiveMismatch(const Op& op, const std::string& sent, const char* note) const {
  return invalidUsage("point-to-point mismatch: rank " + std::to_string(rank_) +
                      "'s receive from rank " + std::to_string(op.peer) + " expects " +
                      std::to_string(op.fp.count) + " " + dataTypeName(op.fp.type) + " but rank " +
                      std::to_string(op.peer) + " sent " + sent +
                      "; a receive's count and type must match its send's" + note);
}

Status P2p::progress(bool* progressed) {
  std::fill(blockedSend_.begin(), blockedSend_.end(), 0);
  std::fill(blockedRecv_.begin(), blockedRecv_.end(), 0);
  uint64_t now = 0;  // read once a sweep, and only when something moved
  auto stamp = [&now] { return now != 0 ? now : (now = nowNs()); };
  bool allDoneSoFar = true;
  for (size_t i = firstPending_; i < ops_.size(); ++i) {
    Op& op = ops_[i];
    if (op.done) {
      if (allDoneSoFar) firstPending_ = i + 1;
      continue;
    }
    allDoneSoFar = false;
    PeerLink& link = (*links_)[op.peer];
    uint8_t& blocked = op.isSend ? blockedSend_[op.peer] : blockedRecv_[op.peer];
    if (op.req == nullptr) {
      if (blocked) continue;  // keep FIFO order per connection
      Status s = op.isSend ? link.transport->isend(link.send.get(), op.buf, op.bytes, op.meta, &op.req)
                           : link.transport->irecv(link.recv.get(), op.buf, op.bytes, &op.meta, &op.req);
      if (!s.isOk()) {
        return s.withContext("rank " + std::to_string(rank_) + ": " + (op.isSend ? "send to" : "receive from") +
                             " rank " + std::to_string(op.peer));
      }
      if (op.req == nullptr) {
        blocked = 1;
        continue;
      }
      op.postedNs = stamp();
      *progressed = true;
    }
    bool done = false;
    size_t bytes = 0;
    Status s = link.transport->test(op.req, &done, &bytes);
    if (!s.isOk()) {
      op.req = nullptr;
      if (s.code() == Code::kInvalidUsage && pointToPointReceive(op)) {
        return receiveMismatch(op, "more (" + s.message() + ")", "");
      }
      if (!op.isSend && s.code() == Code::kInvalidUsage) {
        // A larger message than this rank expected: the ranks disagree on the collective.
        return invalidUsage("collective mismatch between ranks: rank " + std::to_string(rank_) +
                            " issued #" + std::to_string(seq_) + " " + op.fp.describe() +
                            " and rank " + std::to_string(op.peer) +
                            " sent a larger message than that operation allows (" + s.message() +
                            "); every rank must issue the same collectives with the same counts");
      }
      return s.withContext("rank " + std::to_string(rank_) + ": " +
                           (op.isSend ? "send to" : "receive from") + " rank " +
                           std::to_string(op.peer));
    }
    if (!done) {
      blocked = 1;
      continue;
    }
    op.req = nullptr;
    op.done = true;
    op.done_bytes = bytes;
    heardNs_[op.peer] = stamp();
    *progressed = true;
    if (!op.isSend) BRAID_RETURN_IF_ERROR(checkRecvMeta(op));
  }
  return Status::ok();
}

std::vector<int> P2p::pendingPeers() const {
  std::vector<int> peers;
  for (size_t i = firstPending_; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    if (!op.done && std::find(peers.begin(), peers.end(), op.peer) == peers.end()) {
      peers.push_back(op.peer);
    }
  }
  return peers;
}

Status P2p::timeoutStatus(uint64_t nowNs, uint64_t minSilenceNs) {
  std::string waiting = collectStalledPeers(nowNs, minSilenceNs);
  return timeoutError("rank " + std::to_string(rank_) + ": " +
                      (minSilenceNs > 0 ? "no word from the peer for " : "no progress for ") +
                      std::to_string(timeoutMs_) + " ms in #" + std::to_string(seq_) + " " +
                      fp_.describe() + " waiting for " + waiting +
                      " (peer stalled or dead? raise BRAID_TIMEOUT_MS if it is just slow)");
}

uint64_t P2p::silenceNs(const Op& op, uint64_t nowNs) const {
  const uint64_t since = std::max(op.postedNs, heardNs_[op.peer]);
  return nowNs > since ? nowNs - since : 0;
}

uint64_t P2p::longestSilenceNs(uint64_t nowNs) const {
  uint64_t longest = 0;
  for (size_t i = firstPending_; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    if (!op.done && op.postedNs != 0) longest = std::max(longest, silenceNs(op, nowNs));
  }
  return longest;
}

std::string P2p::collectStalledPeers(uint64_t nowNs, uint64_t minSilenceNs) {
  // Name each peer (and direction) that still owes this rank something, once.
  std::vector<uint8_t> seen(static_cast<size_t>(size_) * 2, 0);
  std::string waiting;
  stalledPeers_.clear();
  for (size_t i = firstPending_; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    uint8_t& s = seen[static_cast<size_t>(op.peer) * 2 + (op.isSend ? 1 : 0)];
    if (op.done || s) continue;
    if (minSilenceNs > 0 && (op.postedNs == 0 || silenceNs(op, nowNs) < minSilenceNs)) continue;
    s = 1;
    if (std::find(stalledPeers_.begin(), stalledPeers_.end(), op.peer) == stalledPeers_.end()) {
      stalledPeers_.push_back(op.peer);
    }
    if (!waiting.empty()) waiting += ", ";
    waiting += (op.isSend ? "send to rank " : "receive from rank ") + std::to_string(op.peer);
  }
  return waiting;
}

Status P2p::wait(Handle h) {
  Backoff backoff;
  uint64_t lastProgressNs = nowNs();
  const uint64_t startNs = lastProgressNs;
  uint64_t nextAbortCheckNs = lastProgressNs + 200000000ull;
  bool waited = false;  // idled at least once: a wait worth a trace event when long
  const uint64_t limitNs = static_cast<uint64_t>(timeoutMs_) * 1000000ull;
  while (!ops_[h].done) {
    bool progressed = false;
    BRAID_RETURN_IF_ERROR(progress(&progressed));
    if (progressed) {
      backoff.reset();
      lastProgressNs = nowNs();
      if (poll_ != nullptr) (*poll_)();
      continue;
    }
    if (poll_ != nullptr) {
      const size_t before = ops_.size();
      (*poll_)();
      if (ops_.size() != before) continue;  // new operations joined: post them at once
    }
    backoff.pause();
    waited = true;
    if (!backoff.spinning()) {
      // Two ways to be stuck: nothing moved at all for the timeout, or a peer that owes this
      // rank a posted operation has not been heard from for that long while the traffic with
      // the others went on (an all-to-all with one rank stopped would otherwise be reported
      // only once the others' exchanges dried up, seconds late).
      const uint64_t now = nowNs();
      const uint64_t idle = now - lastProgressNs;
      const uint64_t silence = longestSilenceNs(now);
      if (idle > limitNs) return timeoutStatus(now, 0);
      if (silence > limitNs) return timeoutStatus(now, limitNs);
      const uint64_t quiet = std::max(idle, silence);
      if (quiet <= stallHook_.afterNs()) {
        if (stallReported_) stalledPeers_.clear();  // the stall ended: nobody is owed any more
        stallReported_ = false;
      } else if (stallHook_.due(quiet, &stallReported_)) {
        collectStalledPeers(now, idle >= silence ? 0 : stallHook_.afterNs());
        stallHook_.run(stalledPeers_);
      }
      if (checkAbort_ && now >= nextAbortCheckNs) {
        nextAbortCheckNs = now + 200000000ull;
        BRAID_RETURN_IF_ERROR(checkAbort_());
      }
    }
  }
  if (waited && tracer_ != nullptr) traceWait(h, startNs);
  return Status::ok();
}

void P2p::traceWait(Handle h, uint64_t startNs) const {
  const uint64_t end = nowNs();
  if (end - startNs < Tracer::kMinWaitNs) return;
  const Op& op = ops_[h];
  tracer_->complete(op.isSend ? "wait send" : "wait recv", "wait", Tracer::kWaits, startNs, end,
                    "\"peer\":" + std::to_string(op.peer) + ",\"bytes\":" +
                        std::to_string(op.bytes) + ",\"seq\":" + std::to_string(seq_));
}

Status P2p::finishAll(Status s) {
  ops_.clear();
  firstPending_ = 0;
  poll_ = nullptr;
  return s;
}

Status P2p::waitAll() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    Status s = wait(static_cast<Handle>(i));
    if (!s.isOk()) return finishAll(s);
  }
  return finishAll(Status::ok());
}

Status P2p::waitAllPolling(const std::function<void()>& poll) {
  poll_ = &poll;
  for (size_t i = 0;; ++i) {
    if (i == ops_.size()) {
      poll();  // the last chance to join: the group ends when nothing more came
      if (i == ops_.size()) break;
    }
    Status s = wait(static_cast<Handle>(i));
    if (!s.isOk()) return finishAll(s);
  }
  return finishAll(Status::ok());
}

Status P2p::sendRecv(int sendPeer, const void* sbuf, size_t sbytes, int recvPeer, void* rbuf,
                     size_t rbytes) {
  postRecv(recvPeer, rbuf, rbytes);
  postSend(sendPeer, sbuf, sbytes);
  return waitAll();
}

void P2p::sendAbort(int code, int originRank, int budgetMs) {
  ops_.clear();
  firstPending_ = 0;
  transport::Meta meta = encodeMeta(FrameKind::kAbort, fp_, static_cast<uint64_t>(originRank),
                                    rank_, code);
  std::vector<transport::Request*> reqs(size_, nullptr);
  std::vector<uint8_t> done(size_, 0);
  Deadline deadline = Deadline::afterMs(budgetMs);
  Backoff backoff;
  int remaining = 0;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || !(*links_)[p].send) {
      done[p] = 1;
    } else {
      ++remaining;
    }
  }
  while (remaining > 0 && !deadline.expired()) {
    for (int p = 0; p < size_; ++p) {
      if (done[p]) continue;
      PeerLink& link = (*links_)[p];
      if (reqs[p] == nullptr) {
        if (!link.transport->isend(link.send.get(), nullptr, 0, meta, &reqs[p]).isOk()) {
          done[p] = 1;
          --remaining;
        }
        continue;
      }
      bool d = false;
      Status s = link.transport->test(reqs[p], &d, nullptr);
      if (!s.isOk() || d) {
        done[p] = 1;
        --remaining;
      }
    }
    backoff.pause();
  }
}

}  // namespace braid::detail
