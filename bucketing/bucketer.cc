// The Bucketer's caller-facing side: options, registration, layout storage, markReady and
// finishStep. The engine thread (every collective) is in engine.cc; see bucketer_impl.h for the
// threading rules.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "braid/comm.hpp"
#include "bucketing/bucketer_impl.h"
#include "core/clock.h"
#include "core/copy.h"
#include "core/log.h"
#include "core/params.h"
#include "core/reduce.h"

namespace braid {

namespace {
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kAlign = 64;
size_t alignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
double msBetween(uint64_t from, uint64_t to) {
  return to > from ? static_cast<double>(to - from) * 1e-6 : 0.0;
}
}  // namespace

void AlignedFree::operator()(uint8_t* p) const { std::free(p); }

Bucketer::Bucketer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bucketer::~Bucketer() = default;

Bucketer::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  engineCv_.notify_all();
  if (engine_.joinable()) engine_.join();
}

Result<std::unique_ptr<Bucketer>> Bucketer::create(Communicator* comm, BucketerOptions options) {
  if (comm == nullptr) return invalidArgument("Bucketer::create: communicator is null");
  std::unique_ptr<Impl> impl(new Impl());
  BRAID_RETURN_IF_ERROR(impl->init(comm, std::move(options)));
  return std::unique_ptr<Bucketer>(new Bucketer(std::move(impl)));
}

Status Bucketer::Impl::init(Communicator* comm, BucketerOptions options) {
  comm_ = comm;
  opts_ = std::move(options);
  if (opts_.maxInFlight < 1) return invalidArgument("Bucketer: maxInFlight must be at least 1");
  const int64_t capMb = paramInt("BRAID_BUCKET_CAP_MB");
  switch (opts_.sizing) {
    case BucketSizing::kDefault:
      autoSize_ = capMb <= 0;
      break;
    case BucketSizing::kFixed:
      autoSize_ = false;
      break;
    case BucketSizing::kAuto:
      autoSize_ = true;
      break;
    default:
      return invalidArgument("Bucketer: unknown sizing mode");
  }
  // kAuto reduces its first step with the default caps, then resizes from what it saw.
  cap_ = opts_.bucketCapBytes != 0 ? opts_.bucketCapBytes
                                   : (capMb > 0 ? static_cast<size_t>(capMb) * kMiB : 25 * kMiB);
  const int64_t firstMb = paramInt("BRAID_FIRST_BUCKET_CAP_MB");
  firstCap_ = opts_.firstBucketCapBytes != 0
                  ? opts_.firstBucketCapBytes
                  : (firstMb > 0 ? static_cast<size_t>(firstMb) * kMiB : kMiB);
  pieceBytes_ =
      opts_.pieceBytes != 0
          ? opts_.pieceBytes
          : static_cast<size_t>(std::max<int64_t>(0, paramInt("BRAID_BUCKET_PIECE_BYTES")));
  op_ = opts_.reduction == GradReduction::kAverage ? ReduceOp::kAvg : ReduceOp::kSum;
  timeoutMs_ = comm_->timeoutMs();
  spinNs_ = static_cast<uint64_t>(std::max<int64_t>(0, paramInt("BRAID_SHM_SPIN_US"))) * 1000;
  metricsPath_ = opts_.metricsFile.empty() ? paramString("BRAID_METRICS_FILE") : opts_.metricsFile;
  if (metricsPath_ == "-") metricsPath_.clear();
  if (!metricsPath_.empty()) {
    const int rank = comm_->rank();
    std::string out;
    bool hasRank = false;
    for (size_t i = 0; i < metricsPath_.size(); ++i) {
      if (metricsPath_[i] == '%' && i + 1 < metricsPath_.size()) {
        const char c = metricsPath_[++i];
        if (c == 'r') {
          out += std::to_string(rank);
          hasRank = true;
        } else if (c == 'p') {
          out += std::to_string(getpid());
        } else {
          out += '%';
          out += c;
        }
      } else {
        out += metricsPath_[i];
      }
    }
    if (!hasRank && rank != 0) out += ".rank" + std::to_string(rank);
    metricsPath_ = out;
  }
  BRAID_RETURN_IF_ERROR(initCodecs());
  engine_ = std::thread([this] { engineLoop(); });
  return Status::ok();
}

