// convergence_test: gradient compression must not cost convergence (issue #6). Real data, real
// ranks, the real bucket path.
//
//   convergence_test [--seed S] [--data FILE] [--only SPEC,...] [-v]
//
// Started without RANK/BRAID_FILE_STORE it is the launcher: it makes sure the digits data set is
// there (running scripts/fetch_digits.sh into $BRAID_DATA_DIR, default <build>/data, when it is
// missing), then starts 4 ranks of itself (transport/bootstrap/local_launch.h, file store) and
// fails unless every rank exits 0. Each rank trains two models data-parallel through a Bucketer, once per codec,
// and rank 0 judges the runs against the uncompressed one of the same seed.
//
// Data: scikit-learn's digits (1797 rows of 64 pixels 0..16 and a label), from Debian's
// python3-sklearn (sha256 checked by the fetch script). Split: a Fisher-Yates shuffle driven by
// std::mt19937(seed) (its output is fixed by the standard; no std distribution is used), first
// 1437 rows train, last 360 test; features / 16.
//
// Training (the calibrated setup of shared/docs/compression-overlap.md §2): rank r owns the train
// rows i ≡ r (mod 4) and takes batches of 32 of them cyclically; the Bucketer averages the four
// batch-mean gradients (= the mean over a global batch of 128); every rank applies SGD with
// momentum 0.9, lr 0.1, divided by 10 for the last quarter of the steps. Softmax regression (W
// 10×64, b 10; zero init) for 300 steps; an MLP 64-32-10 with tanh (uniform ±1/√fan_in init from
// the seed) for 400 steps. Buckets are kept small (first cap 256 B, cap 1 KiB) and gradients are
// marked in an order that differs from the default layout, so the layout is rebuilt after step 1
// and error-feedback residuals must follow their parameters into new buckets; the MLP also gets
// three buckets of different sizes.
//
// Tuning (seeds 0-3 tried; ratios to the baseline): with a constant lr the MLP's final loss
// (~0.03) wobbles by 10-20% from step to step, so top-k and sign with EF crossed 1.15x on some
// seeds; the last-quarter decay settles it (top-k+EF 0.92-1.00x, PowerSGD+EF 1.00-1.03x) and
// leaves the controls far off (1.5-3.3x softmax, 2.0-7x MLP). sign uses one scale per 64 values
// (chunk=64; 21x instead of 31x): with the default 1024 one scale spans a bias and a weight
// matrix in the same bucket and sign+EF ended 1.07-1.27x on the MLP; with 64, 0.996-1.011x.
// topk keeps 5% (10x), PowerSGD rank 1 (start step: the codec's default, 10).
//
// Before training, efRebuildCheck pins down the residual's move across the layout rebuild exactly.
//
// Pass criteria per model, relative to the uncompressed run ("none") with the same seed (final
// mean cross-entropy over the full train set, accuracy over the test set):
//   fp16, bf16 (casts)                       loss ≤ 1.01×
//   topk 5%, sign, powersgd r1 (+ EF)        loss ≤ 1.15× and accuracy ≥ baseline − 2 points
//   int8 (unbiased, stochastic rounding)     loss ≤ 1.20×
//   the same biased codecs with EF off       loss ≥ 1.30× (power check: the test can tell a
//                                            working error feedback from a broken one)
//   every codec: the last step's wire bytes ≤ dense / nominal ratio × 1.1, and the final
//   parameters bit-identical on every rank (hash all-gathered).
// Nominal ratios: casts 2, int8 3.98 and sign 31.03 (1 byte or 1 bit per value, plus one f32 scale
// per 1024-value chunk), topk 1/(2·ratio) (an index
// and a value per kept element), PowerSGD Σ dense / Σ((rows + cols)·rank) over the tensors it
// compresses (1-D tensors and those failing its minimum compression rate go dense).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "braid/bucketer.hpp"
#include "braid/comm.hpp"
#include "transport/bootstrap/local_launch.h"

