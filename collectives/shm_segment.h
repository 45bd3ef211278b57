// The intra-host shared segment: one POSIX shared-memory region per host and communicator,
// created by the host's first rank and mapped by every rank on that host. It holds, per local
// rank, two cache-line flags (arrive, done), the fingerprint of the operation being run, and a
// data slot of two halves (double buffering), plus a host-wide abort word. The shm all-reduce,
// reduce-scatter, all-gather and broadcast (<collective>/shm.cc) and the single-host barrier
// (barrier/shm.cc) run on it without any message passing.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/status.h"
#include "collectives/p2p.h"
#include "braid/store.h"

namespace braid::detail {

inline constexpr int kMaxLocalRanks = 64;
/// ShmSegment::singleCopyMinBytes() where every rank has a core of its own, and where the
/// machine's ranks outnumber its cores.
inline constexpr size_t kSingleCopyMinBytes = 16 * 1024;
inline constexpr size_t kSingleCopyMinBytesCrowded = 64 * 1024;
/// The piece the pipelined schedules (broadcast, all-gather) move through one half at a time.
/// Measured on the 2-core VM (2 ranks, all-gather of 1–64 MiB): 256 KiB as fast as 1 and 4 MiB
/// pieces or faster (16 MiB: 1.27 ms against 1.64 and 1.56), 128 KiB 10–50% slower.
inline constexpr size_t kSegmentPieceBytes = 256 * 1024;
/// The piece those schedules use with halves of halfBytes: kSegmentPieceBytes, or the half when
/// smaller (ShmSegment::pieceBytes at run time, the cost functions from the placement).
inline size_t segmentPieceBytes(size_t halfBytes) {
  return std::min(halfBytes, kSegmentPieceBytes);
}

class ShmSegment {
 public:
  /// Collective over the ranks of one host: localRanks lists their global ranks in order (index
  /// 0 creates). slotBytes: per-rank data slot (split in two halves). ranksOnMachine: the
  /// job's processes on this machine's cores, more than localRanks when emulated hosts (network
  /// namespaces) share them (0: localRanks.size()); above the usable cores, waits yield.
  static Result<std::unique_ptr<ShmSegment>> create(const std::string& name, Store* store,
                                                    const std::string& storePrefix, uint64_t secret,
                                                    const std::vector<int>& localRanks,
                                                    int localIndex, size_t slotBytes,
                                                    int64_t timeoutMs, int ranksOnMachine = 0);
  ~ShmSegment();

