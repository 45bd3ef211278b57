// braid-soak: a long run of mixed collectives on one communicator, watching for leaks.
//
// Every rank draws the same pseudo-random sequence (one seed), so all ranks issue the same calls
// in the same order: a collective (all-reduce, reduce-scatter, all-gather, broadcast, reduce,
// all-to-all, barrier; the first four also asynchronously), a size from 0 to --max-bytes (mostly
// small: 70% up to 4 KiB, 25% up to 64 KiB, 5% up to the maximum), a dtype and an op; now and
// then a forced algorithm (setAlgorithm with one of algorithms(), or "auto"); every
// --split-every calls a split into two halves, an all-reduce on the half, and its destruction.
// Every result is checked against the values every rank can compute (small integers, exact in
// every dtype). Every --sample calls each rank reads its private resident set (/proc/self/statm:
// resident minus shared pages; the host's segment is shared memory that a collective touches
// page by page up to its mapped size, and library pages are shared too, so neither is a leak), its
// open descriptors (/proc/self/fd) and the /dev/shm objects it maps (/proc/self/maps; the
// directory's own count is printed too, but other jobs on the host change it); the samples are
// all-gathered and rank 0 prints a table and one JSON line. The exit status is nonzero when a
// result was wrong, a call failed, a rank's RSS grew by more than --rss-limit-kib after the
// --warmup calls, or its descriptor or mapped-shm count changed after warm-up.
//
// Without a launcher's variables it starts --ranks local ranks itself (as braid-perf --ranks
// does); under braid-run, torchrun, Slurm or mpiexec it is one rank of that launch.
#include <dirent.h>
#include <getopt.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "braid/comm.hpp"
#include "braid/types.h"
#include "core/clock.h"
#include "transport/bootstrap/launchers.h"
#include "transport/bootstrap/local_launch.h"

namespace braid {
namespace {

struct Options {
  int ranks = 4;
  uint64_t ops = 100000;
  uint64_t sample = 10000;
  uint64_t warmup = 10000;
  uint64_t splitEvery = 1000;
  size_t maxBytes = 1 << 20;
  uint64_t seed = 1;
  int64_t rssLimitKib = 1024;
  int timeoutS = 3600;
  std::string json;
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: braid-soak [options]\n"
               "  Runs mixed collectives (random ops, dtypes, sizes, algorithms, async variants,\n"
               "  splits) on one communicator, checks every result, and samples RSS, open fds\n"
               "  and mapped /dev/shm objects; exits nonzero on a wrong result, a failed call,\n"
               "  RSS growth past the limit after warm-up, or a changed fd/shm count.\n"
               "  -n, --ops N            collectives to run (default 100000)\n"
               "  -r, --ranks N          local ranks to start without a launcher (default 4)\n"
               "  -s, --sample N         sample every N collectives (default 10000)\n"
               "  -w, --warmup N         collectives before the baseline sample (default 10000)\n"
               "  -S, --split-every N    split + destroy every N collectives (default 1000)\n"
               "  -b, --max-bytes B      largest message (default 1048576)\n"
               "      --seed S           the sequence's seed, the same on every rank (default 1)\n"
               "      --rss-limit-kib K  allowed growth of the private RSS (resident minus shared\n"
               "                         pages) after warm-up (default 1024; not judged\n"
               "                         in a sanitizer build, whose runtime grows by itself)\n"
               "  -T, --timeout S        kill local ranks after S seconds (default 3600)\n"
               "  -J, --json FILE        also write the JSON line to FILE\n"
               "  -h, --help             this text\n");
}

bool parse(int argc, char** argv, Options* o, int* rc) {
  static const option longs[] = {{"ops", required_argument, nullptr, 'n'},
                                 {"ranks", required_argument, nullptr, 'r'},
                                 {"sample", required_argument, nullptr, 's'},
                                 {"warmup", required_argument, nullptr, 'w'},
                                 {"split-every", required_argument, nullptr, 'S'},
                                 {"max-bytes", required_argument, nullptr, 'b'},
                                 {"seed", required_argument, nullptr, 1},
                                 {"rss-limit-kib", required_argument, nullptr, 2},
                                 {"timeout", required_argument, nullptr, 'T'},
                                 {"json", required_argument, nullptr, 'J'},
                                 {"help", no_argument, nullptr, 'h'},
                                 {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "n:r:s:w:S:b:T:J:h", longs, nullptr)) != -1) {
    char* end = nullptr;
    const long long v = optarg != nullptr ? std::strtoll(optarg, &end, 10) : 0;
    const bool number = optarg != nullptr && end != optarg && *end == '\0' && v >= 0;
    switch (c) {
      case 'n':
        o->ops = static_cast<uint64_t>(v);
        break;
      case 'r':
        o->ranks = static_cast<int>(v);
        break;
      case 's':
        o->sample = static_cast<uint64_t>(v);
        break;
      case 'w':
        o->warmup = static_cast<uint64_t>(v);
        break;
      case 'S':
        o->splitEvery = static_cast<uint64_t>(v);
        break;
      case 'b':
        o->maxBytes = static_cast<size_t>(v);
        break;
      case 1:
        o->seed = static_cast<uint64_t>(v);
        break;
      case 2:
        o->rssLimitKib = v;
        break;
      case 'T':
        o->timeoutS = static_cast<int>(v);
        break;
      case 'J':
        o->json = optarg;
        continue;
      case 'h':
        usage(stdout);
        *rc = 0;
        return false;
      default:
        usage(stderr);
        *rc = 2;
        return false;
    }
    if (!number) {
      std::fprintf(stderr, "braid-soak: '%s' is not a nonnegative number\n", optarg);
      *rc = 2;
      return false;
    }
  }
  if (optind < argc || o->ranks < 1 || o->sample == 0 || o->maxBytes > (size_t{1} << 30)) {
    std::fprintf(stderr,
                 "braid-soak: bad arguments (ranks >= 1, sample >= 1, max-bytes <= 1 GiB)\n");
    usage(stderr);
    *rc = 2;
    return false;
  }
  return true;
}