// Both size classes are parsed here so that a bad spec fails create() on every rank alike.
Status Bucketer::Impl::initCodecs() {
  auto make = [this](const std::string& spec, const char* what,
                     std::unique_ptr<Codec>* out) -> Status {
    if (spec.empty() || spec == "none") return Status::ok();
    std::string name;
    CodecOptions co;
    co.average = op_ == ReduceOp::kAvg;
    BRAID_RETURN_IF_ERROR(
        parseCodecSpec(spec, &name, &co).withContext(std::string("Bucketer ") + what));
    if (name == "none") return Status::ok();
    BRAID_ASSIGN_OR_RETURN(*out, createCodec(name, co));
    return Status::ok();
  };
  std::string spec = opts_.codec;
  if (spec.empty()) spec = paramString("BRAID_CODEC");
  BRAID_RETURN_IF_ERROR(make(spec, "codec", &codec_));
  BRAID_RETURN_IF_ERROR(make(opts_.smallBucketCodec, "smallBucketCodec", &smallCodec_));
  const int64_t minBytes = paramInt("BRAID_CODEC_MIN_BYTES");
  codecMinBytes_ = opts_.codecMinBytes != 0 ? opts_.codecMinBytes
                                            : static_cast<size_t>(std::max<int64_t>(0, minBytes));
  const bool interOnly =
      opts_.codecInterHostOnly || paramString("BRAID_CODEC_SCOPE") == "inter-host";
  if (interOnly && (codec_ != nullptr || smallCodec_ != nullptr)) {
    if (comm_->numHosts() == 1) {
      BRAID_INFO("bucketer: inter-host-only compression on one host: nothing is compressed");
      codec_.reset();
      smallCodec_.reset();
    } else {
      // Collective on comm_, like create() itself; before the engine issues anything on it.
      BRAID_ASSIGN_OR_RETURN(hostComm_, comm_->split(comm_->hostIndex(), comm_->rank()));
      BRAID_ASSIGN_OR_RETURN(leaderComm_,
                             comm_->split(comm_->localRank() == 0 ? 0 : -1, comm_->hostIndex()));
    }
  }
  if (codec_ != nullptr || smallCodec_ != nullptr) {
    BRAID_INFO("bucketer: codec %s for float32 buckets of at least %zu bytes, %s below%s",
               codec_ != nullptr ? codec_->info().name : "none", codecMinBytes_,
               smallCodec_ != nullptr ? smallCodec_->info().name : "none",
               hostComm_ != nullptr ? "; inter-host stage only" : "");
  }
  return Status::ok();
}

// Inter-host-only: every host sums the bucket into its first rank, the first ranks run the
// codec among themselves, and broadcast the result inside their host. The codec averages over
// hosts, so an average first scales the host sums by hosts/ranks: (Σ_h hosts/p·s_h)/hosts = Σ/p
// whatever the number of ranks per host. Its error feedback lives on the first ranks only.
Status Bucketer::Impl::reduceCompressed(Bucket& b) {
  Codec& c = *b.codec;
  float* data = reinterpret_cast<float*>(b.data);
  if (hostComm_ == nullptr) return c.allReduce(*comm_, b.codecId, data, b.count, b.shapes);
  BRAID_RETURN_IF_ERROR(
      hostComm_->reduce(data, data, b.count, DataType::kFloat32, ReduceOp::kSum, 0));
  if (leaderComm_ != nullptr) {
    if (op_ == ReduceOp::kAvg) {
      const float scale =
          static_cast<float>(comm_->numHosts()) / static_cast<float>(comm_->size());
      for (size_t i = 0; i < b.count; ++i) data[i] *= scale;
    }
    BRAID_RETURN_IF_ERROR(c.allReduce(*leaderComm_, b.codecId, data, b.count, b.shapes));
  }
  return hostComm_->broadcast(data, data, b.count, DataType::kFloat32, 0);
}

Codec* Bucketer::Impl::codecFor(DataType type, size_t bytes) const {
  if (type != DataType::kFloat32 || bytes == 0) return nullptr;
  return bytes >= codecMinBytes_ ? codec_.get() : smallCodec_.get();
}

