// The bucket engine: the one thread per Bucketer that issues collectives.
//
// Step schedule (every rank, same order): bucket 0, 1, ..., nb-1 each all-reduced in place as
// soon as it is complete, in pieces of at most pieceBytes (BRAID_BUCKET_PIECE_BYTES; one
// all-reduce each), each piece launched while fewer than maxInFlight pieces are still queued on
// the communicator (the bounded window: a full window holds back the next launch until the oldest
// completes; markReady never blocks). The last bucket, when nothing is queued before it and it
// goes in one piece, is a blocking call instead, which the communicator runs on the engine
// thread: the tail saves the hand-off to the communicator's worker and back (ResNet-50 in
// braid-train-bench: exposed 0.26-0.30 → 0.08-0.15 ms). Results are copied back to the
// callers' gradients piece by piece, while later pieces are on the wire: so only the last
// piece's copy back stays in the step's tail, not the whole last bucket's (BERT's 94 MB word
// embedding: a copy of ~10 ms on the 2-core VM, where no core is free to overlap it, so pieces are
// off by default: 0 = one piece per bucket). In copy mode a bucket of one gradient is neither
// copied in nor back: it is all-reduced where the caller keeps that gradient
// (Bucketer::Impl::reducesInPlace), so a large last gradient that the layout isolates leaves only
// its all-reduce in the tail. Then one all-gather of R = 2·nb + ⌈n/64⌉ u64 per rank carries each
// rank's (start, done) timestamps per bucket and its used-parameter bitmap: skew and unused
// parameters come from it, no barrier is added. Cost ≈ α + p·R·8·β (one small message; the ranks
// are already aligned by the last bucket). Once, after the first communicating step: a broadcast of
// 2n u32 from rank 0 with the rebuilt layout.
//
// The tail hand-off (Impl::Tail): while the engine waits for the step's last bucket with
// nothing in flight, it offers the rest of the step; finishStep, called before the engine has
// woken up (a futex wake-up of a thread whose core went idle: 20-90 us on the 2-core VM), takes
// it and runs the same schedule, metrics, exchange and rebuild on the caller's thread. ResNet-50
// in braid-train-bench --ranks 2 -m auto -n 20, four alternated pairs: tail 0.06-0.07 ms
// against 0.08-0.13. The mark that completes the offered bucket does not wake the engine, which
// polls every kTailPollMs while it offers: on the 2-core VM that wake-up competes for the cores
// with both ranks' tails (with it, one rank's step ended 48-99 us after its peer's, past the
// exchange, in 8 of 20 traced steps). Eight alternated runs, -n 10: exposed_per_floor
// 0.61-1.66 (median 1.09) against 1.19-2.20 (median 1.58).
//
// Compressed buckets (a codec for the bucket's size class, float32 only): when bucket k is
// complete and nothing is queued, the engine runs the codec's allReduce (1–3 blocking
// collectives: compression/codec.h) on the bucket in place, then copies it out. So a compressed
// bucket never shares the window with another collective, and encode/decode run on the engine
// thread, off the caller's compute path (on a CPU box they compete with it for cores). Uncompressed
// buckets of the same step still use the window.
//
// Clocks: CLOCK_MONOTONIC (core/clock.h) is one clock for every process of a host, so on one host
// skew is max − min of the ranks' start times. Across hosts the clocks are unrelated; skew is then
// estimated as max − min of how long each rank waited inside the collective (done − start), which
// needs no common clock and is off by at most the spread of completion times (about one message
// latency).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "braid/comm.hpp"
#include "bucketing/bucketer_impl.h"
#include "core/affinity.h"
#include "core/clock.h"
#include "core/copy.h"
#include "core/log.h"
#include "core/trace.h"