namespace braid::test {
namespace {

constexpr int kRanks = 4;
constexpr int kClasses = 10;
constexpr int kFeatures = 64;
constexpr int kHidden = 32;
constexpr int kTrain = 1437;
constexpr int kBatch = 32;
constexpr float kLr = 0.1f;
constexpr float kMomentum = 0.9f;
constexpr float kLrDecay = 0.1f;  // for the last quarter of the steps

struct Options {
  uint64_t seed = 0;
  std::string data;
  std::vector<std::string> only;
  bool verbose = false;
  /// Emulate two hosts of two ranks (BRAID_HOST_ID per rank) and compress only the inter-host
  /// stage (BRAID_CODEC_SCOPE=inter-host).
  bool interHost = false;
};

struct Data {
  std::vector<float> x;  // rows × 64
  std::vector<int> y;
  int rows() const { return static_cast<int>(y.size()); }
  const float* row(int i) const { return x.data() + static_cast<size_t>(i) * kFeatures; }
};

bool loadDigits(const std::string& path, Data* all, std::string* err) {
  std::ifstream in(path);
  if (!in) {
    *err = "cannot open " + path;
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::stringstream ss(line);
    std::string cell;
    std::vector<int> v;
    while (std::getline(ss, cell, ',')) v.push_back(atoi(cell.c_str()));
    if (v.size() != kFeatures + 1 || v.back() < 0 || v.back() >= kClasses) {
      *err = path + ": malformed row " + std::to_string(all->rows() + 1);
      return false;
    }
    for (int j = 0; j < kFeatures; ++j) all->x.push_back(static_cast<float>(v[j]) / 16.0f);
    all->y.push_back(v.back());
  }
  if (all->rows() != 1797) {
    *err = path + ": " + std::to_string(all->rows()) + " rows, expected 1797";
    return false;
  }
  return true;
}

void split(const Data& all, uint64_t seed, Data* train, Data* test) {
  std::vector<int> idx(static_cast<size_t>(all.rows()));
  for (int i = 0; i < all.rows(); ++i) idx[static_cast<size_t>(i)] = i;
  std::mt19937 gen(static_cast<uint32_t>(seed));
  for (int i = all.rows() - 1; i > 0; --i) {
    const int j = static_cast<int>(gen() % static_cast<uint32_t>(i + 1));
    std::swap(idx[static_cast<size_t>(i)], idx[static_cast<size_t>(j)]);
  }
  for (int k = 0; k < all.rows(); ++k) {
    Data& d = k < kTrain ? *train : *test;
    const int i = idx[static_cast<size_t>(k)];
    d.x.insert(d.x.end(), all.row(i), all.row(i) + kFeatures);
    d.y.push_back(all.y[static_cast<size_t>(i)]);
  }
}

// A model: its tensors (registered in this order), forward/backward on one sample.
struct Tensor {
  std::string name;
  std::vector<size_t> shape;
  std::vector<float> w, g, v;  // weights, gradient, momentum
  size_t count() const { return w.size(); }
};

struct Model {
  bool mlp = false;
  std::vector<Tensor> t;       // softmax: W, b; mlp: W1, b1, W2, b2
  std::vector<int> markOrder;  // backward order in which gradients are marked ready

