// braid-chaos-worker: one rank of a braid-chaos job (bench/chaos/braid_chaos.py starts them and
// injects the faults). It creates a communicator from the environment, then issues a random
// sequence of collectives that every rank derives from the same seed — every collective of the
// braid-perf harness (its verifiable patterns and checks), random sizes up to --max-bytes, random
// dtypes, ops and forced algorithms, sync and async (several outstanding), send/recv pairs, and
// Bucketer jobs (bucketer_op.h: random gradients marked ready in a random order over several
// steps) — checking every result that reports success. It stops at the first error, destroys the
// communicator and reports. With --self-fault, rank --victim injects its own fault at op
// --fault-at: `exit` (std::exit(0) with an all-reduce in flight) or `sockclose` (shutdown of every
// socket it holds in the middle of an all-reduce). --fault-op bucketer makes op --fault-at a long
// Bucketer job on every rank, for any fault: the self-fault then strikes with half of the first
// step's gradients marked ready (buckets in flight), and the driver's faults strike its steps.
//
// Report (--report FILE, %r = RANK, one line per event, flushed; times are CLOCK_MONOTONIC ns like the
// driver's time.monotonic_ns()):
//   pid P | fds N | created T | op J KIND T | wrong J N | inject T KIND | error J T CODE MESSAGE |
//   fds_after N | done J
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/chaos/bucketer_op.h"
#include "bench/perf/harness.h"
#include "braid/comm.hpp"

namespace braid::chaos {
namespace {

uint64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int countFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n - 1;  // opendir's own
}

// Shuts down every socket this process holds: a peer whose connections close mid-message.
void shutdownSockets() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    int fd = atoi(e->d_name);
    struct stat st;
    if (fd > 2 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) shutdown(fd, SHUT_RDWR);
  }
  closedir(d);
}

struct Options {
  uint64_t seed = 1;
  int ops = 1000000;
  size_t maxBytes = size_t{64} << 20;
  int victim = -1;
  int faultAt = -1;
  std::string selfFault;         // "", "exit", "sockclose"
  bool faultOpBucketer = false;  // --fault-op bucketer
  std::string report;
};

class Reporter {
 public:
  explicit Reporter(const std::string& path)
      : f_(path.empty() ? stdout : fopen(path.c_str(), "a")) {
    if (f_ == nullptr) f_ = stdout;
  }
  ~Reporter() {
    if (f_ != stdout) fclose(f_);
  }
  void line(const std::string& text) {
    std::string one = text;
    for (char& c : one) c = c == '\n' ? ' ' : c;
    fprintf(f_, "%s\n", one.c_str());
    fflush(f_);
  }

 private:
  FILE* f_;
};

// The per-op choices, identical on every rank (the seed and the op index decide them).
struct OpSpec {
  int kind;  // index into benches(), or kSendRecv, kBarrier, kAsync, kBucketer
  DataType type;
  ReduceOp op;
  size_t count;
  int root;
  int algoPick;  // -1: auto; else an index into the forced algorithm candidates
  bool inPlace;
  int asyncDepth;
  uint64_t bucketerSeed;
};

constexpr int kSendRecv = 6, kBarrier = 7, kAsync = 8, kBucketer = 9, kKinds = 10;
// The op kinds as the report names them ("op J KIND"), in kind order.
const char* const kKindNames[kKinds] = {"allreduce", "reducescatter", "allgather", "broadcast",
                                        "reduce",    "alltoall",      "sendrecv",  "barrier",
                                        "async",     "bucketer"};

const std::vector<const perf::CollectiveBench*>& benches() {
  static const std::vector<const perf::CollectiveBench*> kAll = {
      &perf::allReduceBench(), &perf::reduceScatterBench(), &perf::allGatherBench(),
      &perf::broadcastBench(), &perf::reduceBench(),        &perf::allToAllBench()};
  return kAll;
}

