// bucketing_check: one rank of the Bucketer's multi-rank property tests. Start with braid-run.
//
//   bucketing_check [--seed S] [--configs N]     property: random layouts/orders/threads/steps
//   bucketing_check --scenario mismatch-count|mismatch-shape|unmarked|straggler|metrics|tail
//
// Property: every configuration (copy or zero-copy; per-tensor, small fixed, default and auto
// caps; declared unused or findUnused; average or sum) runs several windows of accumulation
// micro-steps plus one communicating step, with gradients marked from 1-4 threads in a random
// order per rank. After each step every parameter's result is compared bit for bit with a plain
// per-tensor all-reduce of the same window contributions. Contributions are small integers in
// every dtype (i32, i64, f16, f32, f64), so sums are exact in any reduction order and the results
// must be bit-identical; one f32 parameter per configuration gets random reals and is checked
// against the bound |err| ≤ 2·(p+m)·2⁻²⁴·Σ|x| (p ranks, m micro-steps; reduction order differs).
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "braid/bucketer.hpp"
#include "braid/comm.hpp"
#include "core/reduce.h"
#include "core/text.h"
#include "topology/model.h"

namespace braid::test {
namespace {

int gFailures = 0;
int gRank = 0;

void fail(const std::string& what) {
  ++gFailures;
  if (gFailures <= 20) fprintf(stderr, "rank %d: FAIL %s\n", gRank, what.c_str());
}

#define CHECK_OK(expr, what)                                                   \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    if (!s_.isOk()) {                                                          \
      fail(std::string(what) + ": " + s_.toString());                          \
      return;                                                                  \
    }                                                                          \
  } while (0)

struct Param {
  uint32_t id;
  size_t count;
  DataType type;
  std::string name;
  bool realValued = false;  // random reals (bounded error) instead of small integers
  std::vector<uint8_t> grad;   // copy mode: the caller's gradient buffer
  std::vector<uint8_t> window; // this rank's contribution summed over the window
  bool usedInWindow = false;
  bool readyInSyncStep = false;
};

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Small integer in [-8, 8] (or a real in [-1, 1]) for (param, element, rank, step, micro).
double contribution(const Param& p, size_t j, int rank, uint64_t step, int micro) {
  const uint64_t h = mix(p.id * 1000003ull + j * 7919ull + static_cast<uint64_t>(rank) * 104729ull +
                         step * 1299709ull + static_cast<uint64_t>(micro) * 15485863ull);
  if (p.realValued) return static_cast<double>(h % 2000001) / 1e6 - 1.0;
  return static_cast<double>(h % 17) - 8.0;
}

void storeAs(DataType t, void* buf, size_t j, double v) {
  switch (t) {
    case DataType::kInt32: static_cast<int32_t*>(buf)[j] = static_cast<int32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[j] = static_cast<int64_t>(v); break;
    case DataType::kFloat16: static_cast<uint16_t*>(buf)[j] = floatToHalf(static_cast<float>(v)); break;
    case DataType::kFloat32: static_cast<float*>(buf)[j] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[j] = v; break;
    default: abort();
  }
}

double loadAs(DataType t, const void* buf, size_t j) {
  switch (t) {
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[j];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[j]);
    case DataType::kFloat16: return halfToFloat(static_cast<const uint16_t*>(buf)[j]);
    case DataType::kFloat32: return static_cast<const float*>(buf)[j];
    case DataType::kFloat64: return static_cast<const double*>(buf)[j];
    default: abort();
  }
}

struct Config {
  bool zeroCopy;
  BucketSizing sizing;
  size_t cap, firstCap;  // kFixed
  bool findUnused;
  GradReduction reduction;
  std::string label;
};

std::vector<Param> makeParams(std::mt19937_64& shared, bool withReal) {
  static const DataType kTypes[] = {DataType::kInt32, DataType::kInt64, DataType::kFloat16,
                                    DataType::kFloat32, DataType::kFloat64};
  static const size_t kCounts[] = {0, 1, 7, 31, 257, 1021, 4099, 65537};
  const size_t n = 5 + shared() % 40;
  std::vector<Param> ps;
  for (size_t i = 0; i < n; ++i) {
    Param p;
    p.id = static_cast<uint32_t>(1000 + i * 3);
    p.count = kCounts[shared() % (sizeof(kCounts) / sizeof(kCounts[0]))];
    p.type = kTypes[shared() % 5];
    p.name = "layer" + std::to_string(i) + ".w";
    ps.push_back(std::move(p));
  }
  if (withReal) {
    Param p;
    p.id = 7;
    p.count = 3001;
    p.type = DataType::kFloat32;
    p.name = "real.w";
    p.realValued = true;
    ps.push_back(std::move(p));
  }
  return ps;
}

