// The Communicator's public operations: argument checks (bad input is rejected before anything
// is sent, and leaves the communicator usable), fingerprints, and dispatch to algorithms.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/comm_impl.h"
#include "collectives/shared_stores.h"
#include "core/clock.h"
#include "core/copy.h"
#include "core/log.h"
#include "core/params.h"
#include "core/trace.h"

namespace braid {
namespace {

using detail::Fingerprint;

Status checkTypes(DataType type, ReduceOp op, bool needsOp) {
  if (!isValid(type)) return invalidArgument("invalid data type " + std::to_string(static_cast<int>(type)));
  if (needsOp && !isValid(op)) return invalidArgument("invalid reduction op " + std::to_string(static_cast<int>(op)));
  return Status::ok();
}

Status checkBuffer(const void* buf, size_t bytes, const char* what) {
  if (bytes > 0 && buf == nullptr) return invalidArgument(std::string(what) + " is null");
  if (bytes > (size_t{1} << 46)) return invalidArgument(std::string(what) + " is larger than 64 TiB");
  return Status::ok();
}

// Partially overlapping input and output corrupt results; exact in-place is fine.
Status checkOverlap(const void* in, size_t inBytes, const void* out, size_t outBytes,
                    const void* inPlaceAt) {
  if (in != inPlaceAt && rangesOverlap(in, inBytes, out, outBytes)) {
    return invalidArgument("send and receive buffers overlap without being in place");
  }
  return Status::ok();
}

Status checkCount(size_t count, DataType type) {
  if (count > (size_t{1} << 44) / std::max<size_t>(1, dataTypeSize(type))) {
    return invalidArgument("count " + std::to_string(count) + " is too large");
  }
  return Status::ok();
}

Fingerprint makeFp(Collective c, size_t count, DataType type, ReduceOp op, int root) {
  Fingerprint fp;
  fp.collective = c;
  fp.count = count;
  fp.type = type;
  fp.op = op;
  fp.root = root;
  return fp;
}

}  // namespace

int Communicator::rank() const { return impl_->rank_; }
int Communicator::size() const { return impl_->size_; }
int Communicator::localRank() const { return impl_->localRank_; }
int Communicator::localSize() const { return static_cast<int>(impl_->localRanks_.size()); }
int Communicator::hostIndex() const { return impl_->hostOf_[impl_->rank_]; }
int Communicator::numHosts() const { return impl_->numHosts_; }
int64_t Communicator::timeoutMs() const { return impl_->timeoutMs(); }
int Communicator::hostOf(int rank) const {
  return rank >= 0 && rank < impl_->size_ ? impl_->hostOf_[rank] : -1;
}
Status Communicator::health() const { return impl_->health(); }

void Communicator::abort(const std::string& reason) {
  impl_->recordFailure(remoteError("rank " + std::to_string(impl_->rank_) + ": " + reason), true);
}

detail::Decision Communicator::Impl::decide(Collective c, size_t bytes) const {
  const detail::Algorithm* forced = forced_[static_cast<int>(c)];
  const std::shared_ptr<detail::Selector> sel = selector();
  if (!sel) {
    detail::Decision d;
    const std::vector<const detail::Algorithm*> rows = detail::algorithmsOf(c);
    d.row = forced != nullptr ? forced : rows.empty() ? nullptr : rows.front();
    if (d.row != nullptr) d.algorithm = d.row->name;
    d.reason = "no selector";
    return d;
  }
  // The selector (collectives/selector/): API force, BRAID_ALGO, tuning file, then the α-β-γ
  // model's cheapest candidate; identical on every rank. A rule naming an algorithm that cannot
  // run here (hierarchical on one host or on unequal hosts) runs its fallback: the algorithm
  // checks the layout itself.
  return sel->decide(c, bytes, forced);
}

std::shared_ptr<detail::Selector> Communicator::Impl::selector() const {
  std::lock_guard<std::mutex> lock(selectorMu_);
  return selector_;
}

void Communicator::Impl::installSelector(std::shared_ptr<detail::Selector> selector) {
  // The kind of stores into shared memory (a property of the machine: process-wide): what
  // BRAID_SHM_STREAM forces, else the model's probe measured faster, then what this process's
  // large same-host calls measure (collectives/shared_stores.h). A communicator with no local
  // peer copies nothing into shared memory and leaves the choice to those that do.
  const std::string stream = paramString("BRAID_SHM_STREAM");
  const bool localPeers = segment_ != nullptr && segment_->localSize() > 1;
  if (stream != "auto" || localPeers) {
    detail::SharedStores::configure(
        stream == "on" || (stream != "off" && selector->costModel().model().streamShared),
        stream == "auto");
  }
  if (segment_) {
    shmPlan_ = detail::makeShmPlan(selector->costModel().model(), segment_->localSize(),
                                   !segment_->singleCopyUncrowded(), segment_->singleCopyForced());
  }
  {
    std::lock_guard<std::mutex> lock(selectorMu_);
    selector_ = std::move(selector);
  }
  // A choose() that read the earlier selector holds decisionMu_ until it has cached its
  // decision, so this clear comes after it.
  std::lock_guard<std::mutex> lock(decisionMu_);
  decisionCache_.clear();
}

Communicator::Impl::Choice Communicator::Impl::choose(Collective c, size_t bytes) const {
  // The decision depends on the collective and size only (and on what is forced): computed once
  // per size, as evaluating the model and building its strings costs about a microsecond, as
  // much as a small same-host all-reduce.
  const uint64_t key = (static_cast<uint64_t>(bytes) << 4) | static_cast<uint64_t>(c);
  std::lock_guard<std::mutex> lock(decisionMu_);
  auto it = decisionCache_.find(key);
  if (it != decisionCache_.end()) return it->second;
  const detail::Decision d = decide(c, bytes);
  // Closed-loop tuning holds the model to its own picks only: a forced row or a tuning file's
  // may be one the model prices loosely, as it never picks it.
  const bool modelPick = d.reason.compare(0, 5, "model") == 0;
  const Choice choice{d.row, d.chunkBytes, modelPick ? d.predictedUs : -1, d.predictedUs};
  if (decisionCache_.size() >= kDecisionCacheEntries) decisionCache_.clear();
  decisionCache_.emplace(key, choice);
  return choice;
}

std::string Communicator::Impl::unavailableWhy(const detail::Algorithm& algo) const {
  const std::shared_ptr<detail::Selector> sel = selector();
  return sel ? sel->costModel().unavailableWhy(algo) : "";
}

std::vector<std::string> Communicator::algorithms(Collective collective) const {
  std::vector<std::string> names;
  for (const detail::Algorithm* a : detail::algorithmsOf(collective)) {
    if (impl_->unavailableWhy(*a).empty()) names.push_back(a->name);
  }
  return names;
}

std::string Communicator::algorithmFor(Collective collective, size_t bytes) const {
  const Impl::Choice choice = impl_->choose(collective, bytes);
  return choice.algo != nullptr ? choice.algo->name : "";
}

Status Communicator::setAlgorithm(Collective collective, const std::string& name) {
  const int c = static_cast<int>(collective);
  if (c < 0 || c >= Impl::kCollectives || detail::algorithmsOf(collective).empty()) {
    return invalidArgument(std::string("there is no algorithm to choose for ") +
                           collectiveName(collective));
  }
  const detail::Algorithm* algo = nullptr;
  if (!name.empty() && name != "auto") {
    BRAID_ASSIGN_OR_RETURN(algo, detail::lookupAlgorithm(collective, name));
    const std::string why = impl_->unavailableWhy(*algo);
    if (!why.empty()) {
      return invalidArgument(std::string(collectiveName(collective)) + " algorithm " + algo->name +
                             " " + why + " (ranks span " + std::to_string(impl_->numHosts_) +
                             " host(s))");
    }
  }
  std::lock_guard<std::mutex> lock(impl_->decisionMu_);
  impl_->forced_[c] = algo;
  impl_->decisionCache_.clear();
  return Status::ok();
}

double Communicator::predictedUs(Collective collective, size_t bytes,
                                 const std::string& algorithm) const {
  const std::shared_ptr<detail::Selector> sel = impl_->selector();
  if (!sel) return -1;
  if (algorithm.empty()) return impl_->decide(collective, bytes).predictedUs;
  const detail::Algorithm* algo = detail::findAlgorithm(collective, algorithm);
  if (algo == nullptr) return -1;
  return sel->costModel().predictUs(*algo, bytes);
}

std::string Communicator::selectorModel() const {
  const std::shared_ptr<detail::Selector> sel = impl_->selector();
  return sel ? sel->costModel().model().describe() : "none";
}

namespace {

// Runs the chosen row, with its pipelining chunk where the decision has one (a tuning-file rule's
// or the model's pick).
Status runChoice(const Communicator::Impl::Choice& choice, const detail::CollArgs& a,
                 const void* sendbuf, void* recvbuf, size_t count, int root) {
  a.ran = choice.algo->name;
  a.predictedUs = choice.predictedUs;
  if (a.startNs == 0 && (a.timeFromUs <= 0 || choice.predictedUs >= a.timeFromUs)) {
    a.startNs = nowNs();
  }
  // The kind of stores into shared memory, held to account by the calls that copy the most
  // (collectives/shared_stores.h).
  const detail::SharedStores::Call stores = detail::SharedStores::begin(
      a.shm != nullptr && a.size > 1, count * a.elemSize, choice.pricedUs);
  Status s;
  if (choice.chunkBytes == 0) {
    s = choice.algo->run(a, sendbuf, recvbuf, count, root);
  } else {
    detail::CollArgs withChunk = a;
    withChunk.chunkBytes = choice.chunkBytes;
    s = choice.algo->run(withChunk, sendbuf, recvbuf, count, root);
  }
  detail::SharedStores::end(stores, s.isOk());
  return s;
}

Status checkRoot(int root, int size) {
  if (root < 0 || root >= size) {
    return invalidArgument("root " + std::to_string(root) + " is outside [0, " + std::to_string(size) + ")");
  }
  return Status::ok();
}

}  // namespace

Status Communicator::Impl::Op::operator()(const detail::CollArgs& a) const {
  return runChoice(choice, a, sendbuf, recvbuf, count, root);
}

// Shared windows: the shm row on one host, above kWindowsMinBytes, with this rank's buffers in
// its windows runs the windowed schedule. Decided here, as the operation is built, and carried
// in its fingerprint (sharedWindowsRoot), so that its first announcement already differs from a
// peer's that decided otherwise, whatever schedule that peer runs.
void Communicator::Impl::markSharedWindows(const Choice& choice, size_t bytes, const void* sendbuf,
                                           size_t sendBytes, const void* recvbuf, size_t recvBytes,
                                           Fingerprint* fp) const {
  if (!segment_ || numHosts_ != 1 || size_ < 2 || bytes <= detail::kWindowsMinBytes ||
      choice.algo == nullptr || std::strcmp(choice.algo->name, "shm") != 0) {
    return;
  }
  if (segment_->windowRef(sendbuf, sendBytes) != 0 &&
      segment_->windowRef(recvbuf, recvBytes) != 0) {
    fp->root = detail::sharedWindowsRoot(fp->root);
  }
}

Result<Communicator::Impl::Op> Communicator::Impl::allReduceOp(const void* sendbuf, void* recvbuf,
                                                               size_t count, DataType type,
                                                               ReduceOp op) const {
  BRAID_RETURN_IF_ERROR(checkTypes(type, op, true));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  const size_t bytes = count * dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "allreduce send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "allreduce receive buffer"));
  BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, bytes, recvbuf, bytes, recvbuf));
  const Choice choice = choose(Collective::kAllReduce, bytes);
  Fingerprint fp = makeFp(Collective::kAllReduce, count, type, op, -1);
  markSharedWindows(choice, bytes, sendbuf, bytes, recvbuf, bytes, &fp);
  return Op{fp, choice, sendbuf, recvbuf, count, -1};
}