/// Starts o.ranks copies of this program (same arguments) and waits.
int launchRanks(const Options& o, int argc, char** argv) {
  launch::LaunchOptions lo;
  lo.ranks = o.ranks;
  lo.timeoutMs = o.timeoutS * 1000;
  lo.argv.push_back(launch::selfExecutable());
  if (lo.argv[0].empty()) lo.argv[0] = argv[0];
  for (int i = 1; i < argc; ++i) lo.argv.push_back(argv[i]);
  Result<launch::LaunchResult> r = launch::launchLocalRanks(lo);
  if (!r.isOk()) {
    std::fprintf(stderr, "braid-soak: could not start %d ranks: %s\n", o.ranks,
                 r.status().toString().c_str());
    return 1;
  }
  int worst = 0;
  for (size_t i = 0; i < r->exitCodes.size(); ++i) {
    if (r->exitCodes[i] != 0) {
      std::fprintf(stderr, "braid-soak: rank %zu exited with %d\n", i, r->exitCodes[i]);
      worst = 1;
    }
  }
  if (r->timedOut) std::fprintf(stderr, "braid-soak: ranks killed after -T %d s\n", o.timeoutS);
  return r->timedOut ? 1 : worst;
}

// ---- what a rank watches ---------------------------------------------------------------------

// Resident pages that are not shared (anonymous memory: where a leak shows).
int64_t rssKib() {
  std::ifstream f("/proc/self/statm");
  long long size = 0, resident = 0, shared = 0;
  f >> size >> resident >> shared;
  return (resident - shared) * (sysconf(_SC_PAGESIZE) / 1024);
}

int64_t countEntries(const char* dir) {
  int64_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
    }
    closedir(d);
  }
  return n;
}

/// Distinct /dev/shm objects this process maps.
int64_t mappedShm() {
  std::ifstream f("/proc/self/maps");
  std::vector<std::string> names;
  for (std::string line; std::getline(f, line);) {
    const size_t at = line.find("/dev/shm/");
    if (at != std::string::npos) names.push_back(line.substr(at));
  }
  std::sort(names.begin(), names.end());
  return std::unique(names.begin(), names.end()) - names.begin();
}

struct Sample {
  int64_t ops, rssKib, fds, shmMapped, shmDir;
};
constexpr int kSampleFields = 5;