std::string Bucketer::Impl::paramLabel(int idx) const {
  const detail::ParamSpec& p = specs_[static_cast<size_t>(idx)];
  std::string s = "'" + (p.name.empty() ? std::string("?") : p.name) + "' (id " +
                  std::to_string(p.id) + ", " + std::to_string(p.count) + " x " +
                  dataTypeName(p.type) + ")";
  return s;
}

Result<int> Bucketer::Impl::lookup(uint32_t id, const char* what) const {
  auto it = indexOf_.find(id);
  if (it == indexOf_.end()) {
    return invalidArgument(std::string(what) + ": parameter id " + std::to_string(id) +
                           " was not registered (rank " + std::to_string(comm_->rank()) + ")");
  }
  return it->second;
}

Status Bucketer::registerParam(uint32_t id, size_t count, DataType type, const std::string& name) {
  Impl& m = *impl_;
  if (m.finalized_) {
    return invalidUsage("registerParam(" + std::to_string(id) +
                        "): the layout is already finalized; register every parameter first");
  }
  if (!isValid(type)) return invalidArgument("registerParam: invalid data type");
  if (m.indexOf_.count(id) != 0) {
    return invalidArgument("registerParam: parameter id " + std::to_string(id) +
                           " is already registered");
  }
  m.indexOf_[id] = static_cast<int>(m.specs_.size());
  detail::ParamSpec spec;
  spec.id = id;
  spec.count = count;
  spec.type = type;
  spec.name = name;
  m.specs_.push_back(std::move(spec));
  return Status::ok();
}

Status Bucketer::registerParam(uint32_t id, const std::vector<size_t>& shape, DataType type,
                               const std::string& name) {
  size_t count = 1;
  for (size_t d : shape) count *= d;
  BRAID_RETURN_IF_ERROR(registerParam(id, count, type, name));  // {} is a scalar: 1 element
  // A matrix view needs two dimensions with elements; anything else stays 1-D.
  if (shape.size() >= 2 && count > 0) impl_->specs_.back().rows = shape[0];
  return Status::ok();
}

Status Bucketer::finalize() {
  Impl& m = *impl_;
  if (m.finalized_) return invalidUsage("Bucketer::finalize called twice");
  BRAID_RETURN_IF_ERROR(m.runOnEngine([&m] { return m.verifyRegistrations(); }, "finalize"));
  if (m.autoSize_) {
    BRAID_RETURN_IF_ERROR(m.runOnEngine([&m] { return m.calibrate(); }, "calibration"));
  }
  const size_t n = m.specs_.size();
  m.marked_.reset(new std::atomic<uint8_t>[n]);
  m.observed_.reset(new std::atomic<int>[n]);
  for (size_t i = 0; i < n; ++i) {
    m.marked_[i].store(0);
    m.observed_[i].store(-1);
  }
  m.hasData_.assign(n, 0);
  m.used_.assign(n, 0);
  m.userPtr_.assign(n, nullptr);
  m.readyNs_.assign(n, 0);
  m.globallyUnused_.assign(n, 0);
  m.applyPlan(detail::planBuckets(m.specs_, detail::reverseOrder(n), m.cap_, m.firstCap_));
  m.rebuildPending_ = m.opts_.rebuildLayout || m.autoSize_;
  m.finalized_ = true;
  BRAID_INFO("bucketer: %zu parameters in %zu buckets (cap %zu, first %zu, %s%s)", n,
             m.buckets_.size(), m.cap_, m.firstCap_, m.autoSize_ ? "auto" : "fixed",
             m.opts_.zeroCopy ? ", zero-copy" : "");
  return Status::ok();
}