// BRAID_TRACE_FILE (core/trace.h): the tracer, and the timeline's zero taken by every rank at
// the exit of the second of two barriers (the first gathers ranks still finishing creation).
Status Communicator::Impl::startTrace() {
  std::string pattern = paramString("BRAID_TRACE_FILE");
  if (pattern.empty()) return Status::ok();
  if (!splitPrefix_.empty()) {
    // A split child writes beside its parent: "trace-%r.json" → "trace-%r.c0.s1.2.json".
    const std::string tag = prefixTag();
    const size_t ext = pattern.rfind(".json");
    pattern.insert(ext != std::string::npos && ext + 5 == pattern.size() ? ext : pattern.size(),
                   "." + tag);
  }
  auto tracer = std::make_unique<detail::Tracer>(pattern, rank_, size_);
  const Choice choice = choose(Collective::kBarrier, 0);
  for (int i = 0; i < 2; ++i) {
    BRAID_RETURN_IF_ERROR(run(makeFp(Collective::kBarrier, 0, DataType::kUint8, ReduceOp::kSum, -1),
                              true,
                              [=](const detail::CollArgs& a) {
                                return runChoice(choice, a, nullptr, nullptr, 0, -1);
                              })
                              .withContext("aligning the ranks' trace clocks (BRAID_TRACE_FILE)"));
  }
  tracer->setZero();
  tracer_ = std::move(tracer);
  p2p_->setTracer(tracer_.get());
  BRAID_INFO("tracing to %s", tracer_->path().c_str());
  return Status::ok();
}