  void init(bool isMlp, uint64_t seed) {
    mlp = isMlp;
    auto add = [this](const char* n, std::vector<size_t> shape) {
      Tensor x;
      x.name = n;
      x.shape = shape;
      size_t c = 1;
      for (size_t d : shape) c *= d;
      x.w.assign(c, 0.0f);
      x.g.assign(c, 0.0f);
      x.v.assign(c, 0.0f);
      t.push_back(std::move(x));
    };
    if (!mlp) {
      add("W", {kClasses, kFeatures});
      add("b", {kClasses});
      markOrder = {0, 1};  // W before b: the default layout (reverse registration) has b first
      return;
    }
    add("W1", {kHidden, kFeatures});
    add("b1", {kHidden});
    add("W2", {kClasses, kHidden});
    add("b2", {kClasses});
    markOrder = {2, 3, 0, 1};
    std::mt19937 gen(static_cast<uint32_t>(seed * 7919 + 17));
    auto uni = [&gen](float bound) {
      return (static_cast<float>(gen()) / 4294967296.0f * 2.0f - 1.0f) * bound;
    };
    for (float& w : t[0].w) w = uni(1.0f / std::sqrt(static_cast<float>(kFeatures)));
    for (float& w : t[1].w) w = uni(1.0f / std::sqrt(static_cast<float>(kFeatures)));
    for (float& w : t[2].w) w = uni(1.0f / std::sqrt(static_cast<float>(kHidden)));
    for (float& w : t[3].w) w = uni(1.0f / std::sqrt(static_cast<float>(kHidden)));
  }

  // Logits of one sample (and the hidden layer for the MLP).
  void forward(const float* x, float* z, float* h) const {
    if (!mlp) {
      for (int c = 0; c < kClasses; ++c) {
        float s = t[1].w[static_cast<size_t>(c)];
        for (int j = 0; j < kFeatures; ++j)
          s += t[0].w[static_cast<size_t>(c * kFeatures + j)] * x[j];
        z[c] = s;
      }
      return;
    }
    for (int k = 0; k < kHidden; ++k) {
      float s = t[1].w[static_cast<size_t>(k)];
      for (int j = 0; j < kFeatures; ++j)
        s += t[0].w[static_cast<size_t>(k * kFeatures + j)] * x[j];
      h[k] = std::tanh(s);
    }
    for (int c = 0; c < kClasses; ++c) {
      float s = t[3].w[static_cast<size_t>(c)];
      for (int k = 0; k < kHidden; ++k) s += t[2].w[static_cast<size_t>(c * kHidden + k)] * h[k];
      z[c] = s;
    }
  }

  // Cross-entropy of one sample; p gets the softmax.
  static double crossEntropy(const float* z, int y, float* p) {
    float m = z[0];
    for (int c = 1; c < kClasses; ++c) m = std::max(m, z[c]);
    double sum = 0;
    for (int c = 0; c < kClasses; ++c) sum += std::exp(static_cast<double>(z[c] - m));
    for (int c = 0; c < kClasses; ++c) {
      p[c] = static_cast<float>(std::exp(static_cast<double>(z[c] - m)) / sum);
    }
    return -(static_cast<double>(z[y] - m) - std::log(sum));
  }

  // Batch-mean gradient into t[*].g.
  void gradient(const Data& d, const std::vector<int>& rows) {
    for (Tensor& x : t) std::fill(x.g.begin(), x.g.end(), 0.0f);
    const float inv = 1.0f / static_cast<float>(rows.size());
    float z[kClasses], p[kClasses], h[kHidden], dh[kHidden];
    for (int i : rows) {
      const float* x = d.row(i);
      forward(x, z, h);
      (void)crossEntropy(z, d.y[static_cast<size_t>(i)], p);
      p[d.y[static_cast<size_t>(i)]] -= 1.0f;  // dL/dz
      if (!mlp) {
        for (int c = 0; c < kClasses; ++c) {
          const float dz = p[c] * inv;
          t[1].g[static_cast<size_t>(c)] += dz;
          for (int j = 0; j < kFeatures; ++j)
            t[0].g[static_cast<size_t>(c * kFeatures + j)] += dz * x[j];
        }
        continue;
      }
      std::fill(dh, dh + kHidden, 0.0f);
      for (int c = 0; c < kClasses; ++c) {
        const float dz = p[c] * inv;
        t[3].g[static_cast<size_t>(c)] += dz;
        for (int k = 0; k < kHidden; ++k) {
          t[2].g[static_cast<size_t>(c * kHidden + k)] += dz * h[k];
          dh[k] += t[2].w[static_cast<size_t>(c * kHidden + k)] * dz;
        }
      }
      for (int k = 0; k < kHidden; ++k) {
        const float da = dh[k] * (1.0f - h[k] * h[k]);
        t[1].g[static_cast<size_t>(k)] += da;
        for (int j = 0; j < kFeatures; ++j)
          t[0].g[static_cast<size_t>(k * kFeatures + j)] += da * x[j];
      }
    }
  }

