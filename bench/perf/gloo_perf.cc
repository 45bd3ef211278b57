// gloo-perf: braid-perf's sweeps with gloo's collectives (Debian's libgloo-dev, TCP transport),
// the CPU baseline PyTorch's gloo backend stands on; bench/compare_peers.sh runs it beside braid.
// Same flags as mpi-perf (-C -b -e -f -i -n -w -c -o -d -r -J), same columns, same JSON keys,
// algo "gloo-<gloo's algorithm>". The size column and the busbw factor are braid-perf's:
//
//   -C all_reduce      gloo::allreduce (ring; -a bcube)   S = each rank's vector   2(n-1)/n
//   -C reduce_scatter  ReduceScatterHalvingDoubling       S = the whole vector     (n-1)/n
//   -C all_gather      gloo::allgather (ring)             S = the whole vector     (n-1)/n
//   -C broadcast       gloo::broadcast                    S = the message          1
//
// Blocks hold count/n elements (count = S / element size), as in braid-perf; a size whose block
// would be empty is skipped (gloo rejects empty buffers). gloo's only reduce-scatter in this
// version works in place (the input vector is overwritten and the rank's block ends at its
// start), so the out-of-place row first copies the input into the output buffer, as a caller that
// keeps its input must; in-place all_gather and broadcast leave out gloo's input buffer.
//
// One process per rank, RANK and WORLD_SIZE from the environment (braid-run --file-store,
// scripts/fabric.sh), rendezvous through gloo's FileStore in --store DIR (default
// $BRAID_FILE_STORE), the TCP device bound to --addr (default $FABRIC_ADDR, else 127.0.0.1):
//
//   braid-run -n 2 --file-store -- ./gloo-perf -C all_gather -b 8 -e 1M -f 4
//
// Every collective's options (and with them gloo's registered buffers) are built once per size and
// placement, outside the timed calls. Time per size = max over ranks of each rank's average call
// time; algbw = bytes / time. The check uses small integers, so every result is exact.
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "size_arg.h"

#ifndef BRAID_PERF_BUILD_TYPE
#define BRAID_PERF_BUILD_TYPE "none"
#endif
#ifndef BRAID_PERF_CXX_FLAGS
#define BRAID_PERF_CXX_FLAGS ""
#endif