void Communicator::Impl::traceCollective(const detail::CollArgs& a, uint64_t startNs,
                                         const Status& s) {
  const detail::Fingerprint& fp = a.fp;
  const size_t bytes = static_cast<size_t>(fp.count) * dataTypeSize(fp.type);
  std::string args = "\"seq\":" + std::to_string(a.seq) + ",\"algorithm\":\"" +
                     std::string(a.ran != nullptr ? a.ran : "") +
                     "\",\"count\":" + std::to_string(fp.count) +
                     ",\"bytes\":" + std::to_string(bytes);
  const int root = detail::fingerprintRoot(fp.root);
  if (root >= 0) args += ",\"root\":" + std::to_string(root);
  if (!s.isOk()) args += ",\"error\":\"" + std::string(codeName(s.code())) + "\"";
  tracer_->complete(collectiveName(fp.collective), "collective", detail::Tracer::kCollectives,
                    startNs, nowNs(), args);
}

Status Communicator::Impl::measureCallOverhead(detail::Selector& selector,
                                               std::vector<CallCheck>* checks) {
  if (checks != nullptr) checks->clear();
  if (size_ <= 1 || selector.costModel().model().source == "default") return Status::ok();
  // 8 bytes: the model's transfer terms are then almost only its hand-offs and α, so what
  // remains of a real call is the fixed work around them. 16 untimed calls bring the ranks in
  // step (the first ones after creation wait for the slowest rank's set-up).
  constexpr int kWarm = 16, kGroups = 8, kPerGroup = 8;
  // The third check's message: the size of the calibration's small segment copy (8 KiB).
  constexpr size_t kSmallCount = 1024;
  std::vector<double> in(kSmallCount, 1.0), out(kSmallCount, 0.0);
  // Calls are timed in groups of 8 back to back, and the quickest group's mean per call is
  // taken. Not single calls: a rank that arrives last finds the others waiting and returns at
  // once, so with 4 ranks on 2 cores a quarter of one rank's calls took 0.45 us where a stream
  // of them runs at 4-5 us a call (as braid-perf and handoff_floor measure), and the 10th
  // percentile of single calls read 0.45: the model's true 4.1 us then looked 9x too slow, and
  // no 4-rank model was ever cached. The quickest group, as the 10th percentile before: the
  // calls come in two modes, in step with the scheduler or not, and a stream of collectives
  // runs in step; the calls right after creation are often out of step.
  auto typicalUs = [&](const Choice& choice, double* typical, size_t count = 1) -> Status {
    const Fingerprint fp =
        makeFp(Collective::kAllReduce, count, DataType::kFloat64, ReduceOp::kSum, -1);
    auto body = [&](const detail::CollArgs& a) {
      return runChoice(choice, a, in.data(), out.data(), count, -1);
    };
    for (int i = 0; i < kWarm; ++i) BRAID_RETURN_IF_ERROR(run(fp, true, body));
    double best = 0;
    for (int g = 0; g < kGroups; ++g) {
      const uint64_t t0 = nowNs();
      for (int i = 0; i < kPerGroup; ++i) BRAID_RETURN_IF_ERROR(run(fp, true, body));
      const double us = static_cast<double>(nowNs() - t0) / 1000 / kPerGroup;
      if (g == 0 || us < best) best = us;
    }
    *typical = best;
    return Status::ok();
  };
  const detail::Decision d = selector.decide(detail::SelCollective::kAllReduce, sizeof(double));
  const double model = d.predictedUs >= 0 ? d.predictedUs : 0;
  double typical = 0;
  BRAID_RETURN_IF_ERROR(typicalUs(Choice{d.row, d.chunkBytes}, &typical));
  // The second check exercises the other path: the segment's row when the choice runs over the
  // links, else the cheapest other row (the links' α). A segment hand-off that a probe measured
  // while the ranks fell out of step (91 us against the 0.4 us the calls take, 2 ranks here)
  // prices the segment's algorithms out of every choice, and only timing them shows it.
  const detail::Algorithm* second = nullptr;
  double secondModel = -1, secondTypical = 0;
  if (checks != nullptr) {
    bool secondOther = false;  // on the other path than the choice
    for (const auto& [row, t] : selector.candidates(detail::SelCollective::kAllReduce, 8)) {
      if (row == d.row) continue;
      const bool other = detail::runsOnSegment(*row) != detail::runsOnSegment(*d.row);
      if (second == nullptr || (other && !secondOther) || (other == secondOther && t < secondModel)) {
        second = row;
        secondModel = t;
        secondOther = other;
      }
    }
    if (second != nullptr) {
      BRAID_RETURN_IF_ERROR(
          typicalUs(Choice{second, selector.costModel().bestChunk(*second, 8)}, &secondTypical));
    }
  }
  // The third: the segment's quickest row at 8 KiB, where the model's small-copy rate prices
  // it. A probe that timed those copies while the ranks fell out of step (0.93 GB/s against
  // 18 the next probe read, 2 ranks on the EPYC VM) priced shm at 8 KiB 9x too slow and
  // handed 2-32 KiB to the ring (12 us where shm takes 1); an 8-byte call does not show it.
  // Only where every rank has a core: there fresh models price it at 0.9-1.1x (2 ranks on the
  // 2-core VM); with 4 ranks on 2 cores at 1.1-3.0x, too near the 4x that flags a model.
  const size_t smallBytes = kSmallCount * sizeof(double);
  const detail::Algorithm* seg = nullptr;
  double segModel = -1, segTypical = 0;
  if (checks != nullptr && !selector.costModel().crowded()) {
    for (const auto& [row, t] : selector.candidates(detail::SelCollective::kAllReduce, smallBytes)) {
      if (detail::runsOnSegment(*row) && (seg == nullptr || t < segModel)) {
        seg = row;
        segModel = t;
      }
    }
    if (seg != nullptr) {
      BRAID_RETURN_IF_ERROR(typicalUs(
          Choice{seg, selector.costModel().bestChunk(*seg, smallBytes)}, &segTypical, kSmallCount));
    }
  }
  double over[4] = {std::max(0.0, typical - model), typical, secondTypical, segTypical};
  BRAID_ASSIGN_OR_RETURN(Op agree, allReduceOp(over, over, 4, DataType::kFloat64, ReduceOp::kMax));
  BRAID_RETURN_IF_ERROR(run(agree.fp, true, agree));
  selector.setCallUs(over[0]);
  if (checks != nullptr) {
    checks->push_back({d.algorithm, over[1], model});
    if (second != nullptr) checks->push_back({second->name, over[2], secondModel});
    if (seg != nullptr) checks->push_back({seg->name, over[3], segModel, smallBytes});
  }
  BRAID_INFO(
      "selector: a collective call costs %.2f us beyond the model's transfer terms "
      "(8-byte all-reduce, %s: quickest 8 calls %.2f us each, predicted %.2f us)",
      over[0], d.algorithm.c_str(), typical, model);
  if (seg != nullptr) {
    BRAID_INFO("selector: %zu-byte all-reduce, %s: quickest 8 calls %.2f us each (slowest rank), "
               "predicted %.2f us", smallBytes, seg->name, over[3], segModel);
  }
  return Status::ok();
}

