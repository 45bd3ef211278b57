// The ceiling probe; the schedule it times is in ceiling.h.
#include "bench/perf/ceiling.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/copy.h"
#include "core/reduce.h"

namespace braid::perf {
namespace {

// Every part starts as this byte: a normal, small value in every floating-point type (no
// denormals, whose arithmetic is slow), so that the reduction runs at its usual speed.
constexpr int kFill = 0x3c;

double nowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<std::unique_ptr<CeilingProbe>> CeilingProbe::create(Communicator* comm, size_t maxBytes,
                                                           std::string* why) {
  const int p = comm->size();
  if (comm->numHosts() != 1 || p < 2) {
    *why = p < 2 ? "one rank: nothing moves" : "several hosts: the links bound the time";
    return std::unique_ptr<CeilingProbe>();
  }
  const size_t part = std::max<size_t>(maxBytes, 64);
  BRAID_ASSIGN_OR_RETURN(void* window, comm->allocShared(2 * part));
  std::unique_ptr<CeilingProbe> probe(new CeilingProbe(comm, window, part));
  std::memset(window, kFill, 2 * part);
  for (int r = 0; r < p; ++r) {
    Result<SharedPart> sp = comm->sharedPart(window, r);
    if (!sp.isOk() || sp->bytes < 2 * part) {
      // Ranks without a common segment (the tcp transport forced): every rank sees the same.
      *why = sp.isOk() ? "rank " + std::to_string(r) + "'s window part is too small"
                       : "no shared-memory segment between the ranks (the tcp transport forced?)";
      return std::unique_ptr<CeilingProbe>();
    }
    probe->parts_[static_cast<size_t>(r)] = static_cast<uint8_t*>(sp->ptr);
  }
  BRAID_RETURN_IF_ERROR(comm->barrier().withContext("after filling the ceiling probe's window"));
  return probe;
}

CeilingProbe::CeilingProbe(Communicator* comm, void* window, size_t partBytes)
    : comm_(comm),
      window_(window),
      partBytes_(partBytes),
      parts_(static_cast<size_t>(comm->size()), nullptr),
      local_(partBytes, static_cast<uint8_t>(kFill)) {}

CeilingProbe::~CeilingProbe() { (void)comm_->freeShared(window_); }

Status CeilingProbe::measure(const CeilingWork& w, DataType type, int root, int iters, int warmup,
                             bool privateBuffers, double* ceilingUs) {
  const int p = comm_->size(), me = comm_->rank();
  const size_t es = dataTypeSize(type);
  // Whole elements, within a part.
  auto whole = [&](double bytes) {
    return std::min(partBytes_, static_cast<size_t>(std::max(0.0, bytes)) / es * es);
  };
  // Block b of `each` bytes, kept inside a part.
  auto at = [&](int b, size_t each) {
    return std::min(static_cast<size_t>(b) * each, partBytes_ - each);
  };
  const size_t publish = privateBuffers ? whole(w.publishBytes) : 0;
  const size_t reduceEach = whole(w.reduceBytes / (p - 1));
  const bool fromRoot = w.copyFrom == CeilingSource::kRootInput;
  const size_t copyEach = whole(fromRoot ? w.copyBytes : w.copyBytes / (p - 1));
  // Per kind of stores in the publish (plain, non-temporal) and phase (publish, reduce, copy),
  // every timed iteration's time on this rank. Iterations alternate the kinds: which is quicker
  // depends on the machine (core/copy.h: where a peer reads lines dirty in this core's cache
  // slowly, streaming them to memory first pays), and the ceiling takes the quicker.
  std::vector<double> phaseUs[2][3];
  auto timed = [&](int kind, int phase, bool count, auto&& body) -> Status {
    if (Status s = comm_->barrier(); !s.isOk()) {
      return s.withContext("barrier in the ceiling probe");
    }
    const double t0 = nowUs();
    body();
    if (count) phaseUs[kind][phase].push_back(nowUs() - t0);
    return Status::ok();
  };
  const int first = -2 * std::max(warmup, 1);
  for (int it = first; it < 2 * iters; ++it) {
    const bool count = it >= 0;
    const int kind = (it - first) & 1;
    // Every phase runs on every rank (same barriers), whether or not it has bytes to move.
    BRAID_RETURN_IF_ERROR(timed(kind, 0, count, [&] {
      if (publish > 0) copyToSharedAs(kind == 1, input(me), local_.data(), publish);
    }));
    BRAID_RETURN_IF_ERROR(timed(kind, 1, count, [&] {
      if (reduceEach == 0) return;
      const size_t off = at(me, reduceEach);
      for (int j = 0; j < p; ++j) {
        if (j != me) {
          reduceInto(type, ReduceOp::kSum, result(me) + off, input(j) + off, reduceEach / es);
        }
      }
    }));
    BRAID_RETURN_IF_ERROR(timed(kind, 2, count, [&] {
      if (copyEach == 0) return;
      if (fromRoot) {
        copyBytes(local_.data(), input(root), copyEach);
        return;
      }
      for (int j = 0; j < p; ++j) {
        if (j == me) continue;
        const size_t off = at(j, copyEach);
        const uint8_t* src =
            (w.copyFrom == CeilingSource::kPeersResults ? result(j) : input(j)) + off;
        copyBytes(local_.data() + off, src, copyEach);
      }
    }));
  }
  // Each phase's median iteration: a floor that one descheduled iteration (a shared VM's stolen
  // millisecond, which a 30 us phase cannot absorb) does not move.
  double mine[6];
  for (int k = 0; k < 2; ++k) {
    for (int i = 0; i < 3; ++i) {
      std::vector<double>& v = phaseUs[k][i];
      if (v.empty()) v.push_back(0);
      std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
      mine[3 * k + i] = v[v.size() / 2];
    }
  }
  std::vector<double> all(6 * static_cast<size_t>(p));
  BRAID_RETURN_IF_ERROR(comm_->allGather(mine, all.data(), 6, DataType::kFloat64)
                            .withContext("gathering the ceiling probe"));
  double total = -1;
  for (int k = 0; k < 2; ++k) {
    double sum = 0;
    for (int i = 0; i < 3; ++i) {
      double slowest = 0;
      for (int r = 0; r < p; ++r) {
        slowest = std::max(slowest, all[6 * static_cast<size_t>(r) + 3 * k + i]);
      }
      sum += slowest;
    }
    total = total < 0 ? sum : std::min(total, sum);
  }
  *ceilingUs = total;
  return Status::ok();
}

}  // namespace braid::perf