// ---- the calls -------------------------------------------------------------------------------

enum class Call {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
  kBarrier
};
constexpr DataType kTypes[] = {DataType::kInt8,   DataType::kInt32,   DataType::kInt64,
                               DataType::kUint64, DataType::kFloat32, DataType::kFloat64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};

/// Element j of rank r's input for call i: a small integer, exact in every dtype, and so are the
/// sums of up to 9 ranks (below 128).
double valueOf(int r, size_t j, uint64_t i) {
  return static_cast<double>((static_cast<uint64_t>(r) * 5 + j * 3 + i) % 13);
}

void store(DataType t, void* buf, size_t j, double v) {
  switch (t) {
    case DataType::kInt8:
      static_cast<int8_t*>(buf)[j] = static_cast<int8_t>(v);
      break;
    case DataType::kInt32:
      static_cast<int32_t*>(buf)[j] = static_cast<int32_t>(v);
      break;
    case DataType::kInt64:
      static_cast<int64_t*>(buf)[j] = static_cast<int64_t>(v);
      break;
    case DataType::kUint64:
      static_cast<uint64_t*>(buf)[j] = static_cast<uint64_t>(v);
      break;
    case DataType::kFloat32:
      static_cast<float*>(buf)[j] = static_cast<float>(v);
      break;
    default:
      static_cast<double*>(buf)[j] = v;
      break;
  }
}

double load(DataType t, const void* buf, size_t j) {
  switch (t) {
    case DataType::kInt8:
      return static_cast<const int8_t*>(buf)[j];
    case DataType::kInt32:
      return static_cast<const int32_t*>(buf)[j];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[j]);
    case DataType::kUint64:
      return static_cast<double>(static_cast<const uint64_t*>(buf)[j]);
    case DataType::kFloat32:
      return static_cast<const float*>(buf)[j];
    default:
      return static_cast<const double*>(buf)[j];
  }
}

double reduced(ReduceOp op, int ranks, size_t j, uint64_t i) {
  double acc = valueOf(0, j, i);
  for (int r = 1; r < ranks; ++r) {
    const double v = valueOf(r, j, i);
    acc = op == ReduceOp::kSum   ? acc + v
          : op == ReduceOp::kMax ? std::max(acc, v)
                                 : std::min(acc, v);
  }
  return acc;
}

class Soak {
 public:
  Soak(const Options& o, std::unique_ptr<Communicator> comm)
      : o_(o), comm_(std::move(comm)), rank_(comm_->rank()), p_(comm_->size()), rng_(o.seed) {
    const size_t bytes = std::max<size_t>(o.maxBytes, 64) * static_cast<size_t>(p_);
    send_.assign(bytes / 8 + 1, 0);
    recv_.assign(bytes / 8 + 1, 0);
  }

  int run();

 private:
  size_t drawBytes() {
    const uint64_t k = rng_() % 100;
    const size_t cap = k < 70 ? 4096 : k < 95 ? 65536 : o_.maxBytes;
    return static_cast<size_t>(rng_() % (std::min(cap, o_.maxBytes) + 1));
  }
  /// This rank's input of call i: count elements of type t.
  void fill(DataType t, size_t count, uint64_t i) {
    for (size_t j = 0; j < count; ++j) store(t, send_.data(), j, valueOf(rank_, j, i));
  }
  /// Element j of an all-reduce's or reduce's result of call n.
  static double elementOfReduction(const Soak& k, size_t j, uint64_t n, int) {
    return reduced(k.op_, k.p_, j, n);
  }
  Status one(uint64_t i);
  Status splitRound(uint64_t i);
  Status check(const char* what, uint64_t i, DataType t, size_t count,
               double (*expected)(const Soak&, size_t, uint64_t, int), int arg);
  Status takeSample(uint64_t ops);
  int report(double seconds);

  const Options& o_;
  std::unique_ptr<Communicator> comm_;
  const int rank_;
  const int p_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> send_, recv_;  // 8-byte aligned for every dtype
  ReduceOp op_ = ReduceOp::kSum;
  std::vector<std::vector<Sample>> samples_;  // per sample point, per rank
  uint64_t wrong_ = 0, splits_ = 0, forced_ = 0, async_ = 0;
  uint64_t calls_[7] = {};
};