OpSpec makeSpec(uint64_t seed, int j, int ranks, size_t maxBytes) {
  std::mt19937_64 g(seed * 1000003ull + static_cast<uint64_t>(j));
  OpSpec s;
  s.kind = static_cast<int>(g() % kKinds);
  static const DataType kTypes[] = {DataType::kFloat32, DataType::kInt32, DataType::kFloat64,
                                    DataType::kBFloat16, DataType::kInt8, DataType::kUint64};
  static const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};
  s.type = kTypes[g() % 6];
  s.op = kOps[g() % 4];
  // Sizes: 10% empty, most small, a few large (up to maxBytes).
  const int band = static_cast<int>(g() % 20);
  size_t bytes = 0;
  if (band >= 2 && band < 14) bytes = 1 + g() % (64 << 10);
  if (band >= 14 && band < 19) bytes = 1 + g() % (4 << 20);
  if (band == 19) bytes = 1 + g() % maxBytes;
  bytes = std::min(bytes, maxBytes);
  s.count = bytes / dataTypeSize(s.type);
  s.root = static_cast<int>(g() % static_cast<uint64_t>(ranks));
  s.algoPick = g() % 3 == 0 ? -1 : static_cast<int>(g() % 16);
  s.inPlace = g() % 2 == 0;
  s.asyncDepth = 1 + static_cast<int>(g() % 3);
  s.bucketerSeed = g();
  return s;
}

class Worker {
 public:
  Worker(Options o, Reporter* out) : o_(std::move(o)), out_(out) {}

  int run() {
    // A driver that dies (killed, hung up) must not leave ranks issuing collectives forever.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    out_->line("pid " + std::to_string(getpid()));
    out_->line("fds " + std::to_string(countFds()));
    auto created = Communicator::createFromEnvironment();
    if (!created.isOk()) {
      fail(-1, created.status());
      out_->line("fds_after " + std::to_string(countFds()));
      return 0;
    }
    comm_ = std::move(created).value();
    out_->line("created " + std::to_string(monotonicNs()));
    int j = 0;
    for (; j < o_.ops; ++j) {
      const OpSpec spec = planOp(j);
      out_->line("op " + std::to_string(j) + " " + kKindNames[spec.kind] + " " +
                 std::to_string(monotonicNs()));
      Status s = runOp(j, spec);
      if (!s.isOk()) {
        fail(j, s);
        break;
      }
    }
    if (j == o_.ops) out_->line("done " + std::to_string(j));
    comm_.reset();
    out_->line("fds_after " + std::to_string(countFds()));
    return 0;
  }

 private:
  void fail(int j, const Status& s) {
    out_->line("error " + std::to_string(j) + " " + std::to_string(monotonicNs()) + " " +
               std::to_string(static_cast<int>(s.code())) + " " + s.toString());
  }

  // What the braid-perf harness's functions see for this op.
  perf::BenchContext context(const OpSpec& spec, const perf::Pattern& pattern) const {
    perf::BenchContext ctx;
    ctx.comm = comm_.get();
    ctx.rank = comm_->rank();
    ctx.ranks = comm_->size();
    ctx.type = spec.type;
    ctx.op = spec.op;
    ctx.root = spec.root;
    ctx.pattern = &pattern;
    return ctx;
  }

  void ensure(std::vector<uint8_t>* buf, size_t bytes) {
    if (buf->size() < bytes) buf->resize(bytes);
  }

  bool isFaultOp(int j) const {
    return j == o_.faultAt && (!o_.selfFault.empty() || o_.faultOpBucketer);
  }

  // At the fault's op every rank issues one long all-reduce, or one long Bucketer job
  // (--fault-op bucketer), which the fault strikes.
  OpSpec planOp(int j) const {
    OpSpec spec = makeSpec(o_.seed, j, comm_->size(), o_.maxBytes);
    if (isFaultOp(j)) spec.kind = o_.faultOpBucketer ? kBucketer : kAsync;
    return spec;
  }