// Whether `rank` leaves param i unused in (step, micro): every rank can compute it for all.
bool unusedOn(const Param& p, int rank, uint64_t step, int micro, uint64_t seed) {
  return mix(seed ^ (p.id * 31ull + static_cast<uint64_t>(rank) * 7ull + step * 131ull +
                     static_cast<uint64_t>(micro) * 17ull)) % 7 == 0;
}

void runConfig(Communicator& comm, const Config& config, uint64_t seed) {
  Config cfg = config;
  const int rank = comm.rank(), p = comm.size();
  std::mt19937_64 shared(seed);                                   // same on every rank
  std::mt19937_64 local(seed * 977 + static_cast<uint64_t>(rank)); // differs per rank
  std::vector<Param> ps = makeParams(shared, true);
  BucketerOptions o;
  o.sizing = cfg.sizing;
  o.bucketCapBytes = cfg.cap;
  o.firstBucketCapBytes = cfg.firstCap;
  o.zeroCopy = cfg.zeroCopy;
  o.findUnused = cfg.findUnused;
  o.reduction = cfg.reduction;
  o.maxInFlight = 1 + static_cast<int>(shared() % 3);
  // Buckets in pieces: the default (BRAID_BUCKET_PIECE_BYTES, 0: one all-reduce per bucket), or
  // small pieces whose edges fall inside parameters (12345 bytes: 12345 / element size elements,
  // rounded down, a count no parameter size lines up with).
  static const size_t kPieces[] = {0, 64 << 10, 12345};
  o.pieceBytes = kPieces[shared() % 3];
  cfg.label += "/pieces-" + std::to_string(o.pieceBytes);
  auto created = Bucketer::create(&comm, o);
  CHECK_OK(created.status(), cfg.label + " create");
  Bucketer& b = **created;
  for (const Param& x : ps) CHECK_OK(b.registerParam(x.id, x.count, x.type, x.name), "register");
  CHECK_OK(b.finalize(), cfg.label + " finalize");
  const ReduceOp op = cfg.reduction == GradReduction::kAverage ? ReduceOp::kAvg : ReduceOp::kSum;
  uint64_t step = 0;
  const int windows = 4;
  for (int w = 0; w < windows; ++w) {
    const int micros = static_cast<int>(shared() % 3);  // accumulation steps before the sync step
    for (Param& x : ps) {
      const size_t bytes = x.count * dataTypeSize(x.type);
      x.window.assign(bytes, 0);
      x.grad.assign(bytes, 0);
      x.usedInWindow = false;
      x.readyInSyncStep = false;
    }
    if (cfg.zeroCopy) b.zeroGradients();
    for (int m = 0; m <= micros; ++m) {
      const bool accumulate = m < micros;
      ++step;
      CHECK_OK(b.beginStep(accumulate), cfg.label + " beginStep");
      // Which params this rank uses now, in a random order, split over 1-4 threads.
      std::vector<int> order;
      for (size_t i = 0; i < ps.size(); ++i) order.push_back(static_cast<int>(i));
      std::shuffle(order.begin(), order.end(), local);
      const int threads = 1 + static_cast<int>(local() % 4);
      std::vector<std::vector<int>> share(static_cast<size_t>(threads));
      for (size_t j = 0; j < order.size(); ++j) share[local() % share.size()].push_back(order[j]);
      std::atomic<int> errors{0};
      std::string firstError;
      std::mutex errMu;
      auto worker = [&](const std::vector<int>& mine, uint64_t tseed) {
        std::mt19937_64 tr(tseed);
        for (int i : mine) {
          Param& x = ps[static_cast<size_t>(i)];
          Status s;
          if (unusedOn(x, rank, step, m, seed)) {
            if (!cfg.findUnused) s = b.markUnused(x.id);
          } else {
            void* dst = nullptr;
            if (cfg.zeroCopy) {
              auto buf = b.gradientBuffer(x.id);
              if (!buf.isOk()) {
                s = buf.status();
              } else {
                dst = *buf;
              }
            } else {
              dst = x.grad.data();
            }
            if (s.isOk()) {
              // The framework's backward: write (copy) or accumulate (zero-copy) the gradient.
              for (size_t j = 0; j < x.count; ++j) {
                const double v = contribution(x, j, rank, step, m);
                const double prev = cfg.zeroCopy ? loadAs(x.type, dst, j) : 0.0;
                storeAs(x.type, dst, j, prev + v);
                storeAs(x.type, x.window.data(), j, loadAs(x.type, x.window.data(), j) + v);
              }
              x.usedInWindow = true;
              if (!accumulate) x.readyInSyncStep = true;
              s = b.markReady(x.id, cfg.zeroCopy ? nullptr : dst);
            }
          }
          if (!s.isOk()) {
            std::lock_guard<std::mutex> l(errMu);
            if (errors++ == 0) firstError = s.toString();
          }
          if (tr() % 4 == 0) std::this_thread::yield();
          if (tr() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(tr() % 200));
        }
      };
      std::vector<std::thread> ts;
      for (int t = 0; t < threads; ++t) ts.emplace_back(worker, share[static_cast<size_t>(t)], local());
      for (auto& t : ts) t.join();
      if (errors.load() > 0) fail(cfg.label + " mark: " + firstError);
      auto met = b.finishStep();
      CHECK_OK(met.status(), cfg.label + " finishStep step " + std::to_string(step));
      if (met->communicated == accumulate) fail(cfg.label + " communicated flag wrong");
    }
    // Copy mode: a gradient alone in its bucket (the layout in effect from window 1 on, after
    // the rebuild) and not accumulated before the sync step is reduced where it lies, so its
    // result is that gradient itself.
    std::unordered_map<uint32_t, size_t> sizeOf;
    for (const auto& bucket : b.bucketLayout()) {
      for (uint32_t id : bucket) sizeOf[id] = bucket.size();
    }
    // Reference: one all-reduce per tensor of this rank's window contribution.
    for (Param& x : ps) {
      const size_t bytes = x.count * dataTypeSize(x.type);
      std::vector<uint8_t> want(std::max<size_t>(bytes, 1));
      CHECK_OK(comm.allReduce(x.window.data(), want.data(), x.count, x.type, op), "reference");
      auto res = b.result(x.id);
      CHECK_OK(res.status(), "result");
      const void* got = (!cfg.zeroCopy && x.readyInSyncStep) ? x.grad.data() : *res;
      const std::string where = cfg.label + " window " + std::to_string(w) + " param " + x.name +
                                " (" + dataTypeName(x.type) + " x " + std::to_string(x.count) + ")";
      if (!cfg.zeroCopy && w > 0 && micros == 0 && x.readyInSyncStep && bytes > 0 &&
          sizeOf[x.id] == 1 && *res != static_cast<const void*>(x.grad.data())) {
        fail(where + ": alone in its bucket but not reduced in place (result() is not the "
                     "gradient)");
      }
      if (bytes > 0 && std::memcmp(*res, want.data(), bytes) != 0 && !x.realValued) {
        fail(where + ": bucket result differs from per-tensor all-reduce");
      }
      if (x.realValued) {
        // Window contributions are bit-identical on both sides; only the order of the sum over
        // ranks differs: |err| <= 2·(p−1)·2⁻²⁴·Σ|x| with Σ|x| <= p·(micros+1).
        const double bound = 2.0 * std::max(p - 1, 1) * std::ldexp(1.0, -24) * p * (micros + 1);
        for (size_t j = 0; j < x.count; ++j) {
          const double d = std::fabs(loadAs(x.type, got, j) - loadAs(x.type, want.data(), j));
          if (d > bound) {
            fail(where + ": element " + std::to_string(j) + " off by " + std::to_string(d) +
                 " > bound " + std::to_string(bound));
            break;
          }
        }
      } else if (bytes > 0 && std::memcmp(got, want.data(), bytes) != 0) {
        fail(where + ": result differs from per-tensor all-reduce");
      }
      if (cfg.findUnused) {
        bool anyUsed = false;
        for (int r = 0; r < p && !anyUsed; ++r) {
          for (int m = 0; m <= micros; ++m) {
            if (!unusedOn(x, r, step - static_cast<uint64_t>(micros) + static_cast<uint64_t>(m), m, seed)) anyUsed = true;
          }
        }
        if (b.globallyUnused(x.id) == anyUsed) fail(where + ": globallyUnused wrong");
      }
    }
  }
  // The layout was rebuilt exactly once (version 1 at finalize, 2 after the first sync step).
  if (b.layoutVersion() != 2) fail(cfg.label + ": layout version " + std::to_string(b.layoutVersion()));
}