namespace {

constexpr size_t kPeriodPerRank = 61;  // prime, as braid-perf's pattern
constexpr unsigned char kPoisonByte = 0xA5;

enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast };
const char* const kCollNames[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
enum class Op { kSum, kProd, kMin, kMax };
enum class Type { kFloat, kDouble, kInt32 };

struct Options {
  Coll coll = Coll::kAllReduce;
  size_t minBytes = 8, maxBytes = size_t{128} << 20, stepBytes = 0;
  double stepFactor = 2.0;
  int iters = 20, warmup = 5, check = 1, root = 0, timeoutS = 300;
  Type type = Type::kFloat;
  std::string typeName = "float";
  Op op = Op::kSum;
  std::string opName = "sum";
  std::string algo = "ring";  // all_reduce: ring | bcube
  std::string jsonPath, storeDir, addr;
};

int gRank = 0;
int gSize = 1;

void usage(const char* prog) {
  std::printf(
      "Usage: %s [-C COLL] [-b MIN] [-e MAX] [-f F | -i STEP] [-n N] [-w N] [-c N] [-o OP]\n"
      "          [-d TYPE] [-r ROOT] [-a ring|bcube] [-J FILE] [--store DIR] [--addr HOST]\n"
      "          [--timeout S]\n"
      "  -C      all_reduce (default) | reduce_scatter | all_gather | broadcast; the size is\n"
      "          braid-perf's: all_reduce each rank's vector, reduce_scatter and all_gather the\n"
      "          whole vector (n blocks), broadcast the message\n"
      "  -b/-e   smallest/largest message (default 8 / 128M; K M G suffixes, x1024)\n"
      "  -f      size factor (default 2); -i adds STEP bytes instead\n"
      "  -n/-w   timed/warm-up iterations per size (default 20 / 5)\n"
      "  -c      checked calls per size and placement (default 1; 0 = none)\n"
      "  -o      sum|prod|min|max (default sum; ignored without a reduction)\n"
      "  -d      float|double|int32 (default float)\n"
      "  -r      broadcast's root (default 0)     -a  all_reduce's algorithm (default ring)\n"
      "  -J      one JSON object per line per size and placement (braid-perf's keys)\n"
      "  --store DIR   gloo FileStore directory shared by the ranks (default $BRAID_FILE_STORE)\n"
      "  --addr HOST   address of the TCP device (default $FABRIC_ADDR, else 127.0.0.1)\n"
      "  --timeout S   gloo's per-operation timeout (default 300)\n"
      "Ranks: RANK and WORLD_SIZE from the environment (braid-run --file-store, fabric.sh).\n",
      prog);
}

bool parseSize(const char* s, size_t* out) { return baselineParseSize(s, out) == 0; }

// Returns 0 to run, 1 for help, 2 for a usage error (said on stderr by rank 0).
int parseOptions(int argc, char** argv, Options* o) {
  auto bad = [&](const std::string& flag, const char* value) {
    if (gRank == 0) {
      std::fprintf(stderr, "%s: bad option %s %s (see -h)\n", argv[0], flag.c_str(),
                   value ? value : "");
    }
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      if (gRank == 0) usage(argv[0]);
      return 1;
    }
    if (i + 1 >= argc) return bad(a, "(no value)");
    const char* v = argv[++i];
    if (a == "-C") {
      int found = -1;
      for (int k = 0; k < 4; ++k) found = std::strcmp(v, kCollNames[k]) == 0 ? k : found;
      if (found < 0) return bad(a, v);
      o->coll = static_cast<Coll>(found);
    } else if (a == "-b") {
      if (!parseSize(v, &o->minBytes)) return bad(a, v);
    } else if (a == "-e") {
      if (!parseSize(v, &o->maxBytes)) return bad(a, v);
    } else if (a == "-i") {
      if (!parseSize(v, &o->stepBytes)) return bad(a, v);
    } else if (a == "-f") {
      o->stepFactor = std::atof(v);
      if (!(o->stepFactor > 1.0)) return bad(a, v);
    } else if (a == "-n") {
      if ((o->iters = std::atoi(v)) < 1) return bad(a, v);
    } else if (a == "-w") {
      if ((o->warmup = std::atoi(v)) < 0) return bad(a, v);
    } else if (a == "-c") {
      if ((o->check = std::atoi(v)) < 0) return bad(a, v);
    } else if (a == "-r") {
      if ((o->root = std::atoi(v)) < 0) return bad(a, v);
    } else if (a == "--timeout") {
      if ((o->timeoutS = std::atoi(v)) < 1) return bad(a, v);
    } else if (a == "-o") {
      const std::string s = v;
      if (s == "sum")
        o->op = Op::kSum;
      else if (s == "prod")
        o->op = Op::kProd;
      else if (s == "min")
        o->op = Op::kMin;
      else if (s == "max")
        o->op = Op::kMax;
      else
        return bad(a, v);
      o->opName = s;
    } else if (a == "-d") {
      const std::string s = v;
      if (s == "float" || s == "f32" || s == "fp32") {
        o->type = Type::kFloat, o->typeName = "float";
      } else if (s == "double" || s == "f64" || s == "fp64") {
        o->type = Type::kDouble, o->typeName = "double";
      } else if (s == "int32" || s == "i32") {
        o->type = Type::kInt32, o->typeName = "int32";
      } else {
        return bad(a, v);
      }
    } else if (a == "-a") {
      if (std::strcmp(v, "ring") != 0 && std::strcmp(v, "bcube") != 0) return bad(a, v);
      o->algo = v;
    } else if (a == "-J") {
      o->jsonPath = v;
    } else if (a == "--store") {
      o->storeDir = v;
    } else if (a == "--addr") {
      o->addr = v;
    } else {
      return bad(a, v);
    }
  }
  if (o->minBytes > o->maxBytes) return bad("-b", "(larger than -e)");
  if (o->root >= gSize) {
    if (gRank == 0)
      std::fprintf(stderr, "%s: -r %d is not a rank of %d\n", argv[0], o->root, gSize);
    return 2;
  }
  return 0;
}

// Rank r's value at pattern position j: small integers, so that every partial result is exact
// whatever the reduction order (the same values as mpi-perf's).
double patternValue(Op op, int r, size_t j) {
  const long long mix = static_cast<long long>(7 * j) + 13LL * r + static_cast<long long>(j) * r;
  if (op == Op::kSum) return static_cast<double>(mix % 5 - 2);
  if (op == Op::kProd) {
    double v = 1;
    if (static_cast<size_t>(r) == j % static_cast<size_t>(gSize)) v = 2;
    if (gSize > 1 && static_cast<size_t>(r) == (3 * j + 1) % static_cast<size_t>(gSize)) v = 2;
    if ((j + 2 * static_cast<size_t>(r)) % 3 == 0) v = -v;
    return v;
  }
  return static_cast<double>(mix % 9 - 4);
}