Result<Communicator::Impl::Op> Communicator::Impl::reduceScatterOp(const void* sendbuf,
                                                                   void* recvbuf, size_t recvcount,
                                                                   DataType type,
                                                                   ReduceOp op) const {
  BRAID_RETURN_IF_ERROR(checkTypes(type, op, true));
  BRAID_RETURN_IF_ERROR(checkCount(recvcount * static_cast<size_t>(size_), type));
  const size_t block = recvcount * dataTypeSize(type);
  const size_t total = block * static_cast<size_t>(size_);
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, total, "reducescatter send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, block, "reducescatter receive buffer"));
  // In place: recvbuf is this rank's block of sendbuf.
  BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, total, recvbuf, block,
                                     static_cast<const uint8_t*>(recvbuf) - block * rank_));
  const Choice choice = choose(Collective::kReduceScatter, total);
  Fingerprint fp = makeFp(Collective::kReduceScatter, recvcount, type, op, -1);
  markSharedWindows(choice, total, sendbuf, total, recvbuf, block, &fp);
  return Op{fp, choice, sendbuf, recvbuf, recvcount, -1};
}

Result<Communicator::Impl::Op> Communicator::Impl::allGatherOp(const void* sendbuf, void* recvbuf,
                                                               size_t sendcount,
                                                               DataType type) const {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkCount(sendcount * static_cast<size_t>(size_), type));
  const size_t block = sendcount * dataTypeSize(type);
  const size_t total = block * static_cast<size_t>(size_);
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, block, "allgather send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, total, "allgather receive buffer"));
  // In place: sendbuf is this rank's block of recvbuf.
  BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, block, recvbuf, total,
                                     static_cast<const uint8_t*>(recvbuf) + block * rank_));
  const Choice choice = choose(Collective::kAllGather, total);
  Fingerprint fp = makeFp(Collective::kAllGather, sendcount, type, ReduceOp::kSum, -1);
  markSharedWindows(choice, total, sendbuf, block, recvbuf, total, &fp);
  return Op{fp, choice, sendbuf, recvbuf, sendcount, -1};
}