void property(Communicator& comm, uint64_t seed, int configs) {
  std::vector<Config> all;
  for (bool zc : {false, true}) {
    for (bool fu : {false, true}) {
      all.push_back({zc, BucketSizing::kFixed, 1, 1, fu, GradReduction::kSum, "per-tensor"});
      all.push_back({zc, BucketSizing::kFixed, 16 << 10, 2 << 10, fu, GradReduction::kAverage, "fixed-16k"});
      all.push_back({zc, BucketSizing::kFixed, 0, 0, fu, GradReduction::kSum, "default-25m"});
      all.push_back({zc, BucketSizing::kAuto, 0, 0, fu, GradReduction::kAverage, "auto"});
    }
  }
  int run = 0;
  for (size_t i = 0; i < all.size() && run < configs; ++i, ++run) {
    Config c = all[i];
    c.label += std::string(c.zeroCopy ? "/zero-copy" : "/copy") + (c.findUnused ? "/find-unused" : "/declared") +
               (c.reduction == GradReduction::kAverage ? "/avg" : "/sum");
    runConfig(comm, c, seed + i);
    if (comm.rank() == 0) printf("# %s done\n", c.label.c_str());
  }
}

void mismatch(Communicator& comm, bool extra) {
  auto b = Bucketer::create(&comm, BucketerOptions{});
  CHECK_OK(b.status(), "create");
  for (uint32_t i = 0; i < 6; ++i) {
    size_t count = 100 + i;
    if (!extra && i == 3 && comm.rank() == comm.size() - 1) count = 99;
    CHECK_OK((*b)->registerParam(i, count, DataType::kFloat32, "block" + std::to_string(i)), "register");
  }
  if (extra && comm.rank() == 0) CHECK_OK((*b)->registerParam(77, 5, DataType::kFloat32, "extra.bias"), "register");
  Status s = (*b)->finalize();
  const std::string want = extra ? "extra.bias" : "block3";
  if (comm.size() == 1) {
    if (!s.isOk()) fail("single rank: " + s.toString());
    return;
  }
  if (s.code() != Code::kInvalidUsage || s.message().find(want) == std::string::npos ||
      s.message().find("#" + std::string(extra ? "6" : "3")) == std::string::npos) {
    fail("expected kInvalidUsage naming " + want + ", got " + s.toString());
  } else if (comm.rank() == 0) {
    printf("# mismatch reported: %s\n", s.toString().c_str());
  }
}