template <typename T>
void fillPeriodic(T* dst, const std::vector<T>& table, size_t count, size_t phase) {
  const size_t period = table.size();
  phase %= period;
  while (count > 0) {
    const size_t n = std::min(period - phase, count);
    std::memcpy(dst, table.data() + phase, n * sizeof(T));
    dst += n;
    count -= n;
    phase = 0;
  }
}

template <typename T>
size_t countWrong(const T* buf, const std::vector<T>& table, size_t count, size_t phase) {
  const size_t period = table.size();
  size_t wrong = 0;
  for (size_t k = 0; k < count; ++k) {
    wrong += std::memcmp(buf + k, table.data() + (phase + k) % period, sizeof(T)) != 0;
  }
  return wrong;
}

void poison(void* buf, size_t bytes) { std::memset(buf, kPoisonByte, bytes); }

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn reduceFn(Op op) {
  switch (op) {
    case Op::kSum:
      return static_cast<ReduceFn>(&gloo::sum<T>);
    case Op::kProd:
      return static_cast<ReduceFn>(&gloo::product<T>);
    case Op::kMin:
      return static_cast<ReduceFn>(&gloo::min<T>);
    case Op::kMax:
      return static_cast<ReduceFn>(&gloo::max<T>);
  }
  return nullptr;
}

template <typename T>
const gloo::ReductionFunction<T>* reductionFunction(Op op) {
  switch (op) {
    case Op::kSum:
      return gloo::ReductionFunction<T>::sum;
    case Op::kProd:
      return gloo::ReductionFunction<T>::product;
    case Op::kMin:
      return gloo::ReductionFunction<T>::min;
    case Op::kMax:
      return gloo::ReductionFunction<T>::max;
  }
  return nullptr;
}

// A scalar reduction over the ranks (the slowest rank's time, the sum of wrong elements).
double allReduceScalar(const std::shared_ptr<gloo::Context>& ctx, double v, bool max) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(&v, 1);
  opts.setReduceFunction(max ? static_cast<ReduceFn>(&gloo::max<double>)
                             : static_cast<ReduceFn>(&gloo::sum<double>));
  opts.setTag(1);
  gloo::allreduce(opts);
  return v;
}

void barrier(const std::shared_ptr<gloo::Context>& ctx) {
  gloo::BarrierOptions opts(ctx);
  opts.setTag(2);
  gloo::barrier(opts);
}