  void sgdStep(float lr) {
    for (Tensor& x : t) {
      for (size_t i = 0; i < x.count(); ++i) {
        x.v[i] = kMomentum * x.v[i] + x.g[i];
        x.w[i] -= lr * x.v[i];
      }
    }
  }

  void evaluate(const Data& d, double* loss, double* acc) const {
    float z[kClasses], p[kClasses], h[kHidden];
    double sum = 0;
    int right = 0;
    for (int i = 0; i < d.rows(); ++i) {
      forward(d.row(i), z, h);
      sum += crossEntropy(z, d.y[static_cast<size_t>(i)], p);
      const int best = static_cast<int>(std::max_element(z, z + kClasses) - z);
      right += best == d.y[static_cast<size_t>(i)] ? 1 : 0;
    }
    *loss = sum / d.rows();
    *acc = 100.0 * right / d.rows();
  }

  uint64_t hash() const {
    uint64_t h = 1469598103934665603ull;
    for (const Tensor& x : t) {
      const auto* b = reinterpret_cast<const uint8_t*>(x.w.data());
      for (size_t i = 0; i < x.count() * sizeof(float); ++i) {
        h ^= b[i];
        h *= 1099511628211ull;
      }
    }
    return h;
  }
};

// One codec configuration and what it must satisfy.
enum class Kind { kBaseline, kCast, kBiasedEf, kUnbiased, kControl };

struct Variant {
  std::string spec;
  Kind kind;
  /// Micro-steps per optimizer step: the batch is split into this many accumulation steps
  /// (beginStep(true)) before the communicating one; the codec must see only the latter.
  int accumulate = 1;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {"none", Kind::kBaseline},
      {"fp16", Kind::kCast},
      {"bf16", Kind::kCast},
      {"topk:ratio=0.05,ef=1", Kind::kBiasedEf},
      {"sign:ef=1,chunk=64", Kind::kBiasedEf},
      {"powersgd:rank=1,ef=1", Kind::kBiasedEf},
      {"int8", Kind::kUnbiased},
      {"topk:ratio=0.05,ef=1", Kind::kBiasedEf, 2},
      {"topk:ratio=0.05,ef=0", Kind::kControl},
      {"sign:ef=0,chunk=64", Kind::kControl},
      {"powersgd:rank=1,ef=0", Kind::kControl},
  };
  return v;
}

// The criterion a codec spec is judged by (for --only).
Kind kindOf(const std::string& spec) {
  const std::string name = spec.substr(0, spec.find(':'));
  if (name == "none") return Kind::kBaseline;
  if (name == "fp16" || name == "bf16") return Kind::kCast;
  if (name == "int8") return Kind::kUnbiased;
  return spec.find("ef=0") != std::string::npos ? Kind::kControl : Kind::kBiasedEf;
}

struct RunResult {
  double loss = 0, acc = 0;
  uint64_t wireBytes = 0, denseBytes = 0;  // last step
  bool identical = false;
  double seconds = 0;
  std::string error;
};

// The nominal compressed size of the model's dense bytes under a codec spec.
double nominalRatio(const std::string& spec, const Model& m) {
  const std::string name = spec.substr(0, spec.find(':'));
  if (name == "fp16" || name == "bf16") return 2;
  // One f32 scale per chunk of 1024 values rides along (the codecs' default chunk).
  const size_t chunkAt = spec.find("chunk=");
  const double chunk = chunkAt == std::string::npos ? 1024 : atof(spec.c_str() + chunkAt + 6);
  if (name == "int8") return 32.0 / (8.0 + 32.0 / chunk);
  if (name == "sign") return 32.0 / (1.0 + 32.0 / chunk);
  if (name == "topk") {
    const size_t at = spec.find("ratio=");
    const double r = at == std::string::npos ? 0.01 : atof(spec.c_str() + at + 6);
    return 1.0 / (2.0 * r);
  }
  if (name == "powersgd") {
    const size_t at = spec.find("rank=");
    const double r = at == std::string::npos ? 1 : atof(spec.c_str() + at + 5);
    double dense = 0, sent = 0;
    for (const Tensor& x : m.t) {
      dense += static_cast<double>(x.count());
      if (x.shape.size() >= 2) {
        const double rows = static_cast<double>(x.shape[0]);
        const double cols = static_cast<double>(x.count()) / rows;
        if ((rows + cols) * r * 2.0 < rows * cols) {
          sent += (rows + cols) * r;
          continue;
        }
      }
      sent += static_cast<double>(x.count());
    }
    return dense / sent;
  }
  return 1;
}

double nowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

RunResult trainRun(Communicator& comm, const Data& train, const Data& test, bool mlp,
                   const std::string& spec, uint64_t seed, int accumulate) {
  RunResult out;
  const double t0 = nowS();
  Model m;
  m.init(mlp, seed);
  BucketerOptions bo;
  bo.sizing = BucketSizing::kFixed;
  bo.firstBucketCapBytes = 256;
  bo.bucketCapBytes = 1024;
  bo.metricsFile = "-";
  bo.codec = spec;
  if (spec.find("powersgd") == 0 || spec.find("int8") == 0) {
    // Distinct random streams per run; the same on every rank.
    bo.codec += (spec.find(':') == std::string::npos ? ":" : ",") + std::string("seed=") +
                std::to_string(seed + 1);
  }
  auto created = Bucketer::create(&comm, bo);
  if (!created.isOk()) {
    out.error = created.status().toString();
    return out;
  }
  Bucketer& b = **created;
  Status s;
  for (size_t i = 0; i < m.t.size() && s.isOk(); ++i) {
    s = b.registerParam(static_cast<uint32_t>(i), m.t[i].shape, DataType::kFloat32, m.t[i].name);
  }
  if (s.isOk()) s = b.finalize();
  // This rank's shard: train rows i ≡ rank (mod 4).
  std::vector<int> shard;
  for (int i = comm.rank(); i < train.rows(); i += comm.size()) shard.push_back(i);
  const int steps = mlp ? 400 : 300;
  std::vector<int> batch(kBatch);
  for (int step = 0; step < steps && s.isOk(); ++step) {
    for (int j = 0; j < kBatch; ++j) {
      batch[static_cast<size_t>(j)] = shard[static_cast<size_t>(step * kBatch + j) % shard.size()];
    }
    // Micro-steps over equal slices of the batch; the Bucketer sums them (copy mode), and the
    // sum of `accumulate` slice means is scaled back to the batch mean below.
    const int micro = kBatch / accumulate;
    for (int a = 0; a < accumulate && s.isOk(); ++a) {
      const std::vector<int> slice(batch.begin() + a * micro, batch.begin() + (a + 1) * micro);
      m.gradient(train, slice);
      s = b.beginStep(a + 1 < accumulate);
      for (int idx : m.markOrder) {
        if (!s.isOk()) break;
        s = b.markReady(static_cast<uint32_t>(idx), m.t[static_cast<size_t>(idx)].g.data());
      }
      if (s.isOk() && a + 1 < accumulate) {
        auto r = b.finishStep();
        if (!r.isOk()) s = r.status();
      }
    }
    if (!s.isOk()) break;
    auto r = b.finishStep();
    if (!r.isOk()) {
      s = r.status();
      break;
    }
    out.wireBytes = r->wireBytes;
    out.denseBytes = r->bytes;
    if (accumulate > 1) {
      for (Tensor& x : m.t) {
        for (float& g : x.g) g /= static_cast<float>(accumulate);
      }
    }
    m.sgdStep(step < steps * 3 / 4 ? kLr : kLr * kLrDecay);
  }
  if (!s.isOk()) {
    out.error = s.toString();
    return out;
  }
  double trainAcc = 0;
  m.evaluate(train, &out.loss, &trainAcc);
  double testLoss = 0;
  m.evaluate(test, &testLoss, &out.acc);
  uint64_t h = m.hash();
  std::vector<uint64_t> all(static_cast<size_t>(comm.size()));
  s = comm.allGather(&h, all.data(), 1, DataType::kUint64);
  if (!s.isOk()) {
    out.error = s.toString();
    return out;
  }
  out.identical = std::all_of(all.begin(), all.end(), [h](uint64_t x) { return x == h; });
  out.seconds = nowS() - t0;
  return out;
}

// Error feedback across the layout rebuild, checked exactly: two 1-element parameters P (1.5)
// and Q (1.0) in one bucket, top-k keeping 1 element, the same gradients on every rank each step.
// The first layout is [Q, P] (reverse registration); P is marked first, so after step 1 it is
// rebuilt as [P, Q]. Step 1 sends P (1.5) and keeps Q's 1.0 as residual; step 2 must send Q
// with 2.0 (residual + gradient). A dropped residual sends P again (Q = 0); a residual copied
// by position instead of by parameter lands on P (P = 2.5).
std::string efRebuildCheck(Communicator& comm) {
  BucketerOptions bo;
  bo.sizing = BucketSizing::kFixed;
  bo.metricsFile = "-";
  bo.codec = "topk:ratio=0.01,ef=1";
  auto created = Bucketer::create(&comm, bo);
  if (!created.isOk()) return created.status().toString();
  Bucketer& b = **created;
  Status s = b.registerParam(0, 1, DataType::kFloat32, "P");
  if (s.isOk()) s = b.registerParam(1, 1, DataType::kFloat32, "Q");
  if (s.isOk()) s = b.finalize();
  const std::vector<std::vector<uint32_t>> before = b.bucketLayout();
  const float want[3][2] = {{1.5f, 0.0f}, {0.0f, 2.0f}, {3.0f, 0.0f}};
  for (int step = 0; step < 3 && s.isOk(); ++step) {
    float p = 1.5f, q = 1.0f;
    s = b.beginStep();
    if (s.isOk()) s = b.markReady(0, &p);
    if (s.isOk()) s = b.markReady(1, &q);
    if (!s.isOk()) break;
    auto r = b.finishStep();
    if (!r.isOk()) return r.status().toString();
    if (step == 0 && (!r->rebuilt || b.bucketLayout() == before)) {
      return "the layout was not rebuilt into a different order after step 1";
    }
    if (p != want[step][0] || q != want[step][1]) {
      char buf[200];
      snprintf(buf, sizeof(buf), "step %d: P=%g Q=%g, expected P=%g Q=%g", step + 1,
               static_cast<double>(p), static_cast<double>(q), static_cast<double>(want[step][0]),
               static_cast<double>(want[step][1]));
      return buf;
    }
  }
  return s.isOk() ? "" : s.toString();
}

int runRank(const Options& o) {
  if (o.interHost) {
    const char* r = getenv("RANK");
    const int globalRank = r != nullptr ? atoi(r) : 0;
    setenv("BRAID_HOST_ID", ("convergence-host-" + std::to_string(globalRank * 2 / kRanks)).c_str(), 1);
    setenv("BRAID_CODEC_SCOPE", "inter-host", 1);
  }
  auto created = Communicator::createFromEnvironment();
  if (!created.isOk()) {
    fprintf(stderr, "convergence_test: %s\n", created.status().toString().c_str());
    return 2;
  }
  Communicator& comm = **created;
  const int rank = comm.rank();
  Data all, train, test;
  std::string err;
  if (!loadDigits(o.data, &all, &err)) {
    fprintf(stderr, "convergence_test: rank %d: %s\n", rank, err.c_str());
    return 2;
  }
  split(all, o.seed, &train, &test);
  int failures = 0;
  auto check = [&](bool ok, const char* model, const std::string& spec, const std::string& what) {
    if (ok) return;
    ++failures;
    if (rank == 0) printf("FAIL %-8s %-27s %s\n", model, spec.c_str(), what.c_str());
  };
  if (rank == 0) {
    printf(
        "# convergence: digits (%d train / %d test), %d ranks, seed %llu, batch %d/rank, "
        "SGD lr %.2f momentum %.1f\n",
        train.rows(), test.rows(), comm.size(), static_cast<unsigned long long>(o.seed), kBatch,
        static_cast<double>(kLr), static_cast<double>(kMomentum));
  }
  if (o.interHost && comm.numHosts() != 2) {
    fprintf(stderr, "convergence_test: --inter-host made %d hosts, not 2\n", comm.numHosts());
    return 2;
  }
  if (!o.interHost) {  // the exact residual check assumes every rank runs the codec
    const std::string e = efRebuildCheck(comm);
    if (rank == 0)
      printf("ef-rebuild: %s\n", e.empty() ? "residual followed its parameter" : e.c_str());
    check(e.empty(), "-", "topk:ratio=0.01,ef=1", "error feedback across the rebuild: " + e);
  }
  for (bool mlp : {false, true}) {
    const char* model = mlp ? "mlp" : "softmax";
    Model shape;
    shape.init(mlp, o.seed);
    RunResult base;
    if (rank == 0) {
      printf("%-8s %-27s %9s %7s %8s %7s %10s %10s %7s %5s %6s\n", "model", "codec", "loss",
             "x_base", "test_acc", "d_acc", "wire_B", "dense_B", "ratio", "same", "sec");
    }
    std::vector<Variant> list = variants();
    if (!o.only.empty()) {
      list.assign(1, Variant{"none", Kind::kBaseline});
      for (const std::string& spec : o.only) list.push_back(Variant{spec, kindOf(spec)});
    }
    for (const Variant& v : list) {
      const RunResult r = trainRun(comm, train, test, mlp, v.spec, o.seed, v.accumulate);
      const std::string label =
          v.spec + (v.accumulate > 1 ? " acc" + std::to_string(v.accumulate) : "");
      if (!r.error.empty()) {
        check(false, model, label, "error: " + r.error);
        return 1;  // the communicator may be failed; nothing more can run
      }
      if (v.kind == Kind::kBaseline) base = r;
      const double x = base.loss > 0 ? r.loss / base.loss : 0;
      const double dAcc = r.acc - base.acc;
      const double claim = nominalRatio(v.spec, shape);
      const double actual = r.wireBytes > 0 ? static_cast<double>(r.denseBytes) / r.wireBytes : 0;
      if (rank == 0) {
        printf("%-8s %-27s %9.5f %7.3f %8.2f %7.2f %10llu %10llu %7.2f %5s %6.2f\n", model,
               label.c_str(), r.loss, x, r.acc, dAcc, static_cast<unsigned long long>(r.wireBytes),
               static_cast<unsigned long long>(r.denseBytes), actual, r.identical ? "yes" : "NO",
               r.seconds);
        fflush(stdout);
      }
      char buf[160];
      check(r.identical, model, label, "final parameters differ across ranks");
      snprintf(buf, sizeof(buf), "wire %llu B > dense %llu B / nominal %.2f x 1.1",
               static_cast<unsigned long long>(r.wireBytes),
               static_cast<unsigned long long>(r.denseBytes), claim);
      check(static_cast<double>(r.wireBytes) <= static_cast<double>(r.denseBytes) / claim * 1.1,
            model, label, buf);
      switch (v.kind) {
        case Kind::kBaseline:
          snprintf(buf, sizeof(buf), "baseline test accuracy %.2f%% < 90%%: the setup is broken",
                   r.acc);
          check(r.acc >= 90.0, model, label, buf);
          break;
        case Kind::kCast:
          snprintf(buf, sizeof(buf), "loss %.4fx baseline > 1.01x", x);
          check(x <= 1.01, model, label, buf);
          break;
        case Kind::kBiasedEf:
          snprintf(buf, sizeof(buf), "loss %.4fx baseline > 1.15x", x);
          check(x <= 1.15, model, label, buf);
          snprintf(buf, sizeof(buf), "test accuracy %.2f < baseline %.2f - 2 points", r.acc,
                   base.acc);
          check(r.acc >= base.acc - 2.0, model, label, buf);
          break;
        case Kind::kUnbiased:
          snprintf(buf, sizeof(buf), "loss %.4fx baseline > 1.20x", x);
          check(x <= 1.20, model, label, buf);
          break;
        case Kind::kControl:
          snprintf(buf, sizeof(buf),
                   "power check: without error feedback loss %.4fx baseline < 1.30x (the test "
                   "cannot tell EF on from off)",
                   x);
          check(x >= 1.30, model, label, buf);
          break;
      }
    }
  }
  if (rank == 0) printf("%s: %d failure(s)\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}

std::vector<std::string> splitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, sep)) {
    if (!x.empty()) out.push_back(x);
  }
  return out;
}