Result<Communicator::Impl::Op> Communicator::Impl::broadcastOp(const void* sendbuf, void* recvbuf,
                                                               size_t count, DataType type,
                                                               int root) const {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkRoot(root, size_));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  const size_t bytes = count * dataTypeSize(type);
  if (rank_ == root) {
    BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "broadcast send buffer"));
    BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, bytes, recvbuf, bytes, recvbuf));
  }
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "broadcast receive buffer"));
  const Choice choice = choose(Collective::kBroadcast, bytes);
  Fingerprint fp = makeFp(Collective::kBroadcast, count, type, ReduceOp::kSum, root);
  // Only the root's send buffer is read; the others' receive buffer stands for it.
  markSharedWindows(choice, bytes, rank_ == root ? sendbuf : recvbuf, bytes, recvbuf, bytes, &fp);
  return Op{fp, choice, sendbuf, recvbuf, count, root};
}

Status Communicator::allReduce(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                               ReduceOp op) {
  BRAID_ASSIGN_OR_RETURN(Impl::Op o, impl_->allReduceOp(sendbuf, recvbuf, count, type, op));
  return impl_->run(o.fp, true, o);
}

Result<std::shared_ptr<Work>> Communicator::allReduceAsync(const void* sendbuf, void* recvbuf,
                                                           size_t count, DataType type,
                                                           ReduceOp op) {
  BRAID_ASSIGN_OR_RETURN(Impl::Op o, impl_->allReduceOp(sendbuf, recvbuf, count, type, op));
  return impl_->runAsync(o.fp, o);
}