  int localIndex() const { return me_; }
  int localSize() const { return static_cast<int>(localRanks_.size()); }
  int globalRank(int localIndex) const { return localRanks_[localIndex]; }
  size_t halfBytes() const { return halfBytes_; }
  /// segmentPieceBytes(halfBytes()), a whole number of elements of elemSize.
  size_t pieceBytes(size_t elemSize) const {
    return std::max(elemSize, segmentPieceBytes(halfBytes_) / elemSize * elemSize);
  }
  /// More of the job's ranks on this machine than cores: waits yield, and every hand-off costs
  /// context switches.
  bool oversubscribed() const { return oversubscribed_; }
  /// Whether every local rank may read and write the others' private memory (cross-memory
  /// attach, process_vm_readv/writev), agreed by all at create: each reads every peer's copy of
  /// the segment header through it. Off with BRAID_SHM_CMA=off on any rank, or where the kernel
  /// refuses (Yama's ptrace_scope ≥ 1 between processes that are not parent and child, ranks
  /// in other pid namespaces).
  bool singleCopy() const { return singleCopyMinBytes_ != kNoSingleCopy; }
  /// From how many bytes a call moves (the broadcast's message, the all-gather's block) those two
  /// take the single copy, the same on every local rank; kNoSingleCopy without it. Measured on
  /// the 2-core Intel VM (braid-perf-allgather/-broadcast, BRAID_SHM_CMA=off against auto, best
  /// of 3 rounds): with a core per rank the single copy wins from 16 KiB (broadcast 1.6 µs
  /// against 2.4, an all-gather of 8 KiB blocks 2.0 against 2.5; at 8 KiB messages they tie);
  /// with 4 ranks on the 2 cores its second hand-off costs context switches and the pipeline
  /// wins up to 32 KiB (all-gather of 4 KiB blocks 11.6 µs against 4.6; 64 KiB broadcast 14.7
  /// against 17.8).
  size_t singleCopyMinBytes() const { return singleCopyMinBytes_; }
  /// Single copies, and every local rank has a core of its own in every rank's view (agreed, as
  /// singleCopyMinBytes is): where the all-reduce may take its single copies.
  bool singleCopyUncrowded() const { return singleCopyMinBytes_ == kSingleCopyMinBytes; }
  /// Every local rank set BRAID_SHM_CMA=on (and singleCopy()): the single copies run wherever
  /// they can, whatever the calibration measured (makeShmPlan).
  bool singleCopyForced() const { return singleCopyForced_; }
  static constexpr size_t kNoSingleCopy = ~size_t{0};
  /// Copies bytes at address `remote` in local rank i's process to dst (singleCopy() only);
  /// errors name both ranks.
  Status readPeer(int i, void* dst, uint64_t remote, size_t bytes) const;
  /// Copies src to address `remote` in local rank i's process (singleCopy() only).
  Status writePeer(int i, uint64_t remote, const void* src, size_t bytes) const;
  /// Local rank i's send (or receive) word of generation g as it published it with
  /// setWindowRefs (after waitArrived(g)): a window reference, or in single-copy calls the
  /// buffer's address in rank i's process.
  uint64_t peerRef(int i, uint64_t g, bool send) const;

  /// Data half h (0 or 1) of local rank i.
  uint8_t* half(int i, int h) const;

  /// Next generation number; every rank of the host calls this in the same order.
  uint64_t nextGeneration() { return ++gen_; }

  /// Publishes this rank's fingerprint for generation g (half g & 1), then its arrive flag.
  /// That rewrites what generation g − 2 left in the same half: call it only once every local
  /// rank arrived at g − 1 (which the previous full wait, waitArrived(g − 1), sees to).
  void arrive(uint64_t g, uint64_t seq, const Fingerprint& fp);
  void markDone(uint64_t g);
  /// Waits until every local rank arrived at (or past) g; with checkFingerprints, compares their
  /// fingerprints of generation g with this rank's (kInvalidUsage naming both on mismatch).
  Status waitArrived(uint64_t g, bool checkFingerprints);
  /// The same for local rank i alone (a pipelined broadcast's readers wait for the root only).
  Status waitArrivedFrom(int i, uint64_t g, bool checkFingerprints);
  Status waitDone(uint64_t g);
  /// The same for local rank i's done flag alone.
  Status waitDoneFrom(int i, uint64_t g);
  /// After waitArrived(g): the first local rank to call this for generation g gets its own index
  /// back, every later caller that same index (one rank does a piece of work for the others,
  /// who then waitDoneFrom it). Generations claimed must grow: every rank claims g only after
  /// all arrived at g, so nobody claims g + 1 before every caller of g has claimed it.
  int claim(uint64_t g);
  /// After a kTimeout from a wait (or in the stall hook): the local rank (its communicator
  /// rank) that has not arrived.
  const std::vector<int>& stalledPeers() const { return stalledPeers_; }
  /// See StallHook (p2p.h); the peer is the local rank not yet arrived.
  void setStallHook(std::function<void(const std::vector<int>&)> fn, int64_t leadMs) {
    stallHook_.set(std::move(fn), timeoutMs_, leadMs);
  }

  /// Announces the operation this rank is starting (every operation, whatever its algorithm), so
  /// that a peer running a different operation with the same sequence number is detected even
  /// when the two algorithms never exchange a message.
  void announce(uint64_t seq, const Fingerprint& fp);
  /// kInvalidUsage naming both sides when a local peer announced the same sequence number with
  /// another fingerprint; ok otherwise.
  Status checkAnnouncements() const;