namespace braid {

namespace {
// How often the engine looks at an offered tail that nothing woke it for (Impl::Tail): a
// caller that takes longer than this from its last mark to finishStep gets its tail reduced by
// the engine, at most this much later than a wake-up would have started it.
constexpr int kTailPollMs = 2;

double msBetween(uint64_t from, uint64_t to) {
  return to > from ? static_cast<double>(to - from) * 1e-6 : 0.0;
}
}  // namespace

void Bucketer::Impl::engineLoop() {
  placeOwnThread("braid-engine");
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      engineCv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

Status Bucketer::Impl::runOnEngine(const std::function<Status()>& fn, const char* what) {
  struct Outcome {
    bool done = false;
    Status status;
  };
  auto outcome = std::make_shared<Outcome>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back([this, fn, outcome] {
      Status s = fn();
      std::lock_guard<std::mutex> l(mu_);
      outcome->status = s;
      outcome->done = true;
      doneCv_.notify_all();
    });
  }
  engineCv_.notify_all();
  std::unique_lock<std::mutex> lock(mu_);
  if (!doneCv_.wait_for(lock, std::chrono::milliseconds(2 * timeoutMs_ + 5000),
                        [&outcome] { return outcome->done; })) {
    return timeoutError(std::string("Bucketer ") + what + ": the engine did not finish in time");
  }
  return outcome->status;
}

// Registrations must agree: the number of parameters (all-gather), then a hash per parameter
// reduced with MIN and MAX; the first index where they differ (or the shorter list ends) is
// reported with every rank's view of it (one more all-gather). Every rank takes the same branches
// because every decision is made on reduced values.
Status Bucketer::Impl::verifyRegistrations() {
  const int p = comm_->size(), rank = comm_->rank();
  uint64_t n = specs_.size();
  std::vector<uint64_t> counts(static_cast<size_t>(p));
  BRAID_RETURN_IF_ERROR(comm_->allGather(&n, counts.data(), 1, DataType::kUint64)
                            .withContext("Bucketer::finalize: exchanging parameter counts"));
  const uint64_t nmin = *std::min_element(counts.begin(), counts.end());
  const uint64_t nmax = *std::max_element(counts.begin(), counts.end());
  uint64_t first = nmin;
  if (nmin > 0) {
    std::vector<uint64_t> h(nmin), lo(nmin), hi(nmin);
    for (size_t i = 0; i < nmin; ++i) h[i] = detail::hashParam(specs_[i]);
    BRAID_RETURN_IF_ERROR(
        comm_->allReduce(h.data(), lo.data(), nmin, DataType::kUint64, ReduceOp::kMin)
            .withContext("Bucketer::finalize: comparing parameter hashes"));
    BRAID_RETURN_IF_ERROR(
        comm_->allReduce(h.data(), hi.data(), nmin, DataType::kUint64, ReduceOp::kMax)
            .withContext("Bucketer::finalize: comparing parameter hashes"));
    for (size_t i = 0; i < nmin; ++i) {
      if (lo[i] != hi[i]) {
        first = i;
        break;
      }
    }
  }
  if (first == nmin && nmin == nmax) return Status::ok();
  struct Record {
    uint64_t present;
    uint64_t count;
    uint32_t id;
    int32_t type;
    char name[48];
  };
  Record mine{};
  if (first < specs_.size()) {
    const detail::ParamSpec& s = specs_[first];
    mine.present = 1;
    mine.count = s.count;
    mine.id = s.id;
    mine.type = static_cast<int32_t>(s.type);
    std::strncpy(mine.name, s.name.c_str(), sizeof(mine.name) - 1);
  }
  std::vector<Record> all(static_cast<size_t>(p));
  BRAID_RETURN_IF_ERROR(comm_->allGather(&mine, all.data(), sizeof(Record), DataType::kUint8)
                            .withContext("Bucketer::finalize: exchanging the differing parameter"));
  std::string msg = "registrations differ across ranks at parameter #" + std::to_string(first) +
                    " (registration order):";
  for (int r = 0; r < p && r < 8; ++r) {
    const Record& x = all[static_cast<size_t>(r)];
    msg += " rank " + std::to_string(r) + " has ";
    if (x.present == 0) {
      msg += "nothing (" + std::to_string(counts[static_cast<size_t>(r)]) + " parameters);";
    } else {
      msg += "'" + std::string(x.name, strnlen(x.name, sizeof(x.name))) + "' (id " +
             std::to_string(x.id) + ", " + std::to_string(x.count) + " x " +
             dataTypeName(static_cast<DataType>(x.type)) + ");";
    }
  }
  msg += " register the same parameters in the same order on every rank";
  if (rank == 0) BRAID_ERROR("%s", msg.c_str());  // once per job; every rank returns it
  return invalidUsage(msg);
}

// The bucket cost model for automatic sizing. A bucket costs the engine's wake-up and hand-over
// (20 us), the all-reduce as the selector predicts it (its calibrated model knows the algorithm
// it will pick at each size and prices data beyond the cache: a 94 MB bucket runs at a third of
// the speed of a 4 MiB one on the test VM), and the copy of the result back to the gradients,
// timed here out of cache. Without a prediction (one rank) a + b·c fitted to timed all-reduces of
// 1 KiB and 4 MiB (f32) stands in. The prediction is the same on every rank, so every rank takes
// the same branch and runs the same calls; only rank 0's figures are used (it decides the layout).
Status Bucketer::Impl::calibrate() {
  constexpr double kEngineNs = 20000.0;
  Communicator* comm = comm_;
  model_.window = opts_.maxInFlight;
  model_.pieceBytes = pieceBytes_;
  if (comm->predictedUs(Collective::kAllReduce, size_t{1} << 20) > 0) {
    model_.aNs = kEngineNs;
    model_.collectiveNs = [comm](size_t bytes) {
      return 1e3 * std::max(0.0, comm->predictedUs(Collective::kAllReduce, bytes));
    };
    if (!opts_.zeroCopy) {
      // Twice 32 MiB: beyond the last-level cache of most machines, as large buckets are.
      const size_t n = size_t{32} << 20;
      std::vector<uint8_t> from(n, 1), to(n, 0);
      double best = 1e30;
      for (int i = 0; i < 2; ++i) {
        const uint64_t t0 = nowNs();
        copyBytes(to.data(), from.data(), n);
        best = std::min(best, static_cast<double>(nowNs() - t0));
      }
      model_.copyNsPerByte = best / static_cast<double>(n);
    }
    BRAID_INFO("bucketer calibration: buckets priced by the selector's model + %.0f us, copy "
               "back %.2f GB/s",
               kEngineNs * 1e-3, model_.copyNsPerByte > 0 ? 1.0 / model_.copyNsPerByte : 0.0);
    return Status::ok();
  }
  const size_t smallCount = 256, largeCount = size_t{1} << 20;
  std::vector<float> buf(largeCount, 1.0f);
  auto timeIt = [&](size_t count, int reps, double* medianNs) -> Status {
    std::vector<double> t;
    for (int i = 0; i < reps + 1; ++i) {
      const uint64_t t0 = nowNs();
      BRAID_RETURN_IF_ERROR(
          comm_->allReduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kMax));
      if (i > 0) t.push_back(static_cast<double>(nowNs() - t0));
    }
    std::sort(t.begin(), t.end());
    *medianNs = t[t.size() / 2];
    return Status::ok();
  };
  double small = 0, large = 0;
  BRAID_RETURN_IF_ERROR(timeIt(smallCount, 7, &small).withContext("Bucketer calibration"));
  BRAID_RETURN_IF_ERROR(timeIt(largeCount, 3, &large).withContext("Bucketer calibration"));
  model_.aNs = small + kEngineNs;
  model_.nsPerByte =
      std::max(0.01, (large - small) / static_cast<double>((largeCount - smallCount) * 4));
  BRAID_INFO("bucketer calibration: a = %.1f us, %.3f ns/byte (%.2f GB/s)", model_.aNs * 1e-3,
             model_.nsPerByte, 1.0 / model_.nsPerByte);
  return Status::ok();
}