Status Communicator::reduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                   DataType type, ReduceOp op) {
  BRAID_ASSIGN_OR_RETURN(Impl::Op o, impl_->reduceScatterOp(sendbuf, recvbuf, recvcount, type, op));
  return impl_->run(o.fp, true, o);
}

Result<std::shared_ptr<Work>> Communicator::reduceScatterAsync(const void* sendbuf, void* recvbuf,
                                                               size_t recvcount, DataType type,
                                                               ReduceOp op) {
  BRAID_ASSIGN_OR_RETURN(Impl::Op o, impl_->reduceScatterOp(sendbuf, recvbuf, recvcount, type, op));
  return impl_->runAsync(o.fp, o);
}

Status Communicator::allGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType type) {
  BRAID_ASSIGN_OR_RETURN(Impl::Op o, impl_->allGatherOp(sendbuf, recvbuf, sendcount, type));
  return impl_->run(o.fp, true, o);
}

Result<std::shared_ptr<Work>> Communicator::allGatherAsync(const void* sendbuf, void* recvbuf,
                                                           size_t sendcount, DataType type) {
  BRAID_ASSIGN_OR_RETURN(Impl::Op o, impl_->allGatherOp(sendbuf, recvbuf, sendcount, type));
  return impl_->runAsync(o.fp, o);
}

Status Communicator::broadcast(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                               int root) {
  BRAID_ASSIGN_OR_RETURN(Impl::Op o, impl_->broadcastOp(sendbuf, recvbuf, count, type, root));
  return impl_->run(o.fp, true, o);
}

Result<std::shared_ptr<Work>> Communicator::broadcastAsync(const void* sendbuf, void* recvbuf,
                                                           size_t count, DataType type, int root) {
  BRAID_ASSIGN_OR_RETURN(Impl::Op o, impl_->broadcastOp(sendbuf, recvbuf, count, type, root));
  return impl_->runAsync(o.fp, o);
}

Status Communicator::reduce(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                            ReduceOp op, int root) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, op, true));
  BRAID_RETURN_IF_ERROR(checkRoot(root, size()));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  const size_t bytes = count * dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "reduce send buffer"));
  void* out = rank() == root ? recvbuf : nullptr;
  if (rank() == root) {
    BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "reduce receive buffer"));
    BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, bytes, recvbuf, bytes, recvbuf));
  }
  const Impl::Choice choice = impl_->choose(Collective::kReduce, bytes);
  return impl_->run(
      makeFp(Collective::kReduce, count, type, op, root), true,
      [=](const detail::CollArgs& a) { return runChoice(choice, a, sendbuf, out, count, root); });
}

Status Communicator::allToAll(const void* sendbuf, void* recvbuf, size_t count, DataType type) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkCount(count * static_cast<size_t>(size()), type));
  const size_t bytes = count * dataTypeSize(type) * static_cast<size_t>(size());
  BRAID_RETURN_IF_ERROR(checkBuffer(sendbuf, bytes, "alltoall send buffer"));
  BRAID_RETURN_IF_ERROR(checkBuffer(recvbuf, bytes, "alltoall receive buffer"));
  BRAID_RETURN_IF_ERROR(checkOverlap(sendbuf, bytes, recvbuf, bytes, recvbuf));
  const Impl::Choice choice = impl_->choose(Collective::kAllToAll, bytes);
  return impl_->run(
      makeFp(Collective::kAllToAll, count, type, ReduceOp::kSum, -1), true,
      [=](const detail::CollArgs& a) { return runChoice(choice, a, sendbuf, recvbuf, count, -1); });
}

Status Communicator::barrier() {
  const Impl::Choice choice = impl_->choose(Collective::kBarrier, 0);
  return impl_->run(
      makeFp(Collective::kBarrier, 0, DataType::kUint8, ReduceOp::kSum, -1), true,
      [=](const detail::CollArgs& a) { return runChoice(choice, a, nullptr, nullptr, 0, -1); });
}

Result<void*> Communicator::allocShared(size_t bytes) { return impl_->allocShared(bytes); }

Status Communicator::freeShared(void* ptr) { return impl_->freeShared(ptr); }

Result<SharedPart> Communicator::sharedPart(const void* window, int rank) {
  return impl_->sharedPart(window, rank);
}

// Every rank's word, gathered from inside an operation (allocShared, freeShared): they agree
// across hosts, which the host's segment alone cannot see.
Result<std::vector<uint64_t>> Communicator::Impl::gatherWords(uint64_t word) {
  std::vector<uint64_t> words(static_cast<size_t>(size_));
  BRAID_ASSIGN_OR_RETURN(Op o, allGatherOp(&word, words.data(), 1, DataType::kUint64));
  BRAID_RETURN_IF_ERROR(run(o.fp, true, o));
  return words;
}