  /// Shared windows (Communicator::allocShared): memory of this rank that every local rank maps,
  /// so that a collective on buffers inside it reads the peers' data where it lies, with no copy
  /// through the data slots. Collective over the host's ranks, called in the same order on
  /// every one with the same id (seq and fp: the operation's, for the order check). Each rank's
  /// part is a POSIX shm object of its own (sizes may differ), its pages reserved and mapped up
  /// front. If any local rank cannot allocate or map its part, every local rank fails with an
  /// error naming it and keeps nothing.
  Result<void*> allocWindow(uint32_t id, size_t bytes, uint64_t seq, const Fingerprint& fp);
  /// The id of the window starting at ptr on this rank (0: none).
  uint32_t windowId(const void* ptr) const;
  /// Global rank `rank`'s part of the window starting at `mine` on this rank, as mapped here;
  /// false when there is no such window or rank is not one of this host's ranks.
  bool windowPart(const void* mine, int rank, uint8_t** base, size_t* bytes) const;
  /// Unmaps window id here (the caller agreed with every rank that nobody uses it any more).
  void freeWindow(uint32_t id);
  /// Frees every window (the communicator's end).
  void releaseWindows();
  /// A reference to [p, p + bytes) when it lies inside one of this rank's windows, 0 otherwise.
  uint64_t windowRef(const void* p, size_t bytes) const;
  /// Publishes this rank's references for generation g; call it just before arrive(g) (the same
  /// rule as arrive's: they share generation g's half).
  void setWindowRefs(uint64_t g, uint64_t send, uint64_t recv);
  /// Local rank i's references of generation g (after waitArrived(g)) resolved in this process:
  /// null when rank i published none, or one that names no window of rank i holding `bytes`.
  const uint8_t* peerWindow(int i, uint64_t g, bool send, size_t bytes) const;

  /// Sets the host-wide abort word (first writer wins); every waiting local rank fails.
  void raiseAbort(int code, int originRank);
  /// ok, or a kRemote naming the rank that aborted.
  Status abortStatus() const;

  struct Header;
  struct Control;

 private:
  ShmSegment() = default;
  Control* control(int i) const;
  Status waitFlag(bool arriveFlag, uint64_t g, bool checkFingerprints, int only = -1);
  /// create's last step with more than one local rank: sets singleCopyMinBytes_.
  Status agreeSingleCopy(const Deadline& deadline);
  void wakeSleepers(Control* c);

  struct Window {
    uint32_t id = 0;
    std::vector<uint8_t*> base;  ///< per local rank, its part mapped here
    std::vector<size_t> bytes;
  };
  /// The synchronization of allocWindow: publishes `word` (the window refs slot),
  /// arrives and waits for every local rank; *words gets every rank's word.
  Status exchangeWord(uint64_t word, uint64_t seq, const Fingerprint& fp,
                      std::vector<uint64_t>* words);
  std::string windowName(uint32_t id, int localIndex) const;
  static void unmapWindow(const Window& w);

  std::vector<Window> windows_;
  std::string name_;
  void* base_ = nullptr;
  size_t mapBytes_ = 0;
  Header* header_ = nullptr;
  std::vector<int> localRanks_;
  std::vector<int> stalledPeers_;
  StallHook stallHook_;
  int me_ = 0;
  size_t halfBytes_ = 0;
  size_t dataOffset_ = 0;
  uint64_t gen_ = 0;
  uint64_t announcedSeq_ = 0;
  Fingerprint announcedFp_;
  int64_t timeoutMs_ = 0;
  bool oversubscribed_ = false;
  size_t singleCopyMinBytes_ = kNoSingleCopy;
  bool singleCopyForced_ = false;
  uint64_t spinNs_ = 0;  // BRAID_SHM_SPIN_US: spinning before a futex sleep (cores to spare)
  bool unlinked_ = false;
};

}  // namespace braid::detail
