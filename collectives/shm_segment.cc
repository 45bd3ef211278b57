#include "collectives/shm_segment.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "core/clock.h"
#include "core/futex.h"
#include "core/log.h"
#include "core/params.h"
#include "core/process.h"

namespace braid::detail {

namespace {
constexpr uint64_t kMagic = 0x6272616964736567ull;  // "braidseg"
constexpr size_t kLine = 64;
}  // namespace

struct ShmSegment::Header {
  std::atomic<uint64_t> magic;
  uint64_t secret;
  uint32_t nlocal;
  uint64_t slotBytes;
  alignas(kLine) std::atomic<uint64_t> abortWord;  // 0, or (code << 32) | (origin rank + 1)
  alignas(kLine) std::atomic<int32_t> pids[kMaxLocalRanks];
  // Where each rank mapped this segment (0 until it did), and what its single-copy probe found
  // (agreeSingleCopy's Verdict; 0 not yet).
  alignas(kLine) std::atomic<uint64_t> bases[kMaxLocalRanks];
  alignas(kLine) std::atomic<int32_t> singleCopy[kMaxLocalRanks];
  // The last generation a rank claimed with claim(g), and which: (g << 8) | local index.
  alignas(kLine) std::atomic<uint64_t> claimWord;
};
static_assert(kMaxLocalRanks <= 256, "claimWord keeps the local index in 8 bits");

struct ShmSegment::Control {
  // The announced operation: seq (0 while being written), packed fingerprint, count.
  alignas(kLine) std::atomic<uint64_t> annSeq;
  std::atomic<uint64_t> annFp;
  std::atomic<uint64_t> annCount;
  // The arrive flag and, in its cache line, the fingerprint per half (collective|dtype|op|root,
  // seq, count), which every peer reads right after the flag: one line to fetch per peer, not
  // two (with waitFlag's fewer clock reads: 8 ranks on 2 cores passing 8-byte all-reduces spent
  // 17% less task-clock and 35% less user time, perf stat).
  alignas(kLine) std::atomic<uint64_t> arrive;
  uint64_t fp[2][3];
  alignas(kLine) std::atomic<uint64_t> done;
  // Per half, like fp: the operation's send and receive buffers in shared windows (windowRef;
  // 0: not in a window), or allocWindow's word.
  alignas(kLine) uint64_t win[2][2];
  // Ranks asleep (futex) on this rank's arrive or done flag; the owner wakes them after a store.
  alignas(kLine) std::atomic<uint32_t> sleepers;
};
static_assert(sizeof(ShmSegment::Control) == 5 * 64, "control block is five cache lines");

namespace {
size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }
/// What a window part of `asked` bytes occupies: whole pages, at least one.
size_t windowMapBytes(size_t asked) { return roundUp(std::max<size_t>(asked, 1), 4096); }
}  // namespace