  Status runOp(int j, OpSpec spec) {
    const int rank = comm_->rank(), ranks = comm_->size();
    const bool faultOp = isFaultOp(j);
    const bool selfFault = faultOp && !o_.selfFault.empty() && rank == o_.victim;
    if (spec.kind == kBarrier) return comm_->barrier();
    if (spec.kind == kSendRecv) return sendRecv(j, spec);
    if (spec.kind == kAsync) return asyncAllReduce(spec, faultOp, selfFault);
    if (spec.kind == kBucketer) return bucketer(j, spec, faultOp, selfFault);
    const perf::CollectiveBench& b = *benches()[spec.kind];
    if (!b.reduces) spec.op = ReduceOp::kSum;
    perf::Pattern pattern(spec.type, spec.op, ranks);
    if (!pattern.limitation().empty()) {
      spec.type = DataType::kFloat32;
      spec.op = ReduceOp::kSum;
      spec.count = std::min<size_t>(spec.count, o_.maxBytes / 4);
      pattern = perf::Pattern(spec.type, spec.op, ranks);
    }
    const perf::BenchContext ctx = context(spec, pattern);
    BRAID_RETURN_IF_ERROR(force(b, spec));
    const size_t bytes = std::max<size_t>(spec.count, 1) * dataTypeSize(spec.type);
    ensure(&send_, bytes);
    ensure(&recv_, bytes);
    void* send = spec.inPlace ? recv_.data() : send_.data();
    b.initBuffers(ctx, send, recv_.data(), spec.count, spec.inPlace);
    BRAID_RETURN_IF_ERROR(b.run(ctx, send, recv_.data(), spec.count, spec.inPlace));
    size_t wrong = b.check(ctx, recv_.data(), spec.count, spec.inPlace);
    if (wrong != 0) out_->line("wrong " + std::to_string(j) + " " + std::to_string(wrong));
    return Status::ok();
  }

  Status force(const perf::CollectiveBench& b, const OpSpec& spec) {
    std::vector<std::string> names = b.algorithms.candidates(*comm_);
    std::string name = spec.algoPick < 0 || names.empty()
                           ? ""
                           : names[static_cast<size_t>(spec.algoPick) % names.size()];
    return b.algorithms.select(*comm_, name);
  }

  // Several all-reduces outstanding at once, each checked.
  Status asyncAllReduce(OpSpec spec, bool faultOp, bool selfFault) {
    const int ranks = comm_->size();
    spec.type = DataType::kFloat32;
    spec.op = ReduceOp::kSum;
    size_t count = std::max<size_t>(spec.count / 4, 1);
    if (faultOp) count = size_t{4} << 20;  // long enough to be in flight
    perf::Pattern pattern(spec.type, spec.op, ranks);
    const perf::CollectiveBench& b = perf::allReduceBench();
    const perf::BenchContext ctx = context(spec, pattern);
    const int depth = faultOp ? 1 : spec.asyncDepth;
    std::vector<std::vector<uint8_t>> sends(depth), recvs(depth);
    std::vector<std::shared_ptr<Work>> works;
    for (int k = 0; k < depth; ++k) {
      sends[k].resize(count * 4);
      recvs[k].resize(count * 4);
      b.initBuffers(ctx, sends[k].data(), recvs[k].data(), count, false);
      auto w = comm_->allReduceAsync(sends[k].data(), recvs[k].data(), count, spec.type, spec.op);
      if (!w.isOk()) return w.status();
      works.push_back(std::move(w).value());
    }
    if (selfFault) inject();
    for (int k = 0; k < depth; ++k) {
      BRAID_RETURN_IF_ERROR(works[k]->wait());
      size_t wrong = b.check(ctx, recvs[k].data(), count, false);
      if (wrong != 0) out_->line("wrong async " + std::to_string(wrong));
    }
    return Status::ok();
  }

  // A Bucketer job (bucketer_op.h); the fault's op is the long one.
  Status bucketer(int j, const OpSpec& spec, bool faultOp, bool selfFault) {
    BucketerOpOptions bo;
    bo.seed = spec.bucketerSeed;
    bo.maxBytes = o_.maxBytes;
    bo.large = faultOp;
    if (selfFault) bo.midStep = [this] { inject(); };
    size_t wrong = 0;
    Status s = runBucketerOp(*comm_, bo, &wrong);
    if (wrong != 0) out_->line("wrong " + std::to_string(j) + " " + std::to_string(wrong));
    return s;
  }

