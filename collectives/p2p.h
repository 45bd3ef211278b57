// The point-to-point engine every algorithm is written against. An algorithm begins an operation
// (which sets the sequence number and fingerprint carried in every message's Meta), posts sends
// and receives to peers, and waits for them; the engine posts in FIFO order per connection,
// progresses every posted request while waiting, checks each received Meta against this rank's
// own operation, and turns dead peers, silence beyond BRAID_TIMEOUT_MS and mismatches into errors
// that name the peer. Setup allocates; posting and waiting do not.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braid/comm.hpp"
#include "core/clock.h"
#include "transport/transport.h"

namespace braid::detail {

class Tracer;

/// What every rank must agree on for one collective.
struct Fingerprint {
  Collective collective = Collective::kAllReduce;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = -1;
  uint64_t count = 0;

  bool operator==(const Fingerprint& o) const {
    return collective == o.collective && type == o.type && op == o.op && root == o.root &&
           count == o.count;
  }
  bool operator!=(const Fingerprint& o) const { return !(*this == o); }
  /// "allreduce(count=100, float, sum)".
  std::string describe() const;
};

/// Roots (negative) that mark an operation's variant, so that ranks running different variants
/// fail the order check instead of corrupting each other's data (describe() names them).
inline constexpr int kRootSharedWindows = -2;  ///< a collective on buffers in shared windows
inline constexpr int kRootWindowAlloc = -3;    ///< Communicator::allocShared (as a barrier)
inline constexpr int kRootWindowFree = -4;     ///< Communicator::freeShared (as a barrier)
inline constexpr int kRootWindowQuery = -5;    ///< Communicator::sharedPart (local)
/// A rooted collective (root ≥ 0) on buffers in shared windows: kRootedSharedWindows − root.
inline constexpr int kRootedSharedWindows = -16;
/// The root a collective on buffers in shared windows carries in its fingerprint.
inline int sharedWindowsRoot(int root) {
  return root < 0 ? kRootSharedWindows : kRootedSharedWindows - root;
}
/// Whether a fingerprint's root marks a collective on buffers in shared windows.
inline bool sharedWindowsMarked(int root) {
  return root == kRootSharedWindows || root <= kRootedSharedWindows;
}
/// The collective's root from a fingerprint's (−1: none).
inline int fingerprintRoot(int root) {
  return root >= 0 ? root : root <= kRootedSharedWindows ? kRootedSharedWindows - root : -1;
}

/// collective | dtype | op | root in one word (the count travels beside it): the form of a
/// fingerprint in frame metadata, in the intra-host segment and in the rendezvous store.
uint64_t packFingerprint(const Fingerprint& fp);
Fingerprint unpackFingerprint(uint64_t word, uint64_t count);

/// kInvalidUsage for ranks that issued different collectives, naming both sides.
Status collectiveMismatch(int rank, uint64_t seq, const Fingerprint& fp, int otherRank,
                          uint64_t otherSeq, const Fingerprint& otherFp);

/// Meta words: kind | collective | dtype | op | root, sequence, count, sender | error code.
enum class FrameKind : uint8_t { kData = 1, kAbort = 2 };
transport::Meta encodeMeta(FrameKind kind, const Fingerprint& fp, uint64_t seq, int sender,
                           int code);
void decodeMeta(const transport::Meta& meta, FrameKind* kind, Fingerprint* fp, uint64_t* seq,
                int* sender, int* code);

/// One connection in each direction to a peer (null for self).
struct PeerLink {
  transport::Transport* transport = nullptr;
  std::unique_ptr<transport::SendComm> send;
  std::unique_ptr<transport::RecvComm> recv;
};

/// Called once per stall when a wait has made no progress for timeoutMs - leadMs, with the peers
/// it waits for: the communicator publishes them then, so that at the timeout the chain of waits
/// can be read at once instead of after a grace period. P2p's waits and the host segment's use it.
class StallHook {
 public:
  void set(std::function<void(const std::vector<int>&)> fn, int64_t timeoutMs, int64_t leadMs) {
    fn_ = std::move(fn);
    afterNs_ = static_cast<uint64_t>(std::max<int64_t>(timeoutMs - leadMs, 0)) * 1000000ull;
  }
  /// True once per stall (*reported is the wait's flag): set, and idle longer than the threshold.
  bool due(uint64_t idleNs, bool* reported) const {
    if (!fn_ || *reported || idleNs <= afterNs_) return false;
    *reported = true;
    return true;
  }
  void run(const std::vector<int>& peers) const { fn_(peers); }
  uint64_t afterNs() const { return afterNs_; }

 private:
  std::function<void(const std::vector<int>&)> fn_;
  uint64_t afterNs_ = 0;
};

class P2p {
 public:
  using Handle = int;