void Bucketer::Impl::applyPlan(const detail::BucketPlan& plan) {
  const size_t n = specs_.size();
  std::vector<int> newBucketOf(n, -1);
  std::vector<size_t> newOffset(n, 0);
  std::vector<std::unique_ptr<Bucket>> nb;
  size_t total = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    auto b = std::make_unique<Bucket>();
    b->type = specs_[static_cast<size_t>(plan[k].front())].type;
    b->params = plan[k];
    for (int idx : plan[k]) {
      newBucketOf[static_cast<size_t>(idx)] = static_cast<int>(k);
      newOffset[static_cast<size_t>(idx)] = b->bytes;
      b->bytes += specs_[static_cast<size_t>(idx)].bytes();
    }
    b->count = b->bytes / dataTypeSize(b->type);
    total += alignUp(b->bytes);
    nb.push_back(std::move(b));
  }
  AlignedBytes storage(static_cast<uint8_t*>(std::aligned_alloc(kAlign, std::max(total, kAlign))));
  std::memset(storage.get(), 0, std::max(total, kAlign));
  size_t at = 0;
  for (auto& b : nb) {
    b->data = b->live = storage.get() + at;
    at += alignUp(b->bytes);
    b->codec = codecFor(b->type, b->bytes);
    if (b->codec != nullptr) {
      b->codecId = detail::hashBucket(specs_, b->params);
      for (int idx : b->params) {
        const detail::ParamSpec& p = specs_[static_cast<size_t>(idx)];
        if (p.rows != 0) {
          b->shapes.push_back(TensorShape{p.rows, p.count / p.rows});
        } else {
          b->shapes.push_back(TensorShape{p.count, 1});
        }
      }
    }
  }
  moveCodecState(nb);
  // Carry the current contents over (zero-copy gradients and last results stay readable).
  if (storage_) {
    for (size_t i = 0; i < n; ++i) {
      const Bucket& ob = *buckets_[static_cast<size_t>(bucketOf_[i])];
      Bucket& b = *nb[static_cast<size_t>(newBucketOf[i])];
      copyBytes(b.data + newOffset[i], ob.live + offsetOf_[i], specs_[i].bytes());
    }
  }
  buckets_ = std::move(nb);
  bucketOf_ = std::move(newBucketOf);
  offsetOf_ = std::move(newOffset);
  storage_ = std::move(storage);
  layoutVersion_.fetch_add(1, std::memory_order_acq_rel);
}

// Error feedback across a rebuild: every old bucket's residual is cut into its parameters and
// reassembled into the new buckets holding them (zeros for a parameter whose old bucket kept
// none); the old states are dropped. Other codec state (PowerSGD's Q) starts afresh. Runs on the
// engine thread (rebuildNow) or before the engine has used a codec (finalize).
void Bucketer::Impl::moveCodecState(const std::vector<std::unique_ptr<Bucket>>& nb) {
  if (buckets_.empty() || (codec_ == nullptr && smallCodec_ == nullptr)) return;
  const size_t n = specs_.size();
  std::vector<std::vector<float>> perParam(n);
  std::vector<float> tmp;
  for (const auto& ob : buckets_) {
    if (ob->codec == nullptr) continue;
    if (ob->codec->info().errorFeedback) {
      tmp.assign(ob->count, 0.0f);
      if (ob->codec->getResidual(ob->codecId, tmp.data(), tmp.size()).isOk()) {
        size_t at = 0;
        for (int idx : ob->params) {
          const size_t c = specs_[static_cast<size_t>(idx)].count;
          perParam[static_cast<size_t>(idx)].assign(tmp.begin() + static_cast<long>(at),
                                                    tmp.begin() + static_cast<long>(at + c));
          at += c;
        }
      }
    }
    ob->codec->dropState(ob->codecId);
  }
  for (const auto& b : nb) {
    if (b->codec == nullptr || !b->codec->info().errorFeedback) continue;
    tmp.assign(b->count, 0.0f);
    size_t at = 0;
    bool any = false;
    for (int idx : b->params) {
      const std::vector<float>& r = perParam[static_cast<size_t>(idx)];
      if (!r.empty()) {
        std::copy(r.begin(), r.end(), tmp.begin() + static_cast<long>(at));
        any = true;
      }
      at += specs_[static_cast<size_t>(idx)].count;
    }
    if (any) {
      Status s = b->codec->setResidual(b->codecId, tmp.data(), tmp.size());
      if (!s.isOk()) BRAID_WARN("bucketer: residual not carried over: %s", s.toString().c_str());
    }
  }
}

void Bucketer::Impl::resetBucketCounters() {
  for (auto& b : buckets_) {
    b->pending.store(static_cast<int>(b->params.size()), std::memory_order_relaxed);
    b->live = b->data;
    b->launchNs = b->startNs = b->doneNs = 0;
    b->wireBytes = 0;
  }
}