// One collective at one size and placement: its gloo options, built once.
template <typename T>
class Call {
 public:
  Call(const std::shared_ptr<gloo::Context>& ctx, const Options& o, bool inPlace, size_t count,
       T* send, T* recv)
      : o_(o),
        inPlace_(inPlace),
        count_(count),
        block_(count / static_cast<size_t>(gSize)),
        send_(send),
        recv_(recv) {
    switch (o.coll) {
      case Coll::kAllReduce:
        ar_ = std::make_unique<gloo::AllreduceOptions>(ctx);
        if (!inPlace) ar_->setInput(send, count);
        ar_->setOutput(recv, count);
        ar_->setReduceFunction(reduceFn<T>(o.op));
        ar_->setAlgorithm(o.algo == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                            : gloo::AllreduceOptions::Algorithm::RING);
        break;
      case Coll::kReduceScatter:
        rs_ = std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
            ctx, std::vector<T*>{recv}, static_cast<int>(block_ * gSize),
            std::vector<int>(gSize, static_cast<int>(block_)), reductionFunction<T>(o.op));
        break;
      case Coll::kAllGather:
        ag_ = std::make_unique<gloo::AllgatherOptions>(ctx);
        if (!inPlace) ag_->setInput(send, block_);
        ag_->setOutput(recv, block_ * gSize);
        break;
      case Coll::kBroadcast:
        bc_ = std::make_unique<gloo::BroadcastOptions>(ctx);
        if (!inPlace && gRank == o.root) bc_->setInput(send, count);
        bc_->setOutput(recv, count);
        bc_->setRoot(o.root);
        break;
    }
  }

  // Fills the input with this rank's pattern and poisons the output.
  void prepare(const std::vector<T>& mine) {
    const size_t es = sizeof(T);
    switch (o_.coll) {
      case Coll::kAllReduce:
      case Coll::kReduceScatter:
        fillPeriodic(inPlace_ ? recv_ : send_, mine, count_, 0);
        if (!inPlace_) poison(recv_, count_ * es);
        break;
      case Coll::kAllGather:
        poison(recv_, count_ * es);
        fillPeriodic(inPlace_ ? recv_ + gRank * block_ : send_, mine, block_, gRank * block_);
        break;
      case Coll::kBroadcast:
        poison(recv_, count_ * es);
        if (gRank == o_.root) fillPeriodic(inPlace_ ? recv_ : send_, mine, count_, 0);
        break;
    }
  }

  void run() {
    switch (o_.coll) {
      case Coll::kAllReduce:
        gloo::allreduce(*ar_);
        break;
      case Coll::kReduceScatter:
        if (!inPlace_) std::memcpy(recv_, send_, block_ * gSize * sizeof(T));
        rs_->run();
        break;
      case Coll::kAllGather:
        gloo::allgather(*ag_);
        break;
      case Coll::kBroadcast:
        gloo::broadcast(*bc_);
        break;
    }
  }

  // Wrong elements of this rank's output.
  size_t check(const std::vector<std::vector<T>>& tables, const std::vector<T>& reduced) const {
    switch (o_.coll) {
      case Coll::kAllReduce:
        return countWrong(recv_, reduced, count_, 0);
      case Coll::kReduceScatter:
        return countWrong(recv_, reduced, block_, gRank * block_);
      case Coll::kAllGather: {
        size_t wrong = 0;
        for (int q = 0; q < gSize; ++q) {
          wrong += countWrong(recv_ + q * block_, tables[q], block_, q * block_);
        }
        return wrong;
      }
      case Coll::kBroadcast:
        return countWrong(recv_, tables[o_.root], count_, 0);
    }
    return 0;
  }

 private:
  const Options& o_;
  bool inPlace_;
  size_t count_, block_;
  T* send_;
  T* recv_;
  std::unique_ptr<gloo::AllreduceOptions> ar_;
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<T>> rs_;
  std::unique_ptr<gloo::AllgatherOptions> ag_;
  std::unique_ptr<gloo::BroadcastOptions> bc_;
};

std::string jsonEscape(const std::string& in) {
  std::string out;
  for (unsigned char ch : in) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", ch);
      out += b;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string cpuModel() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "unknown";
  char line[512];
  std::string model = "unknown";
  while (std::fgets(line, sizeof(line), f)) {
    if (std::strncmp(line, "model name", 10) == 0) {
      const char* colon = std::strchr(line, ':');
      if (colon) {
        model = colon + 2;
        model.erase(model.find_last_not_of("\n") + 1);
      }
      break;
    }
  }
  std::fclose(f);
  return model;
}