// One rank forgets a parameter: it gets kInvalidUsage naming it; every rank still completes the
// step with that rank's contribution as zero, and the next step works.
void unmarked(Communicator& comm) {
  auto cb = Bucketer::create(&comm, BucketerOptions{});
  CHECK_OK(cb.status(), "create");
  Bucketer& b = **cb;
  std::vector<std::vector<float>> g(4, std::vector<float>(100, 1.0f));
  for (uint32_t i = 0; i < 4; ++i) CHECK_OK(b.registerParam(i, 100, DataType::kFloat32, "w" + std::to_string(i)), "register");
  CHECK_OK(b.finalize(), "finalize");
  const bool forgetful = comm.rank() == comm.size() - 1;
  for (int step = 0; step < 2; ++step) {
    CHECK_OK(b.beginStep(), "beginStep");
    for (uint32_t i = 0; i < 4; ++i) {
      std::fill(g[i].begin(), g[i].end(), 1.0f);
      if (!(forgetful && step == 0 && i == 2)) CHECK_OK(b.markReady(i, g[i].data()), "markReady");
    }
    auto m = b.finishStep();
    if (forgetful && step == 0) {
      if (m.status().code() != Code::kInvalidUsage || m.status().message().find("'w2'") == std::string::npos) {
        fail("expected kInvalidUsage naming w2, got " + m.status().toString());
      }
    } else {
      CHECK_OK(m.status(), "finishStep");
      const float want = step == 0 ? static_cast<float>(comm.size() - 1) / comm.size() : 1.0f;
      auto r = b.result(2);
      CHECK_OK(r.status(), "result");
      if (std::fabs(static_cast<const float*>(*r)[0] - want) > 1e-6f) fail("unmarked: w2 result " + std::to_string(static_cast<const float*>(*r)[0]));
    }
  }
}