Result<void*> Bucketer::gradientBuffer(uint32_t id) {
  Impl& m = *impl_;
  if (!m.finalized_) return invalidUsage("gradientBuffer: call finalize() first");
  if (!m.opts_.zeroCopy)
    return invalidUsage("gradientBuffer: the Bucketer is not in zero-copy mode");
  BRAID_ASSIGN_OR_RETURN(int idx, m.lookup(id, "gradientBuffer"));
  const size_t i = static_cast<size_t>(idx);
  return static_cast<void*>(m.buckets_[static_cast<size_t>(m.bucketOf_[i])]->data + m.offsetOf_[i]);
}

Result<const void*> Bucketer::result(uint32_t id) const {
  const Impl& m = *impl_;
  if (!m.finalized_) return invalidUsage("result: call finalize() first");
  BRAID_ASSIGN_OR_RETURN(int idx, m.lookup(id, "result"));
  const size_t i = static_cast<size_t>(idx);
  return static_cast<const void*>(m.buckets_[static_cast<size_t>(m.bucketOf_[i])]->live +
                                  m.offsetOf_[i]);
}

void Bucketer::zeroGradients() {
  Impl& m = *impl_;
  for (auto& b : m.buckets_) std::memset(b->data, 0, b->bytes);
}

uint32_t Bucketer::layoutVersion() const {
  return impl_->layoutVersion_.load(std::memory_order_acquire);
}

std::vector<std::vector<uint32_t>> Bucketer::bucketLayout() const {
  std::vector<std::vector<uint32_t>> out;
  for (const auto& b : impl_->buckets_) {
    out.emplace_back();
    for (int idx : b->params) out.back().push_back(impl_->specs_[static_cast<size_t>(idx)].id);
  }
  return out;
}

size_t Bucketer::bucketCount() const { return impl_->buckets_.size(); }

bool Bucketer::globallyUnused(uint32_t id) const {
  auto r = impl_->lookup(id, "globallyUnused");
  return r.isOk() && impl_->globallyUnused_[static_cast<size_t>(*r)] != 0;
}

Status Bucketer::beginStep(bool accumulate) {
  Impl& m = *impl_;
  if (!m.finalized_) return invalidUsage("beginStep: call finalize() first");
  if (m.stepActive_.load(std::memory_order_acquire)) {
    return invalidUsage("beginStep: step " + std::to_string(m.stepIndex_) +
                        " has not been finished (call finishStep())");
  }
  ++m.stepIndex_;
  m.stepAccumulate_ = accumulate;
  const size_t n = m.specs_.size();
  for (size_t i = 0; i < n; ++i) {
    m.marked_[i].store(0, std::memory_order_relaxed);
    m.readyNs_[i] = 0;
    if (!accumulate) m.userPtr_[i] = nullptr;
  }
  m.observedCount_.store(0, std::memory_order_relaxed);
  m.resetBucketCounters();
  m.stepT0_ = nowNs();
  if (!accumulate) {
    const uint64_t step = m.stepIndex_;
    std::lock_guard<std::mutex> lock(m.mu_);
    m.stepDone_.store(false, std::memory_order_relaxed);
    m.stepStatus_ = Status::ok();
    m.stepResult_ = StepMetrics();
    m.jobs_.push_back([&m, step] { m.runStep(step); });
  }
  m.stepActive_.store(true, std::memory_order_release);
  m.engineCv_.notify_all();
  return Status::ok();
}