Status Soak::check(const char* what, uint64_t i, DataType t, size_t count,
                   double (*expected)(const Soak&, size_t, uint64_t, int), int arg) {
  for (size_t j = 0; j < count; ++j) {
    const double want = expected(*this, j, i, arg);
    const double got = load(t, recv_.data(), j);
    if (got != want) {
      ++wrong_;
      return internalError(std::string(what) + " call " + std::to_string(i) + " (" +
                           std::to_string(count) + " x " + dataTypeName(t) + "): element " +
                           std::to_string(j) + " is " + std::to_string(got) + ", not " +
                           std::to_string(want));
    }
  }
  return Status::ok();
}

Status Soak::one(uint64_t i) {
  const auto call = static_cast<Call>(rng_() % 7);
  const DataType t = kTypes[rng_() % (sizeof(kTypes) / sizeof(kTypes[0]))];
  op_ = kOps[rng_() % 3];
  const bool async = rng_() % 4 == 0;
  const int root = static_cast<int>(rng_() % static_cast<uint64_t>(p_));
  const size_t elem = dataTypeSize(t);
  size_t count = drawBytes() / elem;
  void* s = send_.data();
  void* r = recv_.data();
  ++calls_[static_cast<int>(call)];
  // Now and then force an algorithm of this collective (or go back to the automatic choice).
  static constexpr Collective kColl[] = {Collective::kAllReduce, Collective::kReduceScatter,
                                         Collective::kAllGather, Collective::kBroadcast,
                                         Collective::kReduce,    Collective::kAllToAll,
                                         Collective::kBarrier};
  const Collective coll = kColl[static_cast<int>(call)];
  if (rng_() % 16 == 0 && call != Call::kBarrier) {
    const std::vector<std::string> names = comm_->algorithms(coll);
    const size_t pick = static_cast<size_t>(rng_() % (names.size() + 1));
    BRAID_RETURN_IF_ERROR(comm_->setAlgorithm(coll, pick == names.size() ? "auto" : names[pick]));
    ++forced_;
  }
  auto wait = [&](Result<std::shared_ptr<Work>> w) -> Status {
    ++async_;
    BRAID_RETURN_IF_ERROR(w.status());
    return (*w)->wait();
  };
  switch (call) {
    case Call::kAllReduce:
      fill(t, count, i);
      BRAID_RETURN_IF_ERROR(async ? wait(comm_->allReduceAsync(s, r, count, t, op_))
                                  : comm_->allReduce(s, r, count, t, op_));
      return check("allreduce", i, t, count, elementOfReduction, 0);
    case Call::kReduceScatter: {
      count /= static_cast<size_t>(p_);
      fill(t, count * p_, i);
      BRAID_RETURN_IF_ERROR(async ? wait(comm_->reduceScatterAsync(s, r, count, t, op_))
                                  : comm_->reduceScatter(s, r, count, t, op_));
      return check(
          "reducescatter", i, t, count,
          [](const Soak& k, size_t j, uint64_t n, int c) {
            return reduced(k.op_, k.p_, static_cast<size_t>(k.rank_) * c + j, n);
          },
          static_cast<int>(count));
    }
    case Call::kAllGather: {
      count /= static_cast<size_t>(p_);
      fill(t, count, i);
      BRAID_RETURN_IF_ERROR(async ? wait(comm_->allGatherAsync(s, r, count, t))
                                  : comm_->allGather(s, r, count, t));
      return check(
          "allgather", i, t, count * p_,
          [](const Soak&, size_t j, uint64_t n, int c) {
            return valueOf(static_cast<int>(j / c), j % c, n);
          },
          static_cast<int>(std::max<size_t>(count, 1)));
    }
    case Call::kBroadcast:
      fill(t, count, i);
      BRAID_RETURN_IF_ERROR(async ? wait(comm_->broadcastAsync(s, r, count, t, root))
                                  : comm_->broadcast(s, r, count, t, root));
      return check(
          "broadcast", i, t, count,
          [](const Soak&, size_t j, uint64_t n, int root) { return valueOf(root, j, n); }, root);
    case Call::kReduce:
      fill(t, count, i);
      BRAID_RETURN_IF_ERROR(comm_->reduce(s, r, count, t, op_, root));
      if (rank_ != root) return Status::ok();
      return check("reduce", i, t, count, elementOfReduction, 0);
    case Call::kAllToAll: {
      count /= static_cast<size_t>(p_);
      fill(t, count * p_, i);
      BRAID_RETURN_IF_ERROR(comm_->allToAll(s, r, count, t));
      // Block k came from rank k: its block for this rank.
      return check(
          "alltoall", i, t, count * p_,
          [](const Soak& k, size_t j, uint64_t n, int c) {
            return valueOf(static_cast<int>(j / c), static_cast<size_t>(k.rank_) * c + j % c, n);
          },
          static_cast<int>(std::max<size_t>(count, 1)));
    }
    case Call::kBarrier:
      return comm_->barrier();
  }
  return Status::ok();
}