// The last rank starts backward 40 ms late: every rank must see that skew and name it.
void straggler(Communicator& comm) {
  auto cb = Bucketer::create(&comm, BucketerOptions{});
  CHECK_OK(cb.status(), "create");
  Bucketer& b = **cb;
  std::vector<float> g(1000, 1.0f);
  CHECK_OK(b.registerParam(0, 1000, DataType::kFloat32, "w"), "register");
  CHECK_OK(b.finalize(), "finalize");
  for (int step = 0; step < 3; ++step) {
    CHECK_OK(b.beginStep(), "beginStep");
    if (comm.rank() == comm.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(40));
    CHECK_OK(b.markReady(0, g.data()), "markReady");
    auto m = b.finishStep();
    CHECK_OK(m.status(), "finishStep");
    if (comm.size() > 1 && (m->maxSkewMs < 30 || m->maxSkewMs > 200 || m->slowestRank != comm.size() - 1)) {
      fail("straggler: skew " + std::to_string(m->maxSkewMs) + " ms, slowest " + std::to_string(m->slowestRank));
    }
    if (comm.rank() == 0 && step == 2) {
      printf("# straggler: skew %.2f ms (%s clock), slowest rank %d\n", m->maxSkewMs, m->skewClock, m->slowestRank);
    }
  }
}