std::string Bucketer::Impl::bucketWhere(size_t k) const {
  const Bucket& b = *buckets_[k];
  return "bucket " + std::to_string(k) + " (" + std::to_string(b.params.size()) +
         " parameters, " + std::to_string(b.bytes) + " bytes, first " +
         paramLabel(b.params.front()) + ") on rank " + std::to_string(comm_->rank());
}

void Bucketer::Impl::copyOut(const Bucket& b, size_t from, size_t to) {
  if (opts_.zeroCopy || b.live != b.data) return;
  for (int idx : b.params) {
    auto* dst = static_cast<uint8_t*>(userPtr_[static_cast<size_t>(idx)]);
    const size_t off = offsetOf_[static_cast<size_t>(idx)];
    const size_t lo = std::max(off, from);
    const size_t hi = std::min(off + specs_[static_cast<size_t>(idx)].bytes(), to);
    if (dst != nullptr && lo < hi) copyBytes(dst + (lo - off), b.data + lo, hi - lo);
  }
}

void Bucketer::Impl::runStep(uint64_t step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tail_ = Tail::kNone;
  }
  run_ = StepRun();
  run_.step = step;
  run_.metrics.buckets.resize(buckets_.size());
  // The codecs' step index: communicating steps only, the same count on every rank.
  if (codec_ != nullptr) codec_->setStep(commSteps_);
  if (smallCodec_ != nullptr) smallCodec_->setStep(commSteps_);
  ++commSteps_;
  if (advanceStep(true)) completeStep();
}

