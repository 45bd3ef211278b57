// The Bucketer op of braid-chaos-worker. Every choice that must agree across ranks (parameters,
// dtypes, sizes, Bucketer options, steps) comes from the op's seed; the order in which this rank
// marks its gradients ready, and from how many threads, comes from the seed and the rank, so the
// ranks disagree on it as real backward passes do.
//
// Reference: parameter i's gradient in step s is this rank's braid-perf Pattern contribution for
// (dtype, sum or average, ranks) starting at table phase (i, s); the reduced gradient must equal
// the pattern's reduced table at the same phase, bit for bit (the patterns are exact in every
// reduction order, and the fp16 codec, sometimes chosen for sums, carries their small integers
// exactly: its dynamic scale is a power of two).
#include "bench/chaos/bucketer_op.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/perf/harness.h"
#include "braid/bucketer.hpp"

namespace braid::chaos {
namespace {

struct Grad {
  uint32_t id = 0;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  std::vector<uint8_t> buffer;  // copy mode: the caller's gradient
};

size_t phaseOf(size_t param, int step, size_t period) {
  return (param * 131 + static_cast<size_t>(step) * 17) % period;
}

// Marks `order` ready from `threads` threads (each a contiguous share); the first error wins.
Status markAll(Bucketer& b, const std::vector<Grad*>& order, const std::vector<void*>& ptrs,
               int threads) {
  std::mutex mu;
  Status first;
  auto markRange = [&](size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) {
      Status s = b.markReady(order[k]->id, ptrs[k]);
      if (!s.isOk()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.isOk()) first = s;
        return;
      }
    }
  };
  if (threads <= 1 || order.size() < 2) {
    markRange(0, order.size());
    return first;
  }
  std::vector<std::thread> pool;
  const size_t per = (order.size() + static_cast<size_t>(threads) - 1) / threads;
  for (size_t from = 0; from < order.size(); from += per) {
    pool.emplace_back(markRange, from, std::min(order.size(), from + per));
  }
  for (std::thread& t : pool) t.join();
  return first;
}

}  // namespace