// The tail hand-off (engine.cc): each step marks every gradient outside the last bucket, waits
// 30 ms (the engine reduces those buckets and waits for the last), then finishes. On even steps
// the even ranks leave the last bucket's gradients to finishStep (findUnused: they contribute
// zero), so the engine is still waiting when finishStep comes: finishStep must take the rest of
// the step over (tailByCaller) and run it on its own thread. Odd ranks always mark everything.
// Every result is checked exactly, with codec none and with fp16 (the codec's collectives on the
// caller's thread).
void tailHandOff(Communicator& comm) {
  const int p = comm.size();
  for (const char* codec : {"none", "fp16"}) {
    BucketerOptions o;
    o.sizing = BucketSizing::kFixed;
    o.bucketCapBytes = o.firstBucketCapBytes = 4096;
    o.findUnused = true;
    o.reduction = GradReduction::kSum;
    o.codec = codec;
    o.codecMinBytes = 1;
    auto cb = Bucketer::create(&comm, o);
    CHECK_OK(cb.status(), "create");
    Bucketer& b = **cb;
    constexpr uint32_t kParams = 8;
    constexpr size_t kCount = 500;  // two per 4 KiB bucket
    std::vector<std::vector<float>> g(kParams, std::vector<float>(kCount));
    for (uint32_t i = 0; i < kParams; ++i) CHECK_OK(b.registerParam(i, kCount, DataType::kFloat32, "t" + std::to_string(i)), "register");
    CHECK_OK(b.finalize(), "finalize");
    auto value = [](int rank, uint32_t i, size_t j, int step) {
      return static_cast<float>((rank + 1) * static_cast<int>(j % 7 + i) + step);
    };
    int leftOut = 0, takenOver = 0;
    for (int step = 0; step < 8; ++step) {
      const std::vector<uint32_t> last = b.bucketLayout().back();
      auto inLast = [&](uint32_t i) { return std::find(last.begin(), last.end(), i) != last.end(); };
      const bool leaves = step % 2 == 0 && comm.rank() % 2 == 0;
      CHECK_OK(b.beginStep(), "beginStep");
      for (uint32_t i = 0; i < kParams; ++i) {
        for (size_t j = 0; j < kCount; ++j) g[i][j] = value(comm.rank(), i, j, step);
        if (!inLast(i)) CHECK_OK(b.markReady(i, g[i].data()), "markReady");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      for (uint32_t i : last) {
        if (!leaves) CHECK_OK(b.markReady(i, g[i].data()), "markReady last");
      }
      auto m = b.finishStep();
      CHECK_OK(m.status(), std::string("finishStep (codec ") + codec + ")");
      if (leaves) {
        ++leftOut;
        takenOver += m->tailByCaller ? 1 : 0;
      }
      for (uint32_t i = 0; i < kParams; ++i) {
        auto r = b.result(i);
        CHECK_OK(r.status(), "result");
        const auto* out = static_cast<const float*>(*r);
        for (size_t j = 0; j < kCount; ++j) {
          float want = 0;
          for (int q = 0; q < p; ++q) {
            if (!(inLast(i) && step % 2 == 0 && q % 2 == 0)) want += value(q, i, j, step);
          }
          if (out[j] != want) {
            fail(std::string("tail (codec ") + codec + "): step " + std::to_string(step) + " t" +
                 std::to_string(i) + "[" + std::to_string(j) + "] = " + std::to_string(out[j]) +
                 ", want " + std::to_string(want) + (m->tailByCaller ? " (tail by caller)" : ""));
            break;
          }
        }
      }
    }
    // The engine reaches its wait within the 30 ms on any sane machine: allow one miss.
    if (leftOut > 0 && takenOver < leftOut - 1) {
      fail(std::string("tail (codec ") + codec + "): finishStep took the tail over in " +
           std::to_string(takenOver) + " of " + std::to_string(leftOut) + " steps");
    }
    if (comm.rank() == 0) printf("# tail hand-off (codec %s): %d of %d steps\n", codec, takenOver, leftOut);
  }
  // A caller that marks everything and comes to finishStep late: the mark that completes the
  // offered last bucket does not wake the engine, which must still find it complete at its next
  // poll (kTailPollMs = 2) and reduce it while the caller is away, not when finishStep comes.
  BucketerOptions o;
  o.sizing = BucketSizing::kFixed;
  o.bucketCapBytes = o.firstBucketCapBytes = 4096;
  o.reduction = GradReduction::kSum;
  auto cb = Bucketer::create(&comm, o);
  CHECK_OK(cb.status(), "create");
  Bucketer& b = **cb;
  constexpr uint32_t kParams = 4;
  constexpr size_t kCount = 500;
  std::vector<std::vector<float>> g(kParams, std::vector<float>(kCount));
  for (uint32_t i = 0; i < kParams; ++i)
    CHECK_OK(b.registerParam(i, kCount, DataType::kFloat32, "t" + std::to_string(i)), "register");
  CHECK_OK(b.finalize(), "finalize");
  constexpr int kAwayMs = 60;
  int late = 0;
  double worst = 0;
  for (int step = 0; step < 6; ++step) {
    const std::vector<uint32_t> last = b.bucketLayout().back();
    CHECK_OK(b.beginStep(), "beginStep");
    for (uint32_t i = 0; i < kParams; ++i) {
      if (std::find(last.begin(), last.end(), i) != last.end()) continue;
      std::fill(g[i].begin(), g[i].end(), static_cast<float>(comm.rank() + step));
      CHECK_OK(b.markReady(i, g[i].data()), "markReady");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the engine offers the tail
    for (uint32_t i : last) {
      std::fill(g[i].begin(), g[i].end(), static_cast<float>(comm.rank() + step));
      CHECK_OK(b.markReady(i, g[i].data()), "markReady last");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kAwayMs));
    auto m = b.finishStep();
    CHECK_OK(m.status(), "finishStep (late)");
    const BucketMetrics& bm = m->buckets.back();
    // Both ranks marked within a few ms of each other; a tail left for finishStep starts
    // ~kAwayMs after its last mark.
    const double after = bm.doneMs - bm.readyMs;
    worst = std::max(worst, after);
    if (after > kAwayMs / 2) ++late;
    for (uint32_t i = 0; i < kParams; ++i) {
      auto r = b.result(i);
      CHECK_OK(r.status(), "result");
      const float want = static_cast<float>(p * (p - 1) / 2 + p * step);
      const float got = static_cast<const float*>(*r)[kCount - 1];
      if (got != want) {
        fail("late finishStep: step " + std::to_string(step) + " t" + std::to_string(i) + " = " +
             std::to_string(got) + ", want " + std::to_string(want));
      }
    }
  }
  // One step may lose its poll to a descheduled engine on a crowded machine.
  if (late > 1) {
    fail("late finishStep: the last bucket was reduced only when finishStep came in " +
         std::to_string(late) + " of 6 steps (worst " + std::to_string(worst) +
         " ms after its mark)");
  }
  if (comm.rank() == 0)
    printf("# late finishStep: tail done at most %.2f ms after its mark\n", worst);
}

void metricsFile(Communicator& comm) {
  const char* dir = getenv("BRAID_TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/bucketing_metrics_" + std::to_string(getppid()) + ".%r.jsonl";
  BucketerOptions o;
  o.metricsFile = path;
  auto cb = Bucketer::create(&comm, o);
  CHECK_OK(cb.status(), "create");
  Bucketer& b = **cb;
  std::vector<float> g(1000, 1.0f);
  for (uint32_t i = 0; i < 3; ++i) CHECK_OK(b.registerParam(i, 1000, DataType::kFloat32), "register");
  CHECK_OK(b.finalize(), "finalize");
  for (int step = 0; step < 3; ++step) {
    CHECK_OK(b.beginStep(step == 1), "beginStep");
    for (uint32_t i = 0; i < 3; ++i) CHECK_OK(b.markReady(i, g.data()), "markReady");
    CHECK_OK(b.finishStep().status(), "finishStep");
  }
  // The engine thread writes the files after each finishStep; all of them by its destruction.
  cb->reset();
  std::string file = path;
  file.replace(file.find("%r"), 2, std::to_string(comm.rank()));
  std::ifstream in(file);
  int lines = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++lines;
    if (line.front() != '{' || line.back() != '}' || line.find("\"eta\":") == std::string::npos) {
      fail("metrics line malformed: " + line.substr(0, 80));
    }
  }
  if (lines != 3) fail("metrics file " + file + " has " + std::to_string(lines) + " lines");
  std::ifstream prom(file + ".prom");
  std::string text((std::istreambuf_iterator<char>(prom)), std::istreambuf_iterator<char>());
  if (text.find("braid_bucketer_overlap_efficiency{rank=\"" + std::to_string(comm.rank()) + "\"}") == std::string::npos) {
    fail("prometheus file lacks the efficiency gauge");
  }
  unlink(file.c_str());
  unlink((file + ".prom").c_str());
}

// The threads of this process by name, with the CPUs each may run on (/proc/self/task).
std::vector<std::pair<std::string, std::vector<int>>> threadCpus() {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = std::string("/proc/self/task/") + e->d_name;
    std::string name, line, list;
    std::ifstream(dir + "/comm") >> name;
    std::ifstream status(dir + "/status");
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) list = line.substr(line.find(':') + 1);
    }
    std::vector<int> cpus;
    if (!topo::parseCpuList(trimBlanks(list), &cpus)) fail("unreadable CPU list: " + list);
    out.emplace_back(name, cpus);
  }
  closedir(d);
  return out;
}