Status Bucketer::Impl::markInternal(int idx, void* grad, bool unused) {
  const size_t i = static_cast<size_t>(idx);
  const detail::ParamSpec& spec = specs_[i];
  Bucket& b = *buckets_[static_cast<size_t>(bucketOf_[i])];
  uint8_t* slot = b.data + offsetOf_[i];
  const size_t bytes = spec.bytes();
  if (!unused) {
    if (opts_.zeroCopy && grad != nullptr && grad != slot) {
      return invalidArgument("markReady: zero-copy mode expects parameter " + paramLabel(idx) +
                             "'s gradient at gradientBuffer() (or null); it moved when the "
                             "layout was rebuilt (layoutVersion)");
    }
    if (!opts_.zeroCopy && grad == nullptr && bytes > 0) {
      return invalidArgument("markReady: gradient of " + paramLabel(idx) + " is null");
    }
  }
  uint8_t expected = 0;
  if (!marked_[i].compare_exchange_strong(expected, unused ? 2 : 1, std::memory_order_acq_rel)) {
    return invalidUsage("parameter " + paramLabel(idx) + " was marked " +
                        (expected == 1 ? "ready" : "unused") + " twice in step " +
                        std::to_string(stepIndex_) + " on rank " + std::to_string(comm_->rank()));
  }
  const uint64_t t = nowNs();
  if (!unused) {
    used_[i] = 1;
    if (!opts_.zeroCopy) {
      if (hasData_[i]) {
        reduceInto(spec.type, ReduceOp::kSum, slot, grad, spec.count);
      } else if (reducesInPlace(b) && bytes > 0) {
        b.live = static_cast<uint8_t*>(grad);
      } else if (bytes > 0) {
        copyBytes(slot, grad, bytes);
      }
      hasData_[i] = 1;
      if (!stepAccumulate_) userPtr_[i] = grad;
    }
  } else if (!stepAccumulate_ && !opts_.zeroCopy && !hasData_[i]) {
    std::memset(slot, 0, bytes);  // contributes zero (zero-copy: whatever the gradient holds)
  }
  readyNs_[i] = t;
  const int pos = observedCount_.fetch_add(1, std::memory_order_relaxed);
  observed_[static_cast<size_t>(pos)].store(idx, std::memory_order_relaxed);
  // Nothing of the bucket may be touched after the decrement: the engine may finish the step
  // and rebuild the layout (freeing the bucket) as soon as the count reaches zero.
  if (!stepAccumulate_ && b.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard<std::mutex> lock(mu_);  // no lost wake-up: the engine checks under mu_
    // An offered tail (or one finishStep took) is the caller's to run: the engine finds the
    // bucket complete at its next poll if finishStep does not come first (engine.cc).
    if (tail_ != Tail::kOffered && tail_ != Tail::kCaller) engineCv_.notify_all();
  }
  return Status::ok();
}

Status Bucketer::markReady(uint32_t id, void* grad) {
  Impl& m = *impl_;
  if (!m.stepActive_.load(std::memory_order_acquire)) {
    return invalidUsage("markReady(" + std::to_string(id) + ") outside a step (call beginStep())");
  }
  BRAID_ASSIGN_OR_RETURN(int idx, m.lookup(id, "markReady"));
  return m.markInternal(idx, grad, false);
}

Status Bucketer::markUnused(uint32_t id) {
  Impl& m = *impl_;
  if (!m.stepActive_.load(std::memory_order_acquire)) {
    return invalidUsage("markUnused(" + std::to_string(id) + ") outside a step (call beginStep())");
  }
  BRAID_ASSIGN_OR_RETURN(int idx, m.lookup(id, "markUnused"));
  return m.markInternal(idx, nullptr, true);
}