Result<void*> Communicator::Impl::allocShared(size_t bytes) {
  // The result travels out of the body: a rank that cannot allocate fails the call on every
  // rank (they agree on it), not the communicator; only a failed synchronization does that.
  Result<void*> out = internalError("allocShared did not run");
  const uint32_t id = ++lastWindowId_;
  BRAID_RETURN_IF_ERROR(run(
      makeFp(Collective::kBarrier, 0, DataType::kUint8, ReduceOp::kSum, detail::kRootWindowAlloc),
      true, [&](const detail::CollArgs& a) -> Status {
        if (a.hostShm != nullptr) {
          out = a.hostShm->allocWindow(id, bytes, a.seq, a.fp);
          if (!out.isOk() && out.status().code() != Code::kSystem) return out.status();
        } else {
          const size_t mapBytes = std::max<size_t>(bytes, 1);
          void* p =
              mmap(nullptr, mapBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          if (p == MAP_FAILED) {
            out = errnoError("allocShared of " + std::to_string(bytes) + " bytes", errno);
          } else {
            privateWindows_[p] = {id, mapBytes};
            out = p;
          }
        }
        BRAID_ASSIGN_OR_RETURN(std::vector<uint64_t> failed, gatherWords(out.isOk() ? 0 : 1));
        for (int r = 0; r < size_ && out.isOk(); ++r) {
          if (failed[static_cast<size_t>(r)] == 0) continue;
          releaseWindow(id, *out);
          out = systemError("allocShared of " + std::to_string(bytes) + " bytes failed on rank " +
                            std::to_string(r) + " (see its error); nothing was allocated");
        }
        return Status::ok();
      }));
  return out;
}

void Communicator::Impl::releaseWindow(uint32_t id, void* ptr) {
  if (auto it = privateWindows_.find(ptr); it != privateWindows_.end()) {
    munmap(it->first, it->second.second);
    privateWindows_.erase(it);
  } else if (segment_) {
    segment_->freeWindow(id);
  }
}

// Local: unmapping this process's view of a window is safe whatever the peers do (the pages
// live while any process maps them). It runs as an operation (no sequence number) so that it
// keeps issue order with the asynchronous ones that may still use the window.
Status Communicator::Impl::freeShared(void* ptr) {
  Status out;
  BRAID_RETURN_IF_ERROR(run(
      makeFp(Collective::kBarrier, 0, DataType::kUint8, ReduceOp::kSum, detail::kRootWindowFree),
      false, [&](const detail::CollArgs& a) -> Status {
        auto it = privateWindows_.find(ptr);
        const uint32_t id = it != privateWindows_.end() ? it->second.first
                            : a.hostShm != nullptr      ? a.hostShm->windowId(ptr)
                                                        : 0;
        if (id == 0) {
          out = invalidArgument(
              "freeShared: this pointer is not one allocShared returned on "
              "this communicator (or it was freed already)");
        } else {
          releaseWindow(id, ptr);
        }
        return Status::ok();
      }));
  return out;
}

// Local, and run as an operation like freeShared: the window table changes only in operations,
// which may run on the progress thread.
Result<SharedPart> Communicator::Impl::sharedPart(const void* window, int rank) {
  Result<SharedPart> out = internalError("sharedPart did not run");
  BRAID_RETURN_IF_ERROR(run(
      makeFp(Collective::kBarrier, 0, DataType::kUint8, ReduceOp::kSum, detail::kRootWindowQuery),
      false, [&](const detail::CollArgs& a) -> Status {
        if (rank < 0 || rank >= size_) {
          out = invalidArgument("sharedPart: rank " + std::to_string(rank) +
                                " is not a rank of this communicator of " +
                                std::to_string(size_));
          return Status::ok();
        }
        auto it = privateWindows_.find(const_cast<void*>(window));
        if (it != privateWindows_.end()) {
          if (rank == rank_) {
            out = SharedPart{it->first, it->second.second};
          } else {
            out = invalidArgument("sharedPart: rank " + std::to_string(rank) +
                                  "'s memory is not mapped on rank " + std::to_string(rank_) +
                                  " (no shared segment here: another host, the tcp transport "
                                  "forced, or one rank on this host)");
          }
          return Status::ok();
        }
        uint8_t* base = nullptr;
        size_t bytes = 0;
        if (a.hostShm == nullptr || a.hostShm->windowId(window) == 0) {
          out = invalidArgument(
              "sharedPart: this pointer is not one allocShared returned on this communicator "
              "(or it was freed)");
        } else if (!a.hostShm->windowPart(window, rank, &base, &bytes)) {
          out = invalidArgument("sharedPart: rank " + std::to_string(rank) +
                                " is not on rank " + std::to_string(rank_) +
                                "'s host; its memory is not mapped here");
        } else {
          out = SharedPart{base, bytes};
        }
        return Status::ok();
      }));
  return out;
}

Status Communicator::send(const void* buf, size_t count, DataType type, int peer) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  if (peer < 0 || peer >= size() || peer == rank()) {
    return invalidArgument("send peer " + std::to_string(peer) + " is not another rank of this communicator");
  }
  const size_t bytes = count * dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(buf, bytes, "send buffer"));
  // The receiver checks the sender's fingerprint, so both sides describe the message as kSend.
  return impl_->run(makeFp(Collective::kSend, count, type, ReduceOp::kSum, -1), false,
                    [=](const detail::CollArgs& a) {
                      a.p2p->begin(0, a.fp);
                      a.p2p->postSend(peer, buf, bytes);
                      return a.p2p->waitAll();
                    });
}