  void inject() {
    out_->line("inject " + std::to_string(monotonicNs()) + " " + o_.selfFault);
    if (o_.selfFault == "exit") std::exit(0);
    if (o_.selfFault == "sockclose") shutdownSockets();
  }

  // Pairs (0,1), (2,3), ...: the even rank sends first; an odd last rank sits out.
  Status sendRecv(int j, const OpSpec& spec) {
    const int rank = comm_->rank(), ranks = comm_->size();
    const int peer = rank ^ 1;
    if (peer >= ranks) return Status::ok();
    perf::Pattern pattern(DataType::kInt32, ReduceOp::kSum, ranks);
    const size_t count = spec.count / 4;
    ensure(&send_, std::max<size_t>(count, 1) * 4);
    ensure(&recv_, std::max<size_t>(count, 1) * 4);
    perf::fillPeriodic(send_.data(), pattern.contribution(rank), pattern.period(), 4, count);
    perf::poison(recv_.data(), count * 4);
    if (rank % 2 == 0) {
      BRAID_RETURN_IF_ERROR(comm_->send(send_.data(), count, DataType::kInt32, peer));
      BRAID_RETURN_IF_ERROR(comm_->recv(recv_.data(), count, DataType::kInt32, peer));
    } else {
      BRAID_RETURN_IF_ERROR(comm_->recv(recv_.data(), count, DataType::kInt32, peer));
      BRAID_RETURN_IF_ERROR(comm_->send(send_.data(), count, DataType::kInt32, peer));
    }
    size_t wrong = perf::countMismatches(recv_.data(), pattern.contribution(peer),
                                         pattern.period(), 4, count);
    if (wrong != 0) out_->line("wrong " + std::to_string(j) + " " + std::to_string(wrong));
    return Status::ok();
  }

  Options o_;
  Reporter* out_;
  std::unique_ptr<Communicator> comm_;
  std::vector<uint8_t> send_, recv_;
};

int usage(const char* argv0, int code) {
  fprintf(code == 0 ? stdout : stderr,
          "usage: %s --seed S [--ops N] [--max-bytes B] [--victim R --fault-at J "
          "--self-fault exit|sockclose] [--fault-at J --fault-op collective|bucketer] "
          "[--report FILE]\n"
          "One rank of a braid-chaos job (started by braid-chaos, which injects the faults);\n"
          "the communicator comes from the environment (braid-info launch).\n",
          argv0);
  return code;
}

}  // namespace
}  // namespace braid::chaos

int main(int argc, char** argv) {
  using braid::chaos::Options;
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") return braid::chaos::usage(argv[0], 0);
    if ((a == "--seed" || a == "--ops" || a == "--max-bytes" || a == "--victim" ||
         a == "--fault-at" || a == "--self-fault" || a == "--fault-op" || a == "--report") &&
        (v = next()) == nullptr) {
      return braid::chaos::usage(argv[0], 2);
    }
    if (a == "--seed") o.seed = strtoull(v, nullptr, 10);
    else if (a == "--ops") o.ops = atoi(v);
    else if (a == "--max-bytes") o.maxBytes = strtoull(v, nullptr, 10);
    else if (a == "--victim") o.victim = atoi(v);
    else if (a == "--fault-at") o.faultAt = atoi(v);
    else if (a == "--self-fault") o.selfFault = v;
    else if (a == "--fault-op" && (strcmp(v, "bucketer") == 0 || strcmp(v, "collective") == 0))
      o.faultOpBucketer = strcmp(v, "bucketer") == 0;
    else if (a == "--report") o.report = v;
    else return braid::chaos::usage(argv[0], 2);
  }
  if (!o.selfFault.empty() && o.selfFault != "exit" && o.selfFault != "sockclose") {
    return braid::chaos::usage(argv[0], 2);
  }
  o.maxBytes = std::max<size_t>(o.maxBytes, 64);
  // %r in the report path: this rank (RANK), so that one command line serves every rank.
  if (size_t at = o.report.find("%r"); at != std::string::npos) {
    const char* rank = getenv("RANK");
    o.report.replace(at, 2, rank != nullptr ? rank : "0");
  }
  braid::chaos::Reporter out(o.report);
  return braid::chaos::Worker(o, &out).run();
}