Result<StepMetrics> Bucketer::finishStep() {
  Impl& m = *impl_;
  if (!m.stepActive_.load(std::memory_order_acquire)) {
    return invalidUsage("finishStep: no step in progress (call beginStep())");
  }
  const uint64_t tCall = nowNs();
  StepMetrics out;
  Status status, usage;
  const size_t n = m.specs_.size();
  bool takeOver = false;
  if (!m.stepAccumulate_) {
    // The engine waiting for the last bucket offers the rest of the step: run it on this thread
    // rather than wait for the engine's wake-up (Impl::Tail). Taken before the unmarked
    // parameters below are marked, so that their wake-ups find the engine out of the step. No
    // wake-up of its own: a thread woken now would compete for the cores with this tail, and
    // the engine, still in its wait, leaves the step at its next wake-up (the next beginStep's).
    {
      std::lock_guard<std::mutex> lock(m.mu_);
      if (m.tail_ == Impl::Tail::kOffered) {
        m.tail_ = Impl::Tail::kCaller;
        takeOver = true;
      }
    }
    // Parameters nobody marked contribute zero so that the step completes on every rank
    // (the peers would otherwise wait out the timeout); without findUnused that is an error.
    for (size_t i = 0; i < n; ++i) {
      if (m.marked_[i].load(std::memory_order_acquire) != 0) continue;
      if (!m.opts_.findUnused && usage.isOk()) {
        usage = invalidUsage("rank " + std::to_string(m.comm_->rank()) + ": parameter " +
                             m.paramLabel(static_cast<int>(i)) +
                             " was neither marked ready nor "
                             "unused in step " +
                             std::to_string(m.stepIndex_) +
                             "; it was reduced as zero. Call markUnused() or set findUnused");
      }
      (void)m.markInternal(static_cast<int>(i), nullptr, true);
    }
    if (takeOver) {
      (void)m.advanceStep(false);
      m.completeStep();
    }
    // A small model's tail ends within a few hundred microseconds of the last mark: poll for
    // the engine (spinning, then yielding) for up to kFinishPollNs, at most BRAID_SHM_SPIN_US,
    // before sleeping on doneCv_. A futex wake-up of a thread whose core went idle costs 20-90
    // us on the VMs measured. ResNet-50 at 1/10 scale, 2 ranks on 2 cores, 150 steps, six
    // alternated pairs: tail 0.08-0.09 ms against 0.10-0.13 sleeping at once; BERT-base and
    // GPT-2 (20-57 ms tails) unchanged within their noise. Longer polls compete with the
    // collectives' own threads for the cores.
    constexpr uint64_t kFinishPollNs = 200000;
    Backoff backoff;
    const uint64_t pollUntil = nowNs() + std::min(m.spinNs_, kFinishPollNs);
    while (!m.stepDone_.load(std::memory_order_acquire) &&
           (backoff.spinning() || nowNs() < pollUntil)) {
      backoff.pause();
    }
    std::unique_lock<std::mutex> lock(m.mu_);
    // The engine's own waits are bounded by the timeout; this one covers them with a margin.
    const bool done =
        m.doneCv_.wait_for(lock, std::chrono::milliseconds(2 * m.timeoutMs_ + 5000),
                           [&m] { return m.stepDone_.load(std::memory_order_acquire); });
    if (!done) {
      status =
          timeoutError("finishStep: the bucket engine of rank " + std::to_string(m.comm_->rank()) +
                       " did not finish step " + std::to_string(m.stepIndex_) + " in time");
    } else {
      out = std::move(m.stepResult_);
      out.tailByCaller = takeOver;
      status = m.stepStatus_;
    }
  }
  const uint64_t tEnd = nowNs();
  out.step = m.stepIndex_;
  out.communicated = !m.stepAccumulate_;
  out.stepMs = msBetween(m.stepT0_, tEnd);
  out.computeMs = msBetween(m.stepT0_, tCall);
  out.exposedMs = out.communicated ? msBetween(tCall, tEnd) : 0.0;
  if (out.communicated) {
    double comm = 0, overlapped = 0;
    const double computeEnd = out.computeMs;
    for (const BucketMetrics& b : out.buckets) {
      comm += b.doneMs - b.startMs;
      overlapped += std::max(0.0, std::min(b.doneMs, computeEnd) - b.startMs);
    }
    out.commMs = comm;
    out.eta = comm > 0 ? std::clamp(1.0 - out.exposedMs / comm, 0.0, 1.0) : 1.0;
    out.overlap = comm > 0 ? std::clamp(overlapped / comm, 0.0, 1.0) : 1.0;
    std::fill(m.hasData_.begin(), m.hasData_.end(), 0);
    std::fill(m.used_.begin(), m.used_.end(), 0);
  }
  m.stepActive_.store(false, std::memory_order_release);
  if (!m.metricsPath_.empty() && status.isOk()) {
    // On the engine thread, after this step and before the next: the two files cost 0.4-1.7 ms
    // of open/write/rename on the 2-core VM's ext4 (6 writes 0.4 s apart), which the caller's
    // step would otherwise pay (ResNet-50's whole exposed time is ~0.3 ms there). The engine
    // drains its jobs before the Bucketer is destroyed, so every line is in the file by then.
    {
      std::lock_guard<std::mutex> lock(m.mu_);
      m.jobs_.push_back([&m, metrics = out] { m.writeMetricsFile(metrics); });
    }
    m.engineCv_.notify_all();
  }
  if (!status.isOk()) return status;
  if (!usage.isOk()) return usage;
  return out;
}

}  // namespace braid