Result<std::unique_ptr<ShmSegment>> ShmSegment::create(const std::string& name, Store* store,
                                                       const std::string& storePrefix,
                                                       uint64_t secret,
                                                       const std::vector<int>& localRanks,
                                                       int localIndex, size_t slotBytes,
                                                       int64_t timeoutMs, int ranksOnMachine) {
  if (localRanks.size() > static_cast<size_t>(kMaxLocalRanks)) {
    return invalidArgument("more than " + std::to_string(kMaxLocalRanks) + " ranks on one host");
  }
  std::unique_ptr<ShmSegment> seg(new ShmSegment());
  seg->name_ = name;
  seg->localRanks_ = localRanks;
  seg->me_ = localIndex;
  seg->timeoutMs_ = timeoutMs;
  seg->oversubscribed_ =
      std::max(ranksOnMachine, static_cast<int>(localRanks.size())) > usableCores();
  seg->spinNs_ = static_cast<uint64_t>(std::max<int64_t>(0, paramInt("BRAID_SHM_SPIN_US"))) * 1000;
  seg->halfBytes_ = roundUp(std::max<size_t>(slotBytes / 2, 4096), 4096);
  size_t n = localRanks.size();
  seg->dataOffset_ = roundUp(sizeof(Header), 4096) + roundUp(n * sizeof(Control), 4096);
  seg->mapBytes_ = seg->dataOffset_ + n * 2 * seg->halfBytes_;
  Deadline deadline = Deadline::afterMs(timeoutMs);
  int fd = -1;
  if (localIndex == 0) {
    shm_unlink(name.c_str());  // a leftover of a crashed job with the same name
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return errnoError("shm_open(" + name + ") for the intra-host segment", errno);
    // posix_fallocate both sizes the file and reserves its pages: a full /dev/shm fails here
    // with a clear error instead of SIGBUS-ing the first touch of a page later. tmpfs sets the
    // size only once every page is allocated, which the other ranks wait for below.
    int err = posix_fallocate(fd, 0, static_cast<off_t>(seg->mapBytes_));
    if (err != 0) {
      close(fd);
      shm_unlink(name.c_str());
      return errnoError("reserving " + std::to_string(seg->mapBytes_) +
                            " bytes for the intra-host segment (is /dev/shm large enough? "
                            "BRAID_SHM_SEGMENT_BYTES sets its size)",
                        err);
    }
  } else {
    // The name appears before its size is set: mapping it then and reading the header would
    // SIGBUS. Wait until the file has a size (tmpfs sets it once, after reserving every page).
    Backoff backoff;
    for (;;) {
      fd = shm_open(name.c_str(), O_RDWR, 0600);
      if (fd >= 0) {
        struct stat st {};
        if (fstat(fd, &st) == 0 && st.st_size > 0) {
          if (static_cast<size_t>(st.st_size) == seg->mapBytes_) break;
          close(fd);
          return invalidUsage("intra-host segment " + name + " has " +
                              std::to_string(st.st_size) + " bytes, this rank expects " +
                              std::to_string(seg->mapBytes_) +
                              " (BRAID_SHM_SEGMENT_BYTES must be equal on every rank)");
        }
        close(fd);
        fd = -1;
      }
      if (deadline.expired()) {
        return timeoutError("the intra-host segment " + name + " of rank " +
                            std::to_string(localRanks[0]) + " did not appear at full size");
      }
      backoff.pause();
    }
  }
  void* base = mmap(nullptr, seg->mapBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return errnoError("mmap of the intra-host segment", errno);
  seg->base_ = base;
  seg->header_ = static_cast<Header*>(base);
  if (localIndex == 0) {
    seg->header_->secret = secret;
    seg->header_->nlocal = static_cast<uint32_t>(n);
    seg->header_->slotBytes = seg->halfBytes_ * 2;
    seg->header_->magic.store(kMagic, std::memory_order_release);
  } else {
    Backoff backoff;
    while (seg->header_->magic.load(std::memory_order_acquire) != kMagic) {
      if (deadline.expired()) return timeoutError("intra-host segment " + name + " never initialized");
      backoff.pause();
    }
    if (seg->header_->secret != secret || seg->header_->nlocal != n ||
        seg->header_->slotBytes != seg->halfBytes_ * 2) {
      return invalidUsage("intra-host segment " + name +
                          " belongs to another job or was created with other settings "
                          "(BRAID_SHM_SEGMENT_BYTES must be equal on every rank)");
    }
  }
  seg->header_->pids[localIndex].store(static_cast<int32_t>(getpid()), std::memory_order_release);
  seg->header_->bases[localIndex].store(reinterpret_cast<uintptr_t>(base),
                                        std::memory_order_release);
  if (n > 1) BRAID_RETURN_IF_ERROR(seg->agreeSingleCopy(deadline));
  // Once every local rank has mapped the segment, remove its name so that nothing leaks.
  std::string key = storePrefix + "seg_mapped";
  BRAID_ASSIGN_OR_RETURN(int64_t mapped, store->add(key, 1));
  if (localIndex == 0) {
    Backoff backoff;
    while (mapped < static_cast<int64_t>(n)) {
      if (deadline.expired()) return timeoutError("local ranks did not map the intra-host segment");
      backoff.pause();
      BRAID_ASSIGN_OR_RETURN(mapped, store->add(key, 0));
    }
    shm_unlink(name.c_str());
    seg->unlinked_ = true;
  }
  return seg;
}

namespace {
// What a rank publishes in Header::singleCopy (0: not yet).
enum Verdict : int32_t { kReadsAll = 1, kCannot = 2, kReadsAllCrowded = 3 };
// Or'ed into a verdict by a rank with BRAID_SHM_CMA=on.
constexpr int32_t kForcedBit = 8;

// Waits until `word` is nonzero (returned), or fails with a timeout saying `what`.
template <typename T>
Result<T> awaitNonZero(const std::atomic<T>& word, const Deadline& deadline,
                       const std::string& what) {
  Backoff backoff;
  for (;;) {
    const T v = word.load(std::memory_order_acquire);
    if (v != 0) return v;
    if (deadline.expired()) return timeoutError(what);
    backoff.pause();
  }
}
}  // namespace

Status ShmSegment::agreeSingleCopy(const Deadline& deadline) {
  const int n = localSize();
  const std::string mode = paramString("BRAID_SHM_CMA");
  int32_t verdict = mode == "off" ? kCannot : oversubscribed_ ? kReadsAllCrowded : kReadsAll;
  std::string why;
  // Read every peer's copy of the job's secret where that peer mapped the segment: it proves
  // both the permission and that pids[] names the processes that map this segment (a rank in
  // another pid namespace would name some other process, or none).
  for (int i = 0; i < n && verdict != kCannot; ++i) {
    if (i == me_) continue;
    BRAID_ASSIGN_OR_RETURN(uint64_t base,
                           awaitNonZero(header_->bases[i], deadline,
                                        "rank " + std::to_string(localRanks_[i]) +
                                            " did not map the intra-host segment " + name_));
    uint64_t secret = 0;
    Status s = readProcessMemory(header_->pids[i].load(std::memory_order_acquire), &secret,
                                 base + offsetof(Header, secret), sizeof(secret),
                                 "the single-copy probe");
    if (!s.isOk() || secret != header_->secret) {
      verdict = kCannot;
      why = "rank " + std::to_string(localRanks_[me_]) + " cannot read rank " +
            std::to_string(localRanks_[i]) + "'s memory: " +
            (s.isOk() ? std::string("another process answers at its pid") : s.message());
    }
  }
  header_->singleCopy[me_].store(verdict | (mode == "on" ? kForcedBit : 0),
                                 std::memory_order_release);
  bool all = true;
  bool crowded = false;  // any rank's view, so that every rank takes the same threshold
  bool forced = true;    // every rank's
  for (int i = 0; i < n; ++i) {
    BRAID_ASSIGN_OR_RETURN(int32_t v,
                           awaitNonZero(header_->singleCopy[i], deadline,
                                        "rank " + std::to_string(localRanks_[i]) +
                                            " did not finish the intra-host segment's set-up"));
    forced = forced && (v & kForcedBit) != 0;
    v &= ~kForcedBit;
    all = all && v != kCannot;
    crowded = crowded || v == kReadsAllCrowded;
  }
  singleCopyMinBytes_ = !all ? kNoSingleCopy : crowded ? kSingleCopyMinBytesCrowded : kSingleCopyMinBytes;
  singleCopyForced_ = all && forced;
  if (!why.empty()) {
    BRAID_INFO("%s; the all-reduce, all-gather and broadcast on this host copy through the "
               "shared segment instead",
               why.c_str());
  }
  return Status::ok();
}

Status ShmSegment::readPeer(int i, void* dst, uint64_t remote, size_t bytes) const {
  Status s = readProcessMemory(header_->pids[i].load(std::memory_order_relaxed), dst, remote,
                               bytes, "a single-copy collective");
  if (s.isOk()) return s;
  return s.withContext("rank " + std::to_string(localRanks_[me_]) + " reading rank " +
                       std::to_string(localRanks_[i]) + "'s buffer");
}

Status ShmSegment::writePeer(int i, uint64_t remote, const void* src, size_t bytes) const {
  Status s = writeProcessMemory(header_->pids[i].load(std::memory_order_relaxed), remote, src,
                                bytes, "a single-copy collective");
  if (s.isOk()) return s;
  return s.withContext("rank " + std::to_string(localRanks_[me_]) + " writing rank " +
                       std::to_string(localRanks_[i]) + "'s buffer");
}

uint64_t ShmSegment::peerRef(int i, uint64_t g, bool send) const {
  return control(i)->win[g & 1][send ? 0 : 1];
}

ShmSegment::~ShmSegment() {
  releaseWindows();
  if (me_ == 0 && !unlinked_ && !name_.empty()) shm_unlink(name_.c_str());
  if (base_ != nullptr) munmap(base_, mapBytes_);
}

ShmSegment::Control* ShmSegment::control(int i) const {
  return reinterpret_cast<Control*>(static_cast<uint8_t*>(base_) + roundUp(sizeof(Header), 4096) +
                                    static_cast<size_t>(i) * sizeof(Control));
}

uint8_t* ShmSegment::half(int i, int h) const {
  return static_cast<uint8_t*>(base_) + dataOffset_ +
         (static_cast<size_t>(i) * 2 + static_cast<size_t>(h)) * halfBytes_;
}

void ShmSegment::arrive(uint64_t g, uint64_t seq, const Fingerprint& fp) {
  Control* c = control(me_);
  uint64_t* f = c->fp[g & 1];
  f[0] = packFingerprint(fp);
  f[1] = seq;
  f[2] = fp.count;
  c->arrive.store(g, std::memory_order_seq_cst);
  wakeSleepers(c);
}

void ShmSegment::announce(uint64_t seq, const Fingerprint& fp) {
  Control* c = control(me_);
  announcedSeq_ = seq;
  announcedFp_ = fp;
  c->annSeq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  c->annFp.store(packFingerprint(fp), std::memory_order_relaxed);
  c->annCount.store(fp.count, std::memory_order_relaxed);
  c->annSeq.store(seq, std::memory_order_release);
}

Status ShmSegment::checkAnnouncements() const {
  if (announcedSeq_ == 0) return Status::ok();
  const uint64_t mine = packFingerprint(announcedFp_);
  for (int i = 0; i < localSize(); ++i) {
    if (i == me_) continue;
    Control* c = control(i);
    uint64_t seq = c->annSeq.load(std::memory_order_acquire);
    if (seq != announcedSeq_) continue;
    uint64_t fp = c->annFp.load(std::memory_order_relaxed);
    uint64_t count = c->annCount.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (c->annSeq.load(std::memory_order_relaxed) != seq) continue;  // rewritten meanwhile
    if (fp == mine && count == announcedFp_.count) continue;
    return collectiveMismatch(localRanks_[me_], announcedSeq_, announcedFp_, localRanks_[i], seq,
                              unpackFingerprint(fp, count));
  }
  return Status::ok();
}

void ShmSegment::markDone(uint64_t g) {
  Control* c = control(me_);
  c->done.store(g, std::memory_order_seq_cst);
  wakeSleepers(c);
}

// Pairs with waitFlag: the waiter counts itself in sleepers, re-checks the flag, then sleeps on its
// low 32 bits; the owner stores the flag, then reads sleepers (both seq_cst), so either the waiter
// sees the new value or the owner sees the sleeper.
void ShmSegment::wakeSleepers(Control* c) {
  if (c->sleepers.load(std::memory_order_seq_cst) == 0) return;
  futexWakeAll(&c->arrive);
  futexWakeAll(&c->done);
}

void ShmSegment::raiseAbort(int code, int originRank) {
  uint64_t expected = 0;
  uint64_t word = (uint64_t{static_cast<uint32_t>(code)} << 32) | static_cast<uint32_t>(originRank + 1);
  header_->abortWord.compare_exchange_strong(expected, word, std::memory_order_acq_rel);
}

Status ShmSegment::abortStatus() const {
  uint64_t w = header_->abortWord.load(std::memory_order_acquire);
  if (w == 0) return Status::ok();
  int origin = static_cast<int>(w & 0xffffffffu) - 1;
  Code code = static_cast<Code>(w >> 32);
  return remoteError("rank " + std::to_string(localRanks_[me_]) + ": rank " +
                     std::to_string(origin) + " aborted the communicator (" + codeName(code) +
                     "); see that rank's error for the cause");
}

Status ShmSegment::waitArrived(uint64_t g, bool checkFingerprints) {
  return waitFlag(true, g, checkFingerprints);
}

Status ShmSegment::waitArrivedFrom(int i, uint64_t g, bool checkFingerprints) {
  return waitFlag(true, g, checkFingerprints, i);
}

Status ShmSegment::waitDone(uint64_t g) { return waitFlag(false, g, false); }

Status ShmSegment::waitDoneFrom(int i, uint64_t g) { return waitFlag(false, g, false, i); }

int ShmSegment::claim(uint64_t g) {
  uint64_t cur = header_->claimWord.load(std::memory_order_acquire);
  const uint64_t mine = (g << 8) | static_cast<uint64_t>(me_);
  while ((cur >> 8) < g) {
    if (header_->claimWord.compare_exchange_weak(cur, mine, std::memory_order_acq_rel,
                                                 std::memory_order_acquire)) {
      return me_;
    }
  }
  return static_cast<int>(cur & 0xff);
}

Status ShmSegment::waitFlag(bool arriveFlag, uint64_t g, bool checkFingerprints, int only) {
  int n = localSize();
  for (int i = 0; i < n; ++i) {
    if (i == me_ || (only >= 0 && i != only)) continue;
    Control* c = control(i);
    std::atomic<uint64_t>& flag = arriveFlag ? c->arrive : c->done;
    // Spin while the peer is likely close (5 us), then yield until BRAID_SHM_SPIN_US (1 ms: as
    // long as the transports' Backoff spins and yields), then sleep on the flag so that a
    // descheduled peer can have this core. A futex wake-up costs 20-90 us on the 2-core VM:
    // sleeping after 5 us, the 2-rank all-reduce took 65 us at 32 KiB and 187 us at 256 KiB;
    // sleeping after 1 ms, 7 and 43 us (braid-perf --rounds 3). With more local ranks
    // than cores, yield instead of spinning (the peer may be waiting for this very core), for up
    // to 100 us: measured with 4 ranks on 2 cores, 8 B takes 3.2 us yielding 100 us, 4.5 us
    // yielding 20 us, and 23 us going to the futex at once (a futex wake-up costs more here
    // than a yield).
    // The clock is read only every 64th spin (every 8th yield with more ranks than cores), and
    // not at all when the flag is up already: with 8 ranks on 2 cores the reads took 8% of the
    // cycles passing 8-byte all-reduces (perf record), more than the waits' own user-space
    // part, and every cycle here is one a peer that has yet to arrive does not get; with 2
    // ranks, a read on entry was 7% of a 32-byte all-reduce's cycles. The spin and yield
    // phases are timed from that first read (at most 64 spins late: about a microsecond).
    uint64_t start = 0;
    uint64_t spinUntil = 0;
    uint64_t lastCheck = 0;
    uint32_t rounds = 0;
    bool stallReported = false;
    bool sleeping = false;  // past the spin/yield phase: every round sleeps on the futex
    while (flag.load(std::memory_order_acquire) < g) {
      ++rounds;
      if (oversubscribed_ && !sleeping && (rounds & 7) != 0) {
        sched_yield();
        continue;
      }
      if (!oversubscribed_ && (rounds & 63) != 0) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
        continue;
      }
      const uint64_t now = nowNs();
      if (start == 0) {
        start = lastCheck = now;
        spinUntil = now + (oversubscribed_ ? 100000ull : spinNs_);
      }
      if (now < spinUntil) {
        // Past the first 5 us, yield: another thread of this process (a Bucketer's engine
        // copying results back, the framework's compute) may want this core.
        if (oversubscribed_ || now - start > 5000) sched_yield();
      } else {
        sleeping = true;
        c->sleepers.fetch_add(1, std::memory_order_seq_cst);
        const uint64_t v = flag.load(std::memory_order_seq_cst);
        if (v < g) futexWait(&flag, static_cast<uint32_t>(v), 1000000ull);
        c->sleepers.fetch_sub(1, std::memory_order_seq_cst);
      }
      if (now - lastCheck < 1000000ull) continue;
      lastCheck = now;
      BRAID_RETURN_IF_ERROR(abortStatus());
      BRAID_RETURN_IF_ERROR(checkAnnouncements());
      int32_t pid = header_->pids[i].load(std::memory_order_acquire);
      if (processGone(pid)) {
        // It may have raised the flag and left since the flag was last read (the futex wake-up
        // of its last collective): only a flag still low after its exit is an error.
        if (flag.load(std::memory_order_acquire) >= g) break;
        return remoteError("rank " + std::to_string(localRanks_[me_]) + ": peer rank " +
                           std::to_string(localRanks_[i]) + " (pid " + std::to_string(pid) +
                           ") exited during a collective");
      }
      if (stallHook_.due(now - start, &stallReported)) {
        stalledPeers_.assign(1, localRanks_[i]);
        stallHook_.run(stalledPeers_);
      }
      if (now - start > static_cast<uint64_t>(timeoutMs_) * 1000000ull) {
        stalledPeers_.assign(1, localRanks_[i]);
        return timeoutError("rank " + std::to_string(localRanks_[me_]) + ": peer rank " +
                            std::to_string(localRanks_[i]) + " did not reach the collective within " +
                            std::to_string(timeoutMs_) +
                            " ms (stalled, or not calling it? raise BRAID_TIMEOUT_MS if it is slow)");
      }
    }
    if (stallReported) stalledPeers_.clear();  // it arrived after all
    if (checkFingerprints) {
      const uint64_t* mine = control(me_)->fp[g & 1];
      const uint64_t* theirs = c->fp[g & 1];
      if (mine[0] != theirs[0] || mine[1] != theirs[1] || mine[2] != theirs[2]) {
        return collectiveMismatch(localRanks_[me_], mine[1], unpackFingerprint(mine[0], mine[2]),
                                  localRanks_[i], theirs[1],
                                  unpackFingerprint(theirs[0], theirs[2]));
      }
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Shared windows

namespace {
// A window reference: the window's id above bit 40, the offset in it below.
constexpr int kRefOffsetBits = 40;
constexpr uint64_t kRefOffsetMask = (uint64_t{1} << kRefOffsetBits) - 1;
constexpr uint32_t kMaxWindowId = (1u << 23) - 1;
constexpr uint64_t kAllocFailed = ~uint64_t{0};
}  // namespace

std::string ShmSegment::windowName(uint32_t id, int localIndex) const {
  return name_ + ".w" + std::to_string(id) + "." + std::to_string(localIndex);
}

void ShmSegment::unmapWindow(const Window& w) {
  for (size_t i = 0; i < w.base.size(); ++i) {
    if (w.base[i] != nullptr) munmap(w.base[i], windowMapBytes(w.bytes[i]));
  }
}

void ShmSegment::releaseWindows() {
  for (const Window& w : windows_) unmapWindow(w);
  windows_.clear();
}

Status ShmSegment::exchangeWord(uint64_t word, uint64_t seq, const Fingerprint& fp,
                                std::vector<uint64_t>* words) {
  const uint64_t g = nextGeneration();
  setWindowRefs(g, word, 0);
  arrive(g, seq, fp);
  BRAID_RETURN_IF_ERROR(waitArrived(g, true));
  words->assign(static_cast<size_t>(localSize()), 0);
  for (int i = 0; i < localSize(); ++i) (*words)[i] = control(i)->win[g & 1][0];
  return Status::ok();
}

Result<void*> ShmSegment::allocWindow(uint32_t id, size_t bytes, uint64_t seq,
                                      const Fingerprint& fp) {
  const size_t pageBytes = windowMapBytes(bytes);
  Window w;
  w.id = id;
  w.base.assign(static_cast<size_t>(localSize()), nullptr);
  w.bytes.assign(static_cast<size_t>(localSize()), 0);
  // This rank's part: reserved (a full /dev/shm fails here, not with a SIGBUS later) and mapped.
  std::string failure;
  const std::string mine = windowName(id, me_);
  if (id == 0 || id > kMaxWindowId || pageBytes > kRefOffsetMask) {
    failure = pageBytes > kRefOffsetMask ? "more than 1 TiB" : "too many shared windows";
  } else {
    shm_unlink(mine.c_str());  // a leftover of a crashed job with the same name
    int fd = shm_open(mine.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    int err = fd < 0 ? errno : posix_fallocate(fd, 0, static_cast<off_t>(pageBytes));
    void* p = MAP_FAILED;
    if (err == 0) {
      p = mmap(nullptr, pageBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
      if (p == MAP_FAILED) err = errno;
    }
    if (fd >= 0) close(fd);
    if (err != 0) {
      failure = std::string(std::strerror(err)) + " (is /dev/shm large enough?)";
      shm_unlink(mine.c_str());
    } else {
      w.base[me_] = static_cast<uint8_t*>(p);
      w.bytes[me_] = bytes;  // as asked (sharedPart reports it); mapped in whole pages
    }
  }
  // Every rank learns whether every part exists, then maps the others' parts.
  std::vector<uint64_t> words;
  Status s = exchangeWord(failure.empty() ? bytes : kAllocFailed, seq, fp, &words);
  if (!s.isOk()) {  // a peer stalled or left: the communicator fails
    if (w.base[me_] != nullptr) shm_unlink(mine.c_str());
    unmapWindow(w);
    return s;
  }
  for (int i = 0; s.isOk() && i < localSize(); ++i) {
    if (words[i] == kAllocFailed) {
      s = systemError("allocating a shared window of " + std::to_string(bytes) +
                      " bytes: local rank " + std::to_string(i) + " (rank " +
                      std::to_string(localRanks_[i]) + ") could not" +
                      (i == me_ ? ": " + failure : " (see its error)"));
    }
  }
  for (int i = 0; s.isOk() && i < localSize(); ++i) {
    if (i == me_) continue;
    const std::string theirs = windowName(id, i);
    int fd = shm_open(theirs.c_str(), O_RDWR, 0600);
    void* p =
        fd < 0 ? MAP_FAILED
               : mmap(nullptr, windowMapBytes(words[i]), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
      s = errnoError(
          "mapping rank " + std::to_string(localRanks_[i]) + "'s shared window " + theirs, errno);
    } else {
      w.base[i] = static_cast<uint8_t*>(p);
      w.bytes[i] = words[i];
    }
    if (fd >= 0) close(fd);
  }
  // Once every rank mapped every part (or gave up), the names go: nothing leaks.
  std::vector<uint64_t> mapped;
  Status t = exchangeWord(s.isOk() ? 1 : kAllocFailed, seq, fp, &mapped);
  if (w.base[me_] != nullptr) shm_unlink(mine.c_str());
  for (int i = 0; s.isOk() && t.isOk() && i < localSize(); ++i) {
    if (mapped[i] == kAllocFailed) {
      s = systemError("allocating a shared window: rank " + std::to_string(localRanks_[i]) +
                      " could not map the others' parts (see its error)");
    }
  }
  if (!s.isOk() || !t.isOk()) {
    unmapWindow(w);
    return !t.isOk() ? t : s;
  }
  windows_.push_back(std::move(w));
  return static_cast<void*>(windows_.back().base[me_]);
}

uint32_t ShmSegment::windowId(const void* ptr) const {
  for (const Window& w : windows_) {
    if (w.base[me_] == ptr) return w.id;
  }
  return 0;
}

bool ShmSegment::windowPart(const void* mine, int rank, uint8_t** base, size_t* bytes) const {
  const auto local = std::find(localRanks_.begin(), localRanks_.end(), rank);
  if (local == localRanks_.end()) return false;
  const size_t i = static_cast<size_t>(local - localRanks_.begin());
  for (const Window& w : windows_) {
    if (w.base[me_] != mine) continue;
    *base = w.base[i];
    *bytes = w.bytes[i];
    return true;
  }
  return false;
}

void ShmSegment::freeWindow(uint32_t id) {
  auto it =
      std::find_if(windows_.begin(), windows_.end(), [&](const Window& w) { return w.id == id; });
  if (it == windows_.end()) return;
  unmapWindow(*it);
  windows_.erase(it);
}

uint64_t ShmSegment::windowRef(const void* p, size_t bytes) const {
  const auto* b = static_cast<const uint8_t*>(p);
  for (const Window& w : windows_) {
    const uint8_t* base = w.base[me_];
    if (b >= base && bytes <= w.bytes[me_] &&
        static_cast<size_t>(b - base) <= w.bytes[me_] - bytes) {
      return (uint64_t{w.id} << kRefOffsetBits) | static_cast<uint64_t>(b - base);
    }
  }
  return 0;
}

void ShmSegment::setWindowRefs(uint64_t g, uint64_t send, uint64_t recv) {
  Control* c = control(me_);
  c->win[g & 1][0] = send;
  c->win[g & 1][1] = recv;
}

const uint8_t* ShmSegment::peerWindow(int i, uint64_t g, bool send, size_t bytes) const {
  const uint64_t ref = control(i)->win[g & 1][send ? 0 : 1];
  const uint32_t id = static_cast<uint32_t>(ref >> kRefOffsetBits);
  const uint64_t off = ref & kRefOffsetMask;
  for (const Window& w : windows_) {
    if (w.id != id) continue;
    if (bytes > w.bytes[i] || off > w.bytes[i] - bytes) return nullptr;
    return w.base[i] + off;
  }
  return nullptr;
}

}  // namespace braid::detail