Status Communicator::recv(void* buf, size_t count, DataType type, int peer) {
  BRAID_RETURN_IF_ERROR(checkTypes(type, ReduceOp::kSum, false));
  BRAID_RETURN_IF_ERROR(checkCount(count, type));
  if (peer < 0 || peer >= size() || peer == rank()) {
    return invalidArgument("recv peer " + std::to_string(peer) + " is not another rank of this communicator");
  }
  const size_t bytes = count * dataTypeSize(type);
  BRAID_RETURN_IF_ERROR(checkBuffer(buf, bytes, "recv buffer"));
  return impl_->run(makeFp(Collective::kSend, count, type, ReduceOp::kSum, -1), false,
                    [=](const detail::CollArgs& a) {
                      a.p2p->begin(0, a.fp);
                      a.p2p->postRecv(peer, buf, bytes);
                      return a.p2p->waitAll();
                    });
}

namespace {

Status checkP2pOp(const P2pOp& op, size_t index, int rank, int size) {
  const std::string what = "point-to-point group operation " + std::to_string(index) + " (" +
                           (op.isSend ? "send to " : "receive from ") + std::to_string(op.peer) +
                           ")";
  if (op.peer < 0 || op.peer >= size || op.peer == rank) {
    return invalidArgument(what + ": peer " + std::to_string(op.peer) +
                           " is not another rank of this communicator");
  }
  Status s = checkTypes(op.type, ReduceOp::kSum, false);
  if (s.isOk()) s = checkCount(op.count, op.type);
  if (s.isOk()) s = checkBuffer(op.buf, op.count * dataTypeSize(op.type), "buffer");
  return s.isOk() ? s : s.withContext(what);
}

// Runs one point-to-point group inside a communicator call: posts every operation, then waits
// for all of them; while it waits, reports each completed operation (hooks.completed) and lets
// more operations join (hooks.join; the first invalid one stops joining and is the result once
// what was posted has completed). Every message is described as a kSend of its own count and
// type (see send), so a receive checks the matching send's count.
Status runP2pGroup(const detail::CollArgs& a, std::vector<P2pOp>& ops, const P2pGroupHooks& hooks,
                   int rank, int size) {
  Status joinError;
  size_t posted = 0;
  std::vector<size_t> open;  // posted, not yet reported complete
  auto post = [&] {
    for (; posted < ops.size(); ++posted) {
      const P2pOp& op = ops[posted];
      a.p2p->begin(0, makeFp(Collective::kSend, op.count, op.type, ReduceOp::kSum, -1));
      const size_t bytes = op.count * dataTypeSize(op.type);
      if (op.isSend) {
        a.p2p->postSend(op.peer, op.buf, bytes);
      } else {
        a.p2p->postRecv(op.peer, op.buf, bytes);
      }
      open.push_back(posted);
    }
  };
  const std::function<void()> poll = [&] {
    if (hooks.completed) {
      size_t kept = 0;
      for (size_t i : open) {
        if (a.p2p->done(static_cast<detail::P2p::Handle>(i))) {
          hooks.completed(i);
        } else {
          open[kept++] = i;
        }
      }
      open.resize(kept);
    }
    if (!hooks.join || !joinError.isOk()) return;
    const size_t before = ops.size();
    hooks.join(&ops);
    for (size_t i = before; i < ops.size(); ++i) {
      joinError = checkP2pOp(ops[i], i, rank, size);
      if (!joinError.isOk()) {
        ops.resize(i);
        break;
      }
    }
    post();
  };
  post();
  Status s = a.p2p->waitAllPolling(poll);
  return s.isOk() ? joinError : s;
}

}  // namespace

Status Communicator::sendRecvGroup(std::vector<P2pOp> ops, const P2pGroupHooks& hooks) {
  for (size_t i = 0; i < ops.size(); ++i) {
    BRAID_RETURN_IF_ERROR(checkP2pOp(ops[i], i, rank(), size()));
  }
  if (ops.empty() && !hooks.join) return Status::ok();
  const Fingerprint fp =
      ops.empty() ? makeFp(Collective::kSend, 0, DataType::kUint8, ReduceOp::kSum, -1)
                  : makeFp(Collective::kSend, ops[0].count, ops[0].type, ReduceOp::kSum, -1);
  return impl_->run(fp, false, [&](const detail::CollArgs& a) {
    return runP2pGroup(a, ops, hooks, rank(), size());
  });
}

}  // namespace braid