Status runBucketerOp(Communicator& comm, const BucketerOpOptions& o, size_t* wrong) {
  *wrong = 0;
  const int rank = comm.rank(), ranks = comm.size();
  std::mt19937_64 g(o.seed);  // shared by every rank
  std::mt19937_64 mine(o.seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1)));

  BucketerOptions bo;
  bo.sizing = BucketSizing::kFixed;
  static const size_t kCaps[] = {size_t{4} << 10, size_t{64} << 10, size_t{256} << 10,
                                 size_t{1} << 20, size_t{4} << 20};
  bo.bucketCapBytes = kCaps[g() % 5];
  bo.firstBucketCapBytes = std::max<size_t>(1024, bo.bucketCapBytes >> (g() % 4));
  const bool average = g() % 2 == 0;
  bo.reduction = average ? GradReduction::kAverage : GradReduction::kSum;
  bo.zeroCopy = g() % 3 == 0;
  bo.rebuildLayout = g() % 2 == 0;
  bo.maxInFlight = 1 + static_cast<int>(g() % 3);
  bo.metricsFile = "-";
  // The fp16 codec only sums: its average divides by the rank count in f32 before the cast (and
  // the shared power-of-two scale after), which rounds the patterns' averages.
  bo.codec = g() % 4 == 0 && !average ? "fp16" : "none";
  bo.codecMinBytes = 1 + g() % (size_t{64} << 10);
  const ReduceOp op = average ? ReduceOp::kAvg : ReduceOp::kSum;

  // Gradients: mostly small, some up to 256 KiB, a few up to 4 MiB (the fault's op: more, and
  // more of the large ones), never beyond maxBytes.
  static const DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                                    DataType::kBFloat16, DataType::kInt32,   DataType::kInt64};
  std::map<DataType, std::unique_ptr<perf::Pattern>> patterns;
  auto patternFor = [&](DataType t) -> const perf::Pattern& {
    auto& p = patterns[t];
    if (!p) p = std::make_unique<perf::Pattern>(t, op, ranks);
    return *p;
  };
  const size_t n = o.large ? 12 + g() % 20 : 1 + g() % 24;
  std::vector<Grad> grads(n);
  for (size_t i = 0; i < n; ++i) {
    Grad& gr = grads[i];
    gr.id = static_cast<uint32_t>(1000 + i * 7 + g() % 7);
    gr.type = kTypes[g() % 6];
    if (!patternFor(gr.type).limitation().empty()) gr.type = DataType::kFloat32;
    const int band = static_cast<int>(g() % 20);
    size_t bytes = 1 + g() % 4096;
    if (band == 0) bytes = 0;
    if (band >= 12) bytes = 1 + g() % (256 << 10);
    if (band >= (o.large ? 14 : 18)) bytes = 1 + g() % (4 << 20);
    gr.count = std::min(bytes, o.maxBytes) / dataTypeSize(gr.type);
  }
  const int steps = o.large ? 4 + static_cast<int>(g() % 4) : 2 + static_cast<int>(g() % 3);
  const int threads = 1 + static_cast<int>(mine() % 3);

  BRAID_ASSIGN_OR_RETURN(std::unique_ptr<Bucketer> b, Bucketer::create(&comm, bo));
  for (size_t i = 0; i < n; ++i) {
    BRAID_RETURN_IF_ERROR(
        b->registerParam(grads[i].id, grads[i].count, grads[i].type, "g" + std::to_string(i)));
    if (!bo.zeroCopy) grads[i].buffer.resize(grads[i].count * dataTypeSize(grads[i].type));
  }
  BRAID_RETURN_IF_ERROR(b->finalize());

  bool faulted = false;
  for (int s = 0; s < steps; ++s) {
    BRAID_RETURN_IF_ERROR(b->beginStep());
    std::vector<Grad*> order;
    std::vector<void*> ptrs;
    for (Grad& gr : grads) order.push_back(&gr);
    const bool faultStep = o.midStep && !faulted;
    if (faultStep) {
      // Backward's order (the last registered first): the first half completes the first
      // buckets, so that they are on the wire when the fault strikes.
      std::reverse(order.begin(), order.end());
    } else {
      std::shuffle(order.begin(), order.end(), mine);
    }
    for (Grad* gr : order) {
      void* dst = gr->buffer.data();
      if (bo.zeroCopy) {
        BRAID_ASSIGN_OR_RETURN(dst, b->gradientBuffer(gr->id));
      }
      const perf::Pattern& p = patternFor(gr->type);
      const size_t i = static_cast<size_t>(gr - grads.data());
      perf::fillPeriodic(dst, p.contribution(rank), p.period(), p.elemSize(), gr->count,
                         phaseOf(i, s, p.period()));
      ptrs.push_back(bo.zeroCopy ? nullptr : dst);
    }
    if (faultStep) {
      // Half marked (their buckets launch), a moment for the engine to start them, then the
      // fault, then the rest.
      const size_t half = order.size() / 2;
      std::vector<Grad*> first(order.begin(), order.begin() + static_cast<long>(half));
      std::vector<void*> firstPtrs(ptrs.begin(), ptrs.begin() + static_cast<long>(half));
      Status marked = markAll(*b, first, firstPtrs, 1);
      faulted = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      o.midStep();
      if (marked.isOk()) {
        order.erase(order.begin(), order.begin() + static_cast<long>(half));
        ptrs.erase(ptrs.begin(), ptrs.begin() + static_cast<long>(half));
        marked = markAll(*b, order, ptrs, 1);
      }
      auto finished = b->finishStep();  // the step is open: finish it whatever happened
      BRAID_RETURN_IF_ERROR(marked);
      if (!finished.isOk()) return finished.status();
    } else {
      Status marked = markAll(*b, order, ptrs, threads);
      auto finished = b->finishStep();
      BRAID_RETURN_IF_ERROR(marked);
      if (!finished.isOk()) return finished.status();
    }
    for (size_t i = 0; i < n; ++i) {
      const Grad& gr = grads[i];
      const perf::Pattern& p = patternFor(gr.type);
      const void* got = gr.buffer.data();
      if (bo.zeroCopy) {
        BRAID_ASSIGN_OR_RETURN(got, b->result(gr.id));
      }
      *wrong += perf::countMismatches(got, p.reduced(), p.period(), p.elemSize(), gr.count,
                                      phaseOf(i, s, p.period()));
    }
  }
  return Status::ok();
}

}  // namespace braid::chaos