bool fileExists(const std::string& p) { return access(p.c_str(), R_OK) == 0; }

int runLauncher(Options o, int argc, char** argv) {
  if (o.data.empty()) {
    const char* env = getenv("BRAID_DATA_DIR");
    const std::string dir = env != nullptr && env[0] != '\0' ? env : BRAID_DEFAULT_DATA_DIR;
    o.data = dir + "/digits.csv";
    if (!fileExists(o.data)) {
      const std::string cmd = std::string("'") + BRAID_FETCH_DIGITS + "' '" + dir + "'";
      printf("# fetching the digits data set: %s\n", cmd.c_str());
      fflush(stdout);
      if (system(cmd.c_str()) != 0 || !fileExists(o.data)) {
        fprintf(stderr,
                "convergence_test: could not fetch the digits data set into %s "
                "(needs apt-get and a Debian mirror; or set BRAID_DATA_DIR to a "
                "directory holding digits.csv)\n",
                dir.c_str());
        return 1;
      }
    }
  }
  launch::LaunchOptions lo;
  lo.ranks = kRanks;
  lo.fileStore = true;
  lo.timeoutMs = 115000;
  lo.argv.push_back(launch::selfExecutable());
  if (lo.argv[0].empty()) lo.argv[0] = argv[0];
  for (int i = 1; i < argc; ++i) lo.argv.push_back(argv[i]);
  lo.argv.push_back("--data");
  lo.argv.push_back(o.data);
  lo.env.emplace_back("BRAID_TIMEOUT_MS", "60000");
  auto r = launch::launchLocalRanks(lo);
  if (!r.isOk()) {
    fprintf(stderr, "convergence_test: %s\n", r.status().toString().c_str());
    return 1;
  }
  int bad = r->timedOut ? 1 : 0;
  if (r->timedOut) fprintf(stderr, "convergence_test: timed out\n");
  for (size_t i = 0; i < r->exitCodes.size(); ++i) {
    if (r->exitCodes[i] != 0) {
      fprintf(stderr, "convergence_test: rank %zu exited with %d\n", i, r->exitCodes[i]);
      bad = 1;
    }
  }
  return bad;
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--seed") {
      o.seed = strtoull(next().c_str(), nullptr, 10);
    } else if (a == "--data") {
      o.data = next();
    } else if (a == "--only") {
      o.only = braid::test::splitList(next(), ';');
    } else if (a == "-v") {
      o.verbose = true;
    } else if (a == "--inter-host") {
      o.interHost = true;
    } else {
      fprintf(stderr, "usage: convergence_test [--seed S] [--data FILE] [--only SPEC;SPEC] [--inter-host] [-v]\n");
      return 2;
    }
  }
  if (getenv("RANK") == nullptr && getenv("BRAID_FILE_STORE") == nullptr) {
    return braid::test::runLauncher(o, argc, argv);
  }
  return braid::test::runRank(o);
}