Status Soak::splitRound(uint64_t i) {
  auto half = comm_->split(rank_ % 2, -rank_);
  BRAID_RETURN_IF_ERROR(half.status());
  if (*half == nullptr) return internalError("split returned no communicator");
  double v = static_cast<double>(rank_);
  BRAID_RETURN_IF_ERROR((*half)->allReduce(&v, &v, 1, DataType::kFloat64, ReduceOp::kSum));
  double want = 0;
  for (int r = rank_ % 2; r < p_; r += 2) want += r;
  if (v != want) {
    ++wrong_;
    return internalError("all-reduce on split " + std::to_string(i) + " gave " + std::to_string(v) +
                         ", not " + std::to_string(want));
  }
  ++splits_;
  return Status::ok();  // the half is destroyed here
}

Status Soak::takeSample(uint64_t ops) {
  const Sample mine{static_cast<int64_t>(ops), rssKib(), countEntries("/proc/self/fd"), mappedShm(),
                    countEntries("/dev/shm")};
  std::vector<Sample> all(static_cast<size_t>(p_));
  BRAID_RETURN_IF_ERROR(comm_->allGather(&mine, all.data(), kSampleFields, DataType::kInt64));
  samples_.push_back(std::move(all));
  return Status::ok();
}

// ThreadSanitizer's shadow and history memory grows with every access, ASan's quarantine with
// every free: under a sanitizer the RSS growth is printed but not judged (fds and shm still are).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif
#else
constexpr bool kSanitizerBuild = false;
#endif