// BRAID_BIND_THREADS (core/affinity.h): the communicator's worker and the Bucketer's engine,
// found by name, are restricted to CPUs of their own, disjoint from the other ranks' on this
// machine (expectBound), or keep the process's CPUs (not bound: off, or fewer CPUs than ranks).
// *skipped when the machine cannot show binding (fewer CPUs than local ranks, on any rank).
void threadPlacement(Communicator& comm, bool expectBound, bool* skipped) {
  cpu_set_t own;
  CPU_ZERO(&own);
  sched_getaffinity(0, sizeof(own), &own);
  int skip = expectBound && CPU_COUNT(&own) < comm.localSize() ? 1 : 0;
  CHECK_OK(comm.allReduce(&skip, &skip, 1, DataType::kInt32, ReduceOp::kMax), "skip vote");
  *skipped = skip != 0;
  if (*skipped) {
    if (comm.rank() == 0) printf("# threads: fewer CPUs than local ranks here; skipped\n");
    return;
  }
  std::vector<float> x(1000, 1.0f);
  auto w = comm.allReduceAsync(x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum);
  CHECK_OK(w.status(), "allReduceAsync");
  if (w.isOk()) CHECK_OK((*w)->wait(), "wait");
  auto cb = Bucketer::create(&comm, BucketerOptions());
  CHECK_OK(cb.status(), "create");
  if (!cb.isOk()) return;
  CHECK_OK((*cb)->registerParam(0, x.size(), DataType::kFloat32), "register");
  CHECK_OK((*cb)->finalize(), "finalize");
  CHECK_OK((*cb)->beginStep(), "beginStep");
  CHECK_OK((*cb)->markReady(0, x.data()), "markReady");
  CHECK_OK((*cb)->finishStep().status(), "finishStep");
  std::vector<int> process;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &own)) process.push_back(c);
  }
  std::vector<int> worker, engine;
  int workers = 0, engines = 0;
  for (const auto& [name, cpus] : threadCpus()) {
    if (name == "braid-worker") {
      ++workers;
      worker = cpus;
    } else if (name == "braid-engine") {
      ++engines;
      engine = cpus;
    }
  }
  if (workers != 1 || engines != 1) {
    fail("expected one braid-worker and one braid-engine thread, found " + std::to_string(workers) +
         " and " + std::to_string(engines));
    return;
  }
  if (!expectBound) {
    if (worker != process || engine != process) {
      fail("unbound threads expected on the process's CPUs " + formatCpuList(process) +
           ", worker has " + formatCpuList(worker) + ", engine " + formatCpuList(engine));
    }
    return;
  }
  if (worker.empty() ||
      !std::includes(process.begin(), process.end(), worker.begin(), worker.end()) ||
      worker == process || engine != worker) {
    fail("worker CPUs " + formatCpuList(worker) + " and engine CPUs " + formatCpuList(engine) +
         " are not one share of the process's " + formatCpuList(process));
  }
  // Disjoint from every other rank's share (every rank of these runs is on this machine).
  std::vector<uint8_t> mine(CPU_SETSIZE / 8, 0);
  for (int c : worker) mine[static_cast<size_t>(c) / 8] |= static_cast<uint8_t>(1u << (c % 8));
  std::vector<uint8_t> all(mine.size() * static_cast<size_t>(comm.size()), 0);
  CHECK_OK(comm.allGather(mine.data(), all.data(), mine.size(), DataType::kUint8), "allGather");
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) continue;
    for (size_t k = 0; k < mine.size(); ++k) {
      if ((all[static_cast<size_t>(r) * mine.size() + k] & mine[k]) != 0) {
        fail("rank " + std::to_string(r) + "'s worker shares a CPU with this rank's " +
             formatCpuList(worker));
        break;
      }
    }
  }
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  using namespace braid;
  std::string scenario = "property";
  uint64_t seed = 1;
  int configs = 100;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--scenario" && i + 1 < argc) scenario = argv[++i];
    else if (a == "--seed" && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 10);
    else if (a == "--configs" && i + 1 < argc) configs = atoi(argv[++i]);
  }
  if (scenario == "threads-crowded") {
    // One CPU for this rank, fewer than the ranks on the machine, before braid decides where its
    // threads run (at the first communicator): it must leave them unbound.
    cpu_set_t own, one;
    CPU_ZERO(&own);
    CPU_ZERO(&one);
    sched_getaffinity(0, sizeof(own), &own);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &own)) {
        CPU_SET(c, &one);
        break;
      }
    }
    sched_setaffinity(0, sizeof(one), &one);
  }
  auto comm = Communicator::createFromEnvironment();
  if (!comm.isOk()) {
    fprintf(stderr, "bucketing_check: %s\n", comm.status().toString().c_str());
    return 2;
  }
  test::gRank = (*comm)->rank();
  if (scenario == "property") test::property(**comm, seed, configs);
  else if (scenario == "mismatch-shape") test::mismatch(**comm, false);
  else if (scenario == "mismatch-count") test::mismatch(**comm, true);
  else if (scenario == "unmarked") test::unmarked(**comm);
  else if (scenario == "straggler") test::straggler(**comm);
  else if (scenario == "metrics") test::metricsFile(**comm);
  else if (scenario == "tail") test::tailHandOff(**comm);
  else if (scenario == "threads-auto") {
    // Every rank of these runs is on this machine (emulated hosts included): bound exactly when
    // each has a CPU of its own.
    cpu_set_t own;
    CPU_ZERO(&own);
    sched_getaffinity(0, sizeof(own), &own);
    bool skipped = false;
    test::threadPlacement(**comm, CPU_COUNT(&own) >= (*comm)->size(), &skipped);
  } else if (scenario == "threads-bound" || scenario == "threads-unbound" ||
             scenario == "threads-crowded") {
    bool skipped = false;
    test::threadPlacement(**comm, scenario == "threads-bound", &skipped);
    if (skipped) return 77;
  } else {
    fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  if ((*comm)->rank() == 0) printf("# bucketing_check %s: %s\n", scenario.c_str(), test::gFailures ? "FAILED" : "ok");
  return test::gFailures == 0 ? 0 : 1;
}