  /// links has one entry per rank (self's is empty). fail(status) is called once on the first
  /// error so the communicator can fail and tell peers; checkAbort() may return a remote
  /// abort (or ok) and is polled when waits are idle.
  P2p(int rank, int size, std::vector<PeerLink>* links, int64_t timeoutMs,
      std::function<Status()> checkAbort);

  /// Starts an operation: messages carry (seq, fp) until the next begin.
  void begin(uint64_t seq, const Fingerprint& fp);
  Handle postSend(int peer, const void* buf, size_t bytes);
  Handle postRecv(int peer, void* buf, size_t bytes);
  /// Waits for one posted op (progressing all others).
  Status wait(Handle h);
  /// Waits for every op posted since the last waitAll and forgets them.
  Status waitAll();
  /// waitAll for an open-ended group: poll() runs after every sweep that completed an operation
  /// and whenever the wait idles; it may read done() and post more operations, which join the
  /// wait (each checked against the fingerprint of the begin() before its post).
  Status waitAllPolling(const std::function<void()>& poll);
  /// Whether a posted operation has completed (until the next waitAll forgets it).
  bool done(Handle h) const { return ops_[h].done; }
  /// Convenience: post both, wait for both.
  Status sendRecv(int sendPeer, const void* sbuf, size_t sbytes, int recvPeer, void* rbuf,
                  size_t rbytes);
  /// Bytes actually received by a completed receive.
  size_t received(Handle h) const { return ops_[h].done_bytes; }

  /// Best effort: posts an abort frame to every peer and progresses them for up to budgetMs.
  void sendAbort(int code, int originRank, int budgetMs);

  /// After a kTimeout from wait(): the peers this rank was still waiting for.
  const std::vector<int>& stalledPeers() const { return stalledPeers_; }
  /// The peers of the operations still pending, each once.
  std::vector<int> pendingPeers() const;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Waits on a peer longer than Tracer::kMinWaitNs are recorded there (null: none).
  void setTracer(Tracer* tracer) { tracer_ = tracer; }
  /// See StallHook; the peers are those of the pending operations (stalledPeers()).
  void setStallHook(std::function<void(const std::vector<int>&)> fn, int64_t leadMs) {
    stallHook_.set(std::move(fn), timeoutMs_, leadMs);
  }

 private:
  struct Op {
    int peer;
    bool isSend;
    void* buf;
    size_t bytes;
    transport::Request* req;
    transport::Meta meta;
    bool done;
    size_t done_bytes;
    uint64_t postedNs;  ///< when the transport took the request (0: not yet)
    Fingerprint fp;     ///< the operation's, at its post: what a received Meta must carry
  };
  // Posts what can be posted (FIFO per peer and direction) and tests what is posted. Returns
  // whether anything progressed.
  Status progress(bool* progressed);
  Status checkRecvMeta(const Op& op);
  /// A receive of send/recv or a p2p group (not of a collective).
  bool pointToPointReceive(const Op& op) const;
  /// "point-to-point mismatch: rank R's receive from rank Q expects N T but rank Q sent <sent>".
  Status receiveMismatch(const Op& op, const std::string& sent, const char* note) const;
  Status timeoutStatus(uint64_t nowNs, uint64_t minSilenceNs);
  /// How long the pending operation has heard nothing from its peer: since it was posted or
  /// since an operation with that peer last completed, whichever is later. A transfer counts
  /// as silence until it completes, so one message that needs longer than BRAID_TIMEOUT_MS to
  /// cross its link is a timeout even while other peers' traffic completes.
  uint64_t silenceNs(const Op& op, uint64_t nowNs) const;
  /// The longest silence among the posted pending operations.
  uint64_t longestSilenceNs(uint64_t nowNs) const;
  /// Fills stalledPeers_ with the peers of the pending operations silent for at least
  /// minSilenceNs (0: every pending one); returns what each owes.
  std::string collectStalledPeers(uint64_t nowNs, uint64_t minSilenceNs);
  void traceWait(Handle h, uint64_t startNs) const;
  Status finishAll(Status s);

  int rank_;
  int size_;
  std::vector<PeerLink>* links_;
  int64_t timeoutMs_;
  std::function<Status()> checkAbort_;
  uint64_t seq_ = 0;
  Fingerprint fp_;
  transport::Meta dataMeta_{};
  std::vector<Op> ops_;
  size_t firstPending_ = 0;
  std::vector<uint8_t> blockedSend_, blockedRecv_;  // per peer, reset each sweep
  std::vector<uint64_t> heardNs_;  // per peer: when an operation with it last completed
  std::vector<int> stalledPeers_;
  bool stallReported_ = false;  // the stall hook ran for the current stall
  Tracer* tracer_ = nullptr;
  StallHook stallHook_;
  const std::function<void()>* poll_ = nullptr;  // waitAllPolling's, while it runs
};

}  // namespace braid::detail