bool Bucketer::Impl::advanceStep(bool engine) {
  StepRun& r = run_;
  Status& st = r.st;
  const size_t nb = buckets_.size();
  while (st.isOk() && (r.next < nb || !r.inflight.empty())) {
    const bool nextReady =
        r.next < nb && buckets_[r.next]->pending.load(std::memory_order_acquire) == 0;
    // A compressed bucket runs the codec's blocking collectives here, once every earlier
    // asynchronous all-reduce has completed (one issuer, one order on the communicator).
    if (nextReady && r.inflight.empty() && buckets_[r.next]->codec != nullptr) {
      Bucket& b = *buckets_[r.next];
      b.launchNs = nowNs();
      b.startNs = std::max(b.launchNs, r.prevDone);
      Codec& c = *b.codec;
      const uint64_t wire0 = c.stats().wireBytes;
      Status s = reduceCompressed(b);
      b.doneNs = nowNs();
      r.prevDone = b.doneNs;
      b.wireBytes = c.stats().wireBytes - wire0;
      if (!s.isOk()) {
        st = s.withContext("step " + std::to_string(r.step) + ", codec " + c.info().name + ", " +
                           bucketWhere(r.next));
        comm_->abort(st.message());
        break;
      }
      copyOut(b, 0, b.bytes);
      noteBucketDone(r.next);
      ++r.next;
      continue;
    }
    if (nextReady && r.inflight.size() < static_cast<size_t>(opts_.maxInFlight) &&
        buckets_[r.next]->codec == nullptr) {
      Bucket& b = *buckets_[r.next];
      const size_t es = dataTypeSize(b.type);
      const size_t per = pieceBytes_ > 0 ? std::max<size_t>(1, pieceBytes_ / es) : b.count;
      const size_t lo = r.nextLo, hi = std::min(b.count, lo + per);
      if (r.inflight.empty() && r.next + 1 == nb && lo == 0 && hi == b.count) {
        // The step's last bucket in one piece, nothing queued before it and nothing left to
        // launch after it: a blocking call, which the communicator runs on this thread, so the
        // tail saves the hand-offs to its worker and back.
        b.launchNs = nowNs();
        b.startNs = std::max(b.launchNs, r.prevDone);
        b.wireBytes = b.bytes;
        Status s = comm_->allReduce(b.live, b.live, b.count, b.type, op_);
        b.doneNs = nowNs();
        r.prevDone = b.doneNs;
        if (!s.isOk()) {
          st = s.withContext("step " + std::to_string(r.step) + ", " + bucketWhere(r.next));
          break;
        }
        copyOut(b, 0, b.bytes);
        noteBucketDone(r.next);
        ++r.next;
        continue;
      }
      if (lo == 0) {
        b.launchNs = nowNs();
        b.wireBytes = b.bytes;
      }
      auto w = comm_->allReduceAsync(b.live + lo * es, b.live + lo * es, hi - lo, b.type, op_);
      if (!w.isOk()) {
        st = w.status().withContext("step " + std::to_string(r.step) + ", " + bucketWhere(r.next));
        break;
      }
      r.inflight.push_back(Piece{r.next, lo, hi, std::move(*w)});
      r.nextLo = hi;
      if (hi == b.count) {
        ++r.next;
        r.nextLo = 0;
      }
      continue;
    }
    if (!r.inflight.empty()) {
      const Piece piece = std::move(r.inflight.front());
      r.inflight.pop_front();
      Status s = piece.work->wait();
      Bucket& b = *buckets_[piece.bucket];
      const uint64_t now = nowNs();
      if (piece.lo == 0) b.startNs = std::max(b.launchNs, r.prevDone);
      if (piece.hi == b.count) b.doneNs = now;
      r.prevDone = now;
      if (!s.isOk()) {
        st = s.withContext("step " + std::to_string(r.step) + ", " + bucketWhere(piece.bucket));
        break;
      }
      const size_t es = dataTypeSize(b.type);
      copyOut(b, piece.lo * es, piece.hi == b.count ? b.bytes : piece.hi * es);
      if (piece.hi == b.count) noteBucketDone(piece.bucket);
      continue;
    }
    // Nothing in flight and bucket `next` incomplete: wait for the thread that completes it.
    // Waiting for the step's last bucket, the engine offers the rest of the step to finishStep
    // (Tail): a caller that arrives first runs it on its own thread, and this thread leaves the
    // step without touching it again, at its next wake-up (the caller does not wake it).
    std::unique_lock<std::mutex> lock(mu_);
    const size_t waitFor = r.next;
    const bool offer = engine && waitFor + 1 == nb;
    if (offer) tail_ = Tail::kOffered;
    const auto pred = [&] {
      return stop_ || (offer && tail_ == Tail::kCaller) ||
             buckets_[waitFor]->pending.load(std::memory_order_acquire) == 0;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);
    // The mark that completes an offered bucket does not wake this thread: it polls instead,
    // so a caller that reaches finishStep within kTailPollMs of its last mark runs the tail
    // with no wake-up landing in it, and one that does not is late by at most kTailPollMs.
    bool ready = pred();
    while (!ready && std::chrono::steady_clock::now() < deadline) {
      const auto poll = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTailPollMs);
      ready = engineCv_.wait_until(lock, offer ? std::min(deadline, poll) : deadline, pred);
    }
    if (offer) {
      if (tail_ == Tail::kCaller) return false;
      tail_ = Tail::kEngine;
    }
    if (stop_) {
      st = internalError("the Bucketer was destroyed during step " + std::to_string(r.step));
    } else if (!ready) {
      std::string missing;
      for (int idx : buckets_[waitFor]->params) {
        if (marked_[static_cast<size_t>(idx)].load() == 0) {
          missing = paramLabel(idx);
          break;
        }
      }
      st = timeoutError("step " + std::to_string(r.step) + ": " + bucketWhere(waitFor) +
                        " not complete after " + std::to_string(timeoutMs_) + " ms; parameter " +
                        missing + " was never marked ready (BRAID_TIMEOUT_MS)");
      lock.unlock();
      comm_->abort(st.message());  // peers waiting in this bucket's collective learn it now
    }
  }
  // Buffers of queued collectives must outlive them, also after an error.
  while (!r.inflight.empty()) {
    (void)r.inflight.front().work->wait();
    r.inflight.pop_front();
  }
  return true;
}