int Soak::report(double seconds) {
  // The baseline: the first sample at or after the warm-up.
  size_t base = 0;
  while (base + 1 < samples_.size() && samples_[base][0].ops < static_cast<int64_t>(o_.warmup)) {
    ++base;
  }
  const std::vector<Sample>& first = samples_[base];
  const std::vector<Sample>& last = samples_.back();
  bool ok = wrong_ == 0;
  std::vector<std::string> why;
  for (int r = 0; r < p_; ++r) {
    const int64_t growth = last[r].rssKib - first[r].rssKib;
    if (growth > o_.rssLimitKib && !kSanitizerBuild) {
      ok = false;
      why.push_back("rank " + std::to_string(r) + " RSS grew " + std::to_string(growth) + " KiB");
    }
    if (last[r].fds != first[r].fds) {
      ok = false;
      why.push_back("rank " + std::to_string(r) + " fds " + std::to_string(first[r].fds) + " -> " +
                    std::to_string(last[r].fds));
    }
    if (last[r].shmMapped != first[r].shmMapped) {
      ok = false;
      why.push_back("rank " + std::to_string(r) + " mapped shm " +
                    std::to_string(first[r].shmMapped) + " -> " +
                    std::to_string(last[r].shmMapped));
    }
  }
  if (rank_ != 0) return ok ? 0 : 1;

  std::printf("# braid-soak: %d ranks, %" PRIu64 " collectives (%" PRIu64 " async, %" PRIu64
              " forced algorithms, %" PRIu64 " splits), seed %" PRIu64 ", max %zu bytes, %.1f s\n",
              p_, o_.ops, async_, forced_, splits_, o_.seed, o_.maxBytes, seconds);
  std::printf("# calls: allreduce %" PRIu64 " reducescatter %" PRIu64 " allgather %" PRIu64
              " broadcast %" PRIu64 " reduce %" PRIu64 " alltoall %" PRIu64 " barrier %" PRIu64
              "\n",
              calls_[0], calls_[1], calls_[2], calls_[3], calls_[4], calls_[5], calls_[6]);
  std::printf("# baseline: the sample at %" PRId64 " calls (warm-up %" PRIu64 ")\n", first[0].ops,
              o_.warmup);
  std::printf("%10s %5s %12s %8s %6s %10s\n", "calls", "rank", "rss_kib", "fds", "shm", "/dev/shm");
  for (const auto& s : samples_) {
    for (int r = 0; r < p_; ++r) {
      std::printf("%10" PRId64 " %5d %12" PRId64 " %8" PRId64 " %6" PRId64 " %10" PRId64 "\n",
                  s[r].ops, r, s[r].rssKib, s[r].fds, s[r].shmMapped, s[r].shmDir);
    }
  }
  std::ostringstream j;
  j << "{\"ranks\":" << p_ << ",\"collectives\":" << o_.ops << ",\"async\":" << async_
    << ",\"forced\":" << forced_ << ",\"splits\":" << splits_ << ",\"seed\":" << o_.seed
    << ",\"max_bytes\":" << o_.maxBytes << ",\"seconds\":" << seconds << ",\"wrong\":" << wrong_
    << ",\"warmup\":" << o_.warmup << ",\"rss_limit_kib\":" << o_.rssLimitKib << ",\"samples\":[";
  for (size_t k = 0; k < samples_.size(); ++k) {
    j << (k ? "," : "") << "{\"calls\":" << samples_[k][0].ops;
    const char* names[] = {"rss_kib", "fds", "shm", "dev_shm"};
    for (int f = 0; f < 4; ++f) {
      j << ",\"" << names[f] << "\":[";
      for (int r = 0; r < p_; ++r) {
        const Sample& s = samples_[k][r];
        const int64_t v = f == 0 ? s.rssKib : f == 1 ? s.fds : f == 2 ? s.shmMapped : s.shmDir;
        j << (r ? "," : "") << v;
      }
      j << "]";
    }
    j << "}";
  }
  j << "],\"rss_growth_kib\":[";
  for (int r = 0; r < p_; ++r) j << (r ? "," : "") << last[r].rssKib - first[r].rssKib;
  j << "],\"ok\":" << (ok ? "true" : "false") << "}";
  std::printf("%s\n", j.str().c_str());
  if (!o_.json.empty()) {
    std::ofstream out(o_.json);
    out << j.str() << "\n";
  }
  for (const std::string& w : why) std::fprintf(stderr, "braid-soak: %s\n", w.c_str());
  std::printf("# %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

int Soak::run() {
  const uint64_t t0 = nowNs();
  Status s = takeSample(0);
  for (uint64_t i = 0; s.isOk() && i < o_.ops; ++i) {
    s = one(i);
    if (s.isOk() && o_.splitEvery > 0 && (i + 1) % o_.splitEvery == 0) s = splitRound(i);
    if (s.isOk() && ((i + 1) % o_.sample == 0 || i + 1 == o_.ops)) s = takeSample(i + 1);
  }
  if (!s.isOk()) {
    std::fprintf(stderr, "braid-soak rank %d: %s\n", rank_, s.toString().c_str());
    comm_->abort("braid-soak rank " + std::to_string(rank_) + " failed");
    return 1;
  }
  return report(static_cast<double>(nowNs() - t0) * 1e-9);
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  braid::Options o;
  int rc = 0;
  if (!braid::parse(argc, argv, &o, &rc)) return rc;
  const braid::LaunchChoice choice = braid::detectLaunch(braid::LaunchEnvironment::fromProcess(),
                                                         braid::LaunchSettings::fromParams());
  if (!braid::launchedAsRank(choice)) return braid::launchRanks(o, argc, argv);
  auto comm = braid::Communicator::createFromEnvironment();
  if (!comm.isOk()) {
    std::fprintf(stderr, "braid-soak: cannot create the communicator: %s\n",
                 comm.status().toString().c_str());
    return 1;
  }
  braid::Soak soak(o, std::move(comm.value()));
  return soak.run();
}
