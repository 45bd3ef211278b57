#include "collectives/shm_segment.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
};

struct ShmSegment::Control {
  // The announced operation: seq (0 while being written), packed fingerprint, count.
  alignas(kLine) std::atomic<uint64_t> annSeq;
  std::atomic<uint64_t> annFp;
  std::atomic<uint64_t> annCount;
  alignas(kLine) std::atomic<uint64_t> arrive;
  alignas(kLine) std::atomic<uint64_t> done;
  // Fingerprint per half: collective|dtype|op|root, seq, count.
  alignas(kLine) uint64_t fp[2][3];
  uint8_t pad[kLine - 48];
  // Ranks asleep (futex) on this rank's arrive or done flag; the owner wakes them after a store.
  alignas(kLine) std::atomic<uint32_t> sleepers;
};
static_assert(sizeof(ShmSegment::Control) == 5 * 64, "control block is five cache lines");

namespace {
size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }
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

ShmSegment::~ShmSegment() {
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
    const uint64_t start = nowNs();
    const uint64_t spinUntil = start + (oversubscribed_ ? 100000ull : spinNs_);
    uint64_t lastCheck = start;
    uint32_t rounds = 0;
    bool stallReported = false;
    while (flag.load(std::memory_order_acquire) < g) {
      if (!oversubscribed_ && (++rounds & 63) != 0) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
        continue;
      }
      const uint64_t now = nowNs();
      if (now < spinUntil) {
        // Past the first 5 us, yield: another thread of this process (a Bucketer's engine
        // copying results back, the framework's compute) may want this core.
        if (oversubscribed_ || now - start > 5000) sched_yield();
      } else {
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

}  // namespace braid::detail