template <typename T>
int sweep(const std::shared_ptr<gloo::Context>& ctx, const Options& o, int hosts) {
  const size_t period = kPeriodPerRank * static_cast<size_t>(gSize);
  std::vector<std::vector<T>> tables(gSize, std::vector<T>(period));
  std::vector<T> reduced(period);
  for (size_t j = 0; j < period; ++j) {
    double acc = 0;
    for (int r = 0; r < gSize; ++r) {
      const double v = patternValue(o.op, r, j);
      tables[r][j] = static_cast<T>(v);
      if (r == 0)
        acc = v;
      else if (o.op == Op::kSum)
        acc += v;
      else if (o.op == Op::kProd)
        acc *= v;
      else if (o.op == Op::kMax)
        acc = v > acc ? v : acc;
      else
        acc = v < acc ? v : acc;
    }
    reduced[j] = static_cast<T>(acc);
  }
  const std::vector<T>& mine = tables[gRank];

  const size_t es = sizeof(T);
  const size_t maxCount = std::max<size_t>(o.maxBytes / es, 1);
  std::vector<T> sendbuf(maxCount), recvbuf(maxCount);
  const bool reduces = o.coll == Coll::kAllReduce || o.coll == Coll::kReduceScatter;
  const std::string opName = reduces ? o.opName : "none";
  const int root = o.coll == Coll::kBroadcast ? o.root : -1;
  const char* const glooAlgo[] = {o.algo == "bcube" ? "bcube" : "ring", "halving_doubling", "ring",
                                  "broadcast"};
  const std::string algo = std::string("gloo-") + glooAlgo[static_cast<int>(o.coll)];
  const double n = gSize;
  const double factor = o.coll == Coll::kAllReduce   ? 2.0 * (n - 1) / n
                        : o.coll == Coll::kBroadcast ? 1.0
                                                     : (n - 1) / n;
  const char* const formula[] = {"2(n-1)/n", "(n-1)/n", "(n-1)/n", "1"};

  char host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  const std::string cpu = cpuModel();
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  struct utsname u;
  uname(&u);
#if defined(__clang__)
  const std::string compiler = std::string("clang ") + __clang_version__;
#else
  const std::string compiler = std::string("gcc ") + __VERSION__;
#endif
  FILE* json = nullptr;
  if (gRank == 0 && !o.jsonPath.empty()) {
    json = std::fopen(o.jsonPath.c_str(), "w");
    if (!json) std::fprintf(stderr, "gloo-perf: cannot write %s\n", o.jsonPath.c_str());
  }

  const int aw = 21;  // braid-perf's algo column
  if (gRank == 0) {
    std::printf(
        "# gloo-perf %s: gloo %d.%d.%d (%s), TCP transport, nccl-tests conventions, "
        "busbw = algbw x %s\n",
        kCollNames[static_cast<int>(o.coll)], GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
        GLOO_VERSION_PATCH, algo.c_str(), formula[static_cast<int>(o.coll)]);
    std::printf("# machine    : %s, %ld CPUs online (%d usable), host %s, %s %s\n", cpu.c_str(),
                sysconf(_SC_NPROCESSORS_ONLN), CPU_COUNT(&set), host, u.sysname, u.release);
    std::printf("# build      : %s, %s, flags \"%s\"\n", compiler.c_str(), BRAID_PERF_BUILD_TYPE,
                BRAID_PERF_CXX_FLAGS);
    std::printf("# ranks      : %d on %d host(s), device address %s\n", gSize, hosts,
                o.addr.c_str());
    std::printf("# parameters : -C %s -b %zu -e %zu ", kCollNames[static_cast<int>(o.coll)],
                o.minBytes, o.maxBytes);
    if (o.stepBytes)
      std::printf("-i %zu", o.stepBytes);
    else
      std::printf("-f %g", o.stepFactor);
    std::printf(" -n %d -w %d -c %d -o %s -d %s -r %d -J %s\n#\n", o.iters, o.warmup, o.check,
                opName.c_str(), o.typeName.c_str(), root,
                o.jsonPath.empty() ? "(none)" : o.jsonPath.c_str());
    std::printf("#%*s%*s\n", 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + aw + 34, "out-of-place", 38,
                "in-place");
    std::printf("#%11s  %12s  %8s  %6s  %*s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
                "count", "type", "redop", aw, "algo", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong");
    std::printf("#%11s  %12s  %8s  %6s  %*s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
                "(elements)", "", "", aw, "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "");
    std::fflush(stdout);
  }

  double busSum = 0, wrongTotal = 0;
  int busRows = 0;
  size_t lastCount = static_cast<size_t>(-1);
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
    const size_t count = bytes / es;
    size_t next = o.stepBytes ? bytes + o.stepBytes
                              : static_cast<size_t>(static_cast<double>(bytes) * o.stepFactor);
    if (next <= bytes) next = bytes + 1;
    bytes = next;
    if (count == lastCount) continue;
    lastCount = count;
    const size_t nbytes = count * es;
    const bool blocked = o.coll == Coll::kReduceScatter || o.coll == Coll::kAllGather;
    if (count == 0 || (blocked && count < static_cast<size_t>(gSize))) {
      if (gRank == 0) std::printf("# %zu B: no element per rank; skipped\n", nbytes);
      continue;
    }
    double timeUs[2], wrong[2];
    for (int p = 0; p < 2; ++p) {
      Call<T> call(ctx, o, p == 1, count, sendbuf.data(), recvbuf.data());
      call.prepare(mine);
      for (int i = 0; i < o.warmup; ++i) call.run();
      barrier(ctx);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters; ++i) call.run();
      const double local =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          o.iters;
      double w = 0;
      for (int i = 0; i < o.check; ++i) {
        call.prepare(mine);
        call.run();
        w += static_cast<double>(call.check(tables, reduced));
      }
      timeUs[p] = allReduceScalar(ctx, local, /*max=*/true);
      wrong[p] = allReduceScalar(ctx, w, /*max=*/false);
      wrongTotal += wrong[p];
    }
    if (gRank != 0) continue;
    std::printf("%12zu  %12zu  %8s  %6s  %*s", nbytes, count, o.typeName.c_str(), opName.c_str(),
                aw, algo.c_str());
    for (int p = 0; p < 2; ++p) {
      const double algbw = timeUs[p] > 0 ? static_cast<double>(nbytes) / timeUs[p] / 1e3 : 0;
      const double busbw = algbw * factor;
      busSum += busbw;
      ++busRows;
      char t[32], wt[32];
      std::snprintf(t, sizeof(t),
                    timeUs[p] >= 10000 ? "%7.0f"
                    : timeUs[p] >= 100 ? "%7.1f"
                                       : "%7.2f",
                    timeUs[p]);
      if (o.check > 0)
        std::snprintf(wt, sizeof(wt), "%.0f", wrong[p]);
      else
        std::snprintf(wt, sizeof(wt), "N/A");
      std::printf("  %s  %6.2f  %6.2f  %6s", t, algbw, busbw, wt);
      if (json) {
        std::fprintf(
            json,
            "{\"collective\":\"%s\",\"algo\":\"%s\",\"algo_chosen\":\"%s\",\"ranks\":%d,"
            "\"hosts\":%d,\"bytes\":%zu,\"count\":%zu,\"dtype\":\"%s\",\"op\":\"%s\",\"root\":%d,"
            "\"inplace\":%s,\"time_us\":%.3f,\"algbw_GBps\":%.6f,\"busbw_GBps\":%.6f,"
            "\"wrong\":%.0f,\"checked\":%s,\"iters\":%d,\"warmup\":%d,\"transport\":\"tcp\","
            "\"tool\":\"gloo-perf\",\"host\":\"%s\",\"cpu\":\"%s\",\"cpus\":%ld,"
            "\"compiler\":\"%s\",\"build_type\":\"%s\",\"gloo_version\":\"%d.%d.%d\"}\n",
            kCollNames[static_cast<int>(o.coll)], algo.c_str(), algo.c_str(), gSize, hosts, nbytes,
            count, o.typeName.c_str(), opName.c_str(), root, p == 1 ? "true" : "false", timeUs[p],
            algbw, busbw, wrong[p], o.check > 0 ? "true" : "false", o.iters, o.warmup,
            jsonEscape(host).c_str(), jsonEscape(cpu).c_str(), sysconf(_SC_NPROCESSORS_ONLN),
            jsonEscape(compiler).c_str(), BRAID_PERF_BUILD_TYPE, GLOO_VERSION_MAJOR,
            GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  if (json) std::fclose(json);
  if (gRank == 0) {
    std::printf("# Out of bounds values : %.0f %s\n", wrongTotal,
                wrongTotal == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %g\n#\n", busRows ? busSum / busRows : 0.0);
    std::fflush(stdout);
  }
  return wrongTotal == 0 ? 0 : 1;
}

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  gRank = envInt("RANK", 0);
  gSize = envInt("WORLD_SIZE", 1);
  Options o;
  if (const char* s = std::getenv("BRAID_FILE_STORE")) o.storeDir = s;
  const char* fabricAddr = std::getenv("FABRIC_ADDR");
  o.addr = fabricAddr && *fabricAddr ? fabricAddr : "127.0.0.1";
  const int parsed = parseOptions(argc, argv, &o);
  if (parsed != 0) return parsed == 1 ? 0 : 2;
  if (gSize < 1 || gRank < 0 || gRank >= gSize) {
    std::fprintf(stderr, "gloo-perf: RANK %d / WORLD_SIZE %d is not a rank of a launch\n", gRank,
                 gSize);
    return 2;
  }
  if (o.storeDir.empty()) {
    std::fprintf(stderr,
                 "gloo-perf: rank %d: no rendezvous directory (--store DIR or "
                 "BRAID_FILE_STORE; braid-run --file-store sets it)\n",
                 gRank);
    return 2;
  }
  const int hosts = std::max(envInt("FABRIC_NUM_HOSTS", 1), 1);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.addr;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore fileStore(o.storeDir);
    gloo::rendezvous::PrefixStore store("gloo-perf", fileStore);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(gRank, gSize);
    ctx->setTimeout(std::chrono::seconds(o.timeoutS));
    ctx->connectFullMesh(store, dev);
    std::shared_ptr<gloo::Context> base = ctx;
    switch (o.type) {
      case Type::kFloat:
        return sweep<float>(base, o, hosts);
      case Type::kDouble:
        return sweep<double>(base, o, hosts);
      case Type::kInt32:
        return sweep<int32_t>(base, o, hosts);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-perf: rank %d of %d: %s\n", gRank, gSize, e.what());
    return 1;
  }
  return 0;
}