void Bucketer::Impl::noteBucketDone(size_t k) {
  const Bucket& b = *buckets_[k];
  BucketMetrics& bm = run_.metrics.buckets[k];
  bm.bytes = b.bytes;
  bm.wireBytes = b.wireBytes;
  bm.codec = b.codec != nullptr ? b.codec->info().name : "none";
  bm.params = static_cast<uint32_t>(b.params.size());
  uint64_t ready = 0;  // its last gradient (written before the count reached zero)
  for (int idx : b.params) ready = std::max(ready, readyNs_[static_cast<size_t>(idx)]);
  bm.readyMs = msBetween(stepT0_, ready);
  bm.startMs = msBetween(stepT0_, b.startNs);
  bm.doneMs = msBetween(stepT0_, b.doneNs);
  run_.metrics.bytes += b.bytes;
  run_.metrics.wireBytes += b.wireBytes;
  // BRAID_TRACE_FILE: the bucket from its last gradient's readiness (this rank's arrival: the
  // engine may launch it later, behind earlier buckets) to its completion.
  if (detail::Tracer* t = detail::Tracer::active()) {
    t->complete("bucket " + std::to_string(k), "bucket", detail::Tracer::kBuckets,
                std::min(ready, b.doneNs), b.doneNs,
                "\"bucket\":" + std::to_string(k) + ",\"step\":" + std::to_string(run_.step) +
                    ",\"bytes\":" + std::to_string(b.bytes) +
                    ",\"params\":" + std::to_string(b.params.size()) +
                    ",\"launch_after_ready_ms\":" +
                    std::to_string(msBetween(std::min(ready, b.launchNs), b.launchNs)));
  }
}

void Bucketer::Impl::completeStep() {
  StepMetrics m;
  Status st = run_.st;
  if (st.isOk()) {
    m = std::move(run_.metrics);
    st = exchangeStepInfo(&m);
  }
  if (st.isOk() && rebuildPending_) st = rebuildNow(&m);
  if (!st.isOk()) BRAID_ERROR("bucketer: %s", st.toString().c_str());
  std::lock_guard<std::mutex> lock(mu_);
  stepResult_ = std::move(m);
  stepStatus_ = st;
  stepDone_.store(true, std::memory_order_release);
  doneCv_.notify_all();
}

Status Bucketer::Impl::exchangeStepInfo(StepMetrics* m) {
  const int p = comm_->size();
  const size_t nb = buckets_.size(), n = specs_.size();
  const size_t words = (n + 63) / 64, per = 2 * nb + words;
  std::vector<uint64_t> mine(per, 0), all(per * static_cast<size_t>(p), 0);
  for (size_t k = 0; k < nb; ++k) {
    mine[2 * k] = buckets_[k]->startNs;
    mine[2 * k + 1] = buckets_[k]->doneNs;
  }
  for (size_t i = 0; i < n; ++i) {
    if (used_[i]) mine[2 * nb + i / 64] |= uint64_t{1} << (i % 64);
  }
  BRAID_RETURN_IF_ERROR(comm_->allGather(mine.data(), all.data(), per, DataType::kUint64)
                            .withContext("Bucketer: end-of-step exchange"));
  const bool oneHost = comm_->numHosts() == 1;
  m->skewClock = oneHost ? "monotonic" : "wait-difference";
  for (size_t k = 0; k < nb; ++k) {
    double lo = 0, hi = 0;
    int slowest = 0;
    for (int r = 0; r < p; ++r) {
      const uint64_t* row = all.data() + static_cast<size_t>(r) * per;
      // One host: the time the rank reached the collective. Several: minus how long it waited.
      const double v = oneHost ? static_cast<double>(row[2 * k])
                               : -static_cast<double>(row[2 * k + 1] - row[2 * k]);
      if (r == 0 || v < lo) lo = v;
      if (r == 0 || v > hi) {
        hi = v;
        slowest = r;
      }
    }
    BucketMetrics& bm = m->buckets[k];
    bm.skewMs = (hi - lo) * 1e-6;
    bm.slowestRank = slowest;
    if (k == 0 || bm.skewMs > m->maxSkewMs) {
      m->maxSkewMs = bm.skewMs;
      m->slowestRank = slowest;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    uint64_t any = 0;
    for (int r = 0; r < p; ++r) any |= all[static_cast<size_t>(r) * per + 2 * nb + i / 64];
    globallyUnused_[i] = ((any >> (i % 64)) & 1) ? 0 : 1;
  }
  return Status::ok();
}

// Once: rank 0 turns the observed ready order (and, for kAuto, the ready timeline and the α-β
// estimate) into a plan and broadcasts it; every rank applies the same plan.
Status Bucketer::Impl::rebuildNow(StepMetrics* m) {
  const size_t n = specs_.size();
  std::vector<uint32_t> enc(2 * n, 0);
  if (comm_->rank() == 0) {
    std::vector<int> order;
    order.reserve(n);
    if (opts_.rebuildLayout && !opts_.findUnused) {
      std::vector<bool> seen(n, false);
      const int seenCount = std::min<int>(observedCount_.load(), static_cast<int>(n));
      for (int j = 0; j < seenCount; ++j) {
        const int idx = observed_[static_cast<size_t>(j)].load(std::memory_order_relaxed);
        if (idx >= 0 && !seen[static_cast<size_t>(idx)]) {
          seen[static_cast<size_t>(idx)] = true;
          order.push_back(idx);
        }
      }
      for (const auto& b : buckets_) {
        for (int idx : b->params) {
          if (!seen[static_cast<size_t>(idx)]) order.push_back(idx);
        }
      }
    } else {
      for (const auto& b : buckets_) order.insert(order.end(), b->params.begin(), b->params.end());
    }
    size_t cap = cap_, first = firstCap_;
    bool isolate = false;
    if (autoSize_) {
      std::vector<double> ready(n);
      for (size_t i = 0; i < n; ++i) {
        ready[i] = readyNs_[i] > stepT0_ ? static_cast<double>(readyNs_[i] - stepT0_) : 0.0;
      }
      const detail::AutoChoice c = detail::chooseCaps(specs_, order, ready, model_);
      cap = c.cap;
      first = c.firstCap;
      isolate = c.isolateLarge;
      BRAID_INFO("bucketer auto: cap %zu, first %zu%s, %zu buckets, predicted %.3f ms", cap, first,
                 isolate ? ", large parameters alone" : "", c.buckets, c.predictedNs * 1e-6);
    }
    enc = detail::encodePlan(detail::planBuckets(specs_, order, cap, first, isolate), n);
  }
  if (n > 0) {
    BRAID_RETURN_IF_ERROR(comm_->broadcast(enc.data(), enc.data(), enc.size(), DataType::kUint32, 0)
                              .withContext("Bucketer: layout rebuild broadcast"));
  }
  detail::BucketPlan plan;
  if (!detail::decodePlan(enc, n, &plan)) {
    return internalError("Bucketer: rank 0's rebuilt layout does not decode on rank " +
                         std::to_string(comm_->rank()));
  }
  applyPlan(plan);
  rebuildPending_ = false;
  m->rebuilt = true;
  return Status::ok();
}

}  // namespace braid
