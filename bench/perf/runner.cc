// braid-perf's driver: benchMain (harness.h) parses the options, starts local ranks for --ranks
// or joins an existing launch, and runs one RankRunner per rank: it agrees on the algorithms
// with the other ranks, sweeps the sizes (warm-up, barrier, timed calls, checked calls; the
// per-rank times and wrong counts travel by all-gather) and hands each row to the Report.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>

#include "bench/perf/ceiling.h"
#include "bench/perf/harness.h"
#include "bench/perf/options.h"
#include "bench/perf/report.h"
#include "transport/bootstrap/launchers.h"
#include "transport/bootstrap/local_launch.h"

namespace braid::perf {
namespace {

constexpr size_t kBufferAlignment = 4096;
// Set by the --ranks launcher in its children, so that they describe how they were started.
constexpr const char* kLauncherEnv = "BRAID_PERF_LAUNCHER";

// ---------------------------------------------------------------------------------------------
// How this process was started.

/// The launcher table's verdict on this process's environment (read once).
const LaunchChoice& launchChoice() {
  static const LaunchChoice choice =
      detectLaunch(LaunchEnvironment::fromProcess(), LaunchSettings::fromParams());
  return choice;
}

/// How this rank was started: the --ranks launcher, or the launcher table's row (its name first:
/// "slurm (Slurm's srun), world size 4, tcp store ...").
std::string launchDescription() {
  if (const char* l = getenv(kLauncherEnv)) return l;
  return launchChoice().row() != nullptr ? launchChoice().summary() : "environment";
}

/// The --ranks launcher: starts o.ranks copies of this program (without --ranks) and waits.
int runLauncher(const Options& o, const std::vector<std::string>& args) {
  launch::LaunchOptions lo;
  lo.ranks = o.ranks > 0 ? o.ranks : 1;
  lo.fileStore = o.fileStore;
  lo.timeoutMs = o.timeoutS * 1000;
  lo.argv.push_back(launch::selfExecutable());
  if (lo.argv[0].empty()) lo.argv[0] = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--ranks") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--ranks=", 0) == 0 || a == "--file-store") continue;
    lo.argv.push_back(a);
  }
  lo.env.emplace_back(kLauncherEnv, "braid-perf --ranks " + std::to_string(lo.ranks) +
                                        (o.fileStore ? " (file store)" : " (tcp store)"));
  if (!o.transport.empty()) lo.env.emplace_back("BRAID_TRANSPORT", o.transport);
  Result<launch::LaunchResult> r = launch::launchLocalRanks(lo);
  if (!r) {
    std::fprintf(stderr, "braid-perf: could not start %d ranks: %s\n", lo.ranks,
                 r.status().toString().c_str());
    return 1;
  }
  int worst = 0;
  for (size_t i = 0; i < r->exitCodes.size(); ++i) {
    const int code = r->exitCodes[i];
    if (code != 0) {
      std::fprintf(stderr, "braid-perf: rank %zu exited with %s %d\n", i,
                   code > 128 ? "signal" : "status", code > 128 ? code - 128 : code);
      worst = std::max(worst, code == 2 ? 2 : 1);
    }
  }
  if (r->timedOut) {
    std::fprintf(stderr, "braid-perf: ranks killed after -T %d s\n", o.timeoutS);
    worst = std::max(worst, 1);
  }
  return worst;
}

// ---------------------------------------------------------------------------------------------
// One rank.

struct AlignedBuffer {
  void* ptr = nullptr;
  bool shared = false;  // a window of allocShared: the communicator's end frees it
  ~AlignedBuffer() {
    if (!shared) free(ptr);
  }
};

struct Measurement {
  double timeUs = 0;
  double wrong = 0;
};

class RankRunner {
 public:
  RankRunner(const CollectiveBench& bench, const Options& o, std::unique_ptr<Communicator> comm)
      : bench_(bench), o_(o), comm_(std::move(comm)), pattern_(o.type, o.op, comm_->size()) {
    ctx_.comm = comm_.get();
    ctx_.rank = comm_->rank();
    ctx_.ranks = comm_->size();
    ctx_.type = o.type;
    ctx_.op = o.op;
    ctx_.root = o.root;
    ctx_.pattern = &pattern_;
  }

  int run();

 private:
  Status resolveAlgorithms();
  Status agreeOnAvailable(const std::vector<std::string>& names,
                          std::vector<std::string>* unavailableWhy);
  Status allocateBuffers(size_t maxBytes);
  RunSetup describe() const;
  Status measureSize(size_t count, std::vector<RowResult>* rows);
  Status selectFor(const std::string& algo, size_t bytes, RowResult* row);
  Status measure(size_t count, bool inPlace, Measurement* m);
  Status probeCeiling(size_t count, double* ceilingUs);
  void fail(const std::string& what, const Status& s) {
    std::fprintf(stderr, "braid-perf rank %d: %s: %s\n", ctx_.rank, what.c_str(),
                 s.toString().c_str());
    comm_->abort("braid-perf rank " + std::to_string(ctx_.rank) + " failed: " + what);
  }
  bool leader() const { return ctx_.rank == 0; }

  const CollectiveBench& bench_;
  const Options& o_;
  std::unique_ptr<Communicator> comm_;
  Pattern pattern_;
  BenchContext ctx_;
  std::vector<std::string> algos_;      // "auto" or a forced name
  std::vector<std::string> available_;  // every forceable algorithm available here
  AlignedBuffer send_;
  AlignedBuffer recv_;
  std::unique_ptr<CeilingProbe> ceiling_;  // null: no ceiling column (ceilingWhy_ says why)
  std::string ceilingWhy_;
  double wrongTotal_ = 0;
};

// Availability is decided by every rank and agreed on (an algorithm runs only if all can).
Status RankRunner::agreeOnAvailable(const std::vector<std::string>& names,
                                    std::vector<std::string>* unavailableWhy) {
  const AlgorithmHooks& h = bench_.algorithms;
  std::vector<int32_t> mine(names.size()), all(names.size() * ctx_.ranks);
  std::vector<Status> why(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    why[i] = h.select(*comm_, names[i]);
    mine[i] = why[i].isOk() ? 1 : 0;
  }
  BRAID_RETURN_IF_ERROR(h.select(*comm_, ""));
  if (!names.empty()) {
    BRAID_RETURN_IF_ERROR(comm_->allGather(mine.data(), all.data(), names.size(), DataType::kInt32)
                              .withContext("agreeing on the available algorithms"));
  }
  unavailableWhy->assign(names.size(), "");
  for (size_t i = 0; i < names.size(); ++i) {
    bool ok = true;
    for (int r = 0; r < ctx_.ranks; ++r) ok = ok && all[r * names.size() + i] == 1;
    if (ok) {
      available_.push_back(names[i]);
    } else {
      (*unavailableWhy)[i] = why[i].isOk() ? "unavailable on another rank" : why[i].message();
    }
  }
  return Status::ok();
}

Status RankRunner::resolveAlgorithms() {
  const AlgorithmHooks& h = bench_.algorithms;
  std::vector<std::string> requested;
  std::stringstream ss(o_.algo);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) requested.push_back(item);
  }
  if (requested.empty()) requested.push_back("auto");
  if (!(h.candidates && h.select && h.chosen)) {
    for (const std::string& a : requested) {
      if (a != "auto" && a != "all") {
        return invalidArgument(std::string(bench_.name) + " has a single algorithm; -a " + a);
      }
    }
    algos_ = {"auto"};
    return Status::ok();
  }
  const std::vector<std::string> names = h.candidates(*comm_);
  std::vector<std::string> unavailableWhy;
  BRAID_RETURN_IF_ERROR(agreeOnAvailable(names, &unavailableWhy));
  for (const std::string& a : requested) {
    if (a == "all") {
      algos_.insert(algos_.end(), available_.begin(), available_.end());
      algos_.push_back("auto");
      continue;
    }
    auto it = std::find(names.begin(), names.end(), a);
    if (a != "auto" && it == names.end()) {
      // Not a canonical name: an alias, or an error listing the names (from the library).
      BRAID_RETURN_IF_ERROR(h.select(*comm_, a));
      BRAID_RETURN_IF_ERROR(h.select(*comm_, ""));
    } else if (a != "auto" &&
               std::find(available_.begin(), available_.end(), a) == available_.end()) {
      return invalidArgument("algorithm " + a + " is not available: " +
                             unavailableWhy[static_cast<size_t>(it - names.begin())]);
    }
    algos_.push_back(a);
  }
  return Status::ok();
}

Status RankRunner::allocateBuffers(size_t maxBytes) {
  // Allocated once at the largest size and touched before any timing.
  if (o_.localRegister == 1) {
    for (AlignedBuffer* b : {&send_, &recv_}) {
      BRAID_ASSIGN_OR_RETURN(b->ptr, comm_->allocShared(maxBytes));
      b->shared = true;
    }
  } else if (posix_memalign(&send_.ptr, kBufferAlignment, maxBytes) != 0 ||
             posix_memalign(&recv_.ptr, kBufferAlignment, maxBytes) != 0) {
    return systemError("out of memory allocating 2 x " + std::to_string(maxBytes) + " bytes");
  }
  poison(send_.ptr, maxBytes);
  poison(recv_.ptr, maxBytes);
  if (bench_.ceilingWork == nullptr) return Status::ok();
  BRAID_ASSIGN_OR_RETURN(ceiling_, CeilingProbe::create(comm_.get(), maxBytes, &ceilingWhy_));
  return Status::ok();
}

RunSetup RankRunner::describe() const {
  RunSetup s;
  s.bench = &bench_;
  s.options = &o_;
  s.ranks = ctx_.ranks;
  s.hosts = comm_->numHosts();
  s.localRanks = comm_->localSize();
  s.launch = launchDescription();
  s.available = available_;
  s.running = algos_;
  if (bench_.algorithms.predictedUs != nullptr) s.model = comm_->selectorModel();
  s.ceiling = ceiling_ != nullptr;
  s.noCeiling = ceilingWhy_;
  if (o_.check <= 0) {
    s.checkText = "off (-c 0); #wrong shows N/A";
  } else {
    s.checkText = pattern_.limitation().empty() ? "bit-exact against a small-integer pattern"
                                                : pattern_.limitation();
  }
  return s;
}

Status RankRunner::measure(size_t count, bool inPlace, Measurement* m) {
  void* recv = recv_.ptr;
  void* send = inPlace ? recv_.ptr : send_.ptr;
  bench_.initBuffers(ctx_, send, recv, count, inPlace);
  for (int i = 0; i < o_.warmup; ++i) {
    BRAID_RETURN_IF_ERROR(bench_.run(ctx_, send, recv, count, inPlace).withContext("warm-up"));
  }
  BRAID_RETURN_IF_ERROR(comm_->barrier().withContext("barrier before timing"));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o_.iters; ++i) {
    BRAID_RETURN_IF_ERROR(bench_.run(ctx_, send, recv, count, inPlace));
  }
  const auto t1 = std::chrono::steady_clock::now();
  const double localUs = std::chrono::duration<double, std::micro>(t1 - t0).count() / o_.iters;
  size_t wrong = 0;
  for (int i = 0; i < o_.check; ++i) {
    bench_.initBuffers(ctx_, send, recv, count, inPlace);
    BRAID_RETURN_IF_ERROR(bench_.run(ctx_, send, recv, count, inPlace).withContext("checked call"));
    wrong += bench_.check(ctx_, recv, count, inPlace);
  }
  // The summary travels by all-gather so that it does not depend on the collective under test.
  double mine[2] = {localUs, static_cast<double>(wrong)};
  std::vector<double> all(2 * static_cast<size_t>(ctx_.ranks));
  BRAID_RETURN_IF_ERROR(comm_->allGather(mine, all.data(), 2, DataType::kFloat64)
                            .withContext("gathering the per-rank times"));
  m->timeUs = 0;
  m->wrong = 0;
  for (int r = 0; r < ctx_.ranks; ++r) {
    m->timeUs = std::max(m->timeUs, all[2 * r]);
    m->wrong += all[2 * r + 1];
  }
  return Status::ok();
}

// The ceiling (ceiling.h) for this size; negative when there is none (several hosts: the links
// bound the time, not memory; one rank: nothing moves; no shared segment).
Status RankRunner::probeCeiling(size_t count, double* ceilingUs) {
  *ceilingUs = -1;
  if (ceiling_ == nullptr) return Status::ok();
  return ceiling_->measure(bench_.ceilingWork(ctx_, count), o_.type, o_.root, o_.iters, o_.warmup,
                           o_.localRegister != 1, ceilingUs);
}

// Forces `algo` (or the automatic choice) and fills the row's names and prediction.
Status RankRunner::selectFor(const std::string& algo, size_t bytes, RowResult* row) {
  const AlgorithmHooks& h = bench_.algorithms;
  row->algo = row->label = row->chosen = algo;
  if (h.select) {
    BRAID_RETURN_IF_ERROR(h.select(*comm_, algo == "auto" ? "" : algo));
    if (algo == "auto") {
      row->chosen = h.chosen(*comm_, bytes);
      row->label = "auto:" + row->chosen;
    }
  }
  // auto: the selector's own prediction (with the chunk it chose), not the chosen name's default.
  row->predictedUs =
      h.predictedUs ? h.predictedUs(*comm_, algo == "auto" ? "" : row->chosen, bytes) : -1;
  return Status::ok();
}

// One size, every algorithm; a failure is reported (fail) before it is returned. With --rounds R
// the algorithms and the ceiling probe take turns R times and each row reports its median round
// (and the median ceiling), so that a machine whose speed drifts (shared or throttled cores)
// slows every algorithm and the ceiling alike instead of the one that ran during a slow spell.
Status RankRunner::measureSize(size_t count, std::vector<RowResult>* rows) {
  const size_t bytes = count * dataTypeSize(o_.type);
  rows->assign(algos_.size(), RowResult{});
  std::vector<std::vector<Measurement>> rounds[2];
  rounds[0].resize(algos_.size());
  rounds[1].resize(algos_.size());
  std::vector<double> ceilings;  // per round
  for (int round = 0; round < o_.rounds; ++round) {
    for (size_t i = 0; i < algos_.size(); ++i) {
      RowResult& row = (*rows)[i];
      row.bytes = bytes;
      row.count = count;
      Status s = selectFor(algos_[i], bytes, &row);
      if (!s.isOk()) {
        fail("selecting algorithm " + algos_[i], s);
        return s;
      }
      for (int p = 0; p < 2; ++p) {
        Measurement one;
        s = measure(count, p == 1, &one);
        if (!s.isOk()) {
          fail(std::string(bench_.name) + " of " + std::to_string(bytes) + " B " +
                   dataTypeName(o_.type) + " " + reduceOpName(o_.op) + ", algorithm " + row.label +
                   (p == 1 ? ", in-place" : ", out-of-place"),
               s);
          return s;
        }
        wrongTotal_ += one.wrong;
        rounds[p][i].push_back(one);
      }
    }
    // The ceiling in every round, right after the algorithms: a machine whose speed drifts
    // between seconds (the 2-core VMs: 2–3x) moves it with them.
    double roundCeilingUs = -1;
    if (Status s = probeCeiling(count, &roundCeilingUs); !s.isOk()) {
      fail("probing the ceiling at " + std::to_string(bytes) + " B", s);
      return s;
    }
    ceilings.push_back(roundCeilingUs);
  }
  std::sort(ceilings.begin(), ceilings.end());
  const double ceilingUs = ceilings[ceilings.size() / 2];
  for (size_t i = 0; i < algos_.size(); ++i) {
    (*rows)[i].ceilingUs = ceilingUs;
    for (int p = 0; p < 2; ++p) {
      std::vector<Measurement>& v = rounds[p][i];
      std::sort(v.begin(), v.end(),
                [](const Measurement& a, const Measurement& b) { return a.timeUs < b.timeUs; });
      (*rows)[i].timeUs[p] = v[v.size() / 2].timeUs;
      for (const Measurement& x : v) (*rows)[i].wrong[p] += x.wrong;
    }
  }
  return Status::ok();
}

int RankRunner::run() {
  if (bench_.rooted && o_.root >= ctx_.ranks) {
    if (leader())
      std::fprintf(stderr, "braid-perf: -r %d is not a rank of %d (see --help)\n", o_.root,
                   ctx_.ranks);
    return 2;
  }
  Status s = resolveAlgorithms();
  if (!s.isOk()) {
    if (leader()) std::fprintf(stderr, "braid-perf: %s\n", s.toString().c_str());
    return 2;
  }
  const std::vector<size_t> counts = sweepCounts(o_);
  const size_t es = dataTypeSize(o_.type);
  s = allocateBuffers(std::max<size_t>(counts.empty() ? 0 : counts.back() * es, es));
  if (!s.isOk()) {
    fail("allocating the buffers", s);
    return 1;
  }
  const RunSetup setup = describe();
  Report report(setup, leader());
  report.begin();
  std::vector<RowResult> rows;
  for (size_t count : counts) {
    if (!measureSize(count, &rows).isOk()) return 1;
    for (const RowResult& r : rows) report.row(r);
  }
  if (bench_.algorithms.select) (void)bench_.algorithms.select(*comm_, "");
  report.end(wrongTotal_);
  s = comm_->barrier();
  if (!s.isOk()) {
    fail("final barrier", s);
    return 1;
  }
  return wrongTotal_ == 0 ? 0 : 1;
}

}  // namespace

int benchMain(const CollectiveBench& bench, int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);  // getopt permutes argv
  Options o;
  switch (parseOptions(bench, argc, argv, &o)) {
    case ParseOutcome::kHelpShown:
      return 0;
    case ParseOutcome::kUsageError:
      return 2;
    case ParseOutcome::kRun:
      break;
  }
  if (!launchedAsRank(launchChoice())) return runLauncher(o, args);
  if (!o.transport.empty()) setenv("BRAID_TRANSPORT", o.transport.c_str(), 1);
  Result<std::unique_ptr<Communicator>> comm = Communicator::createFromEnvironment();
  if (!comm) {
    std::fprintf(stderr, "braid-perf: cannot create the communicator: %s\n",
                 comm.status().toString().c_str());
    return 1;
  }
  // A launcher whose MPI differs from the one braid was built with starts singletons that each
  // see a world of one; refuse to report those as an N-rank result.
  if (const LaunchRow* row = launchChoice().row();
      row != nullptr && row->identity.size > 0 && row->identity.size != (*comm)->size()) {
    std::fprintf(stderr,
                 "braid-perf: the launcher (%s: %s) says %d rank(s) but the communicator has %d; "
                 "was braid built against another MPI than this mpiexec's?\n",
                 row->def->name, row->identityText.c_str(), row->identity.size, (*comm)->size());
    return 1;
  }
  RankRunner runner(bench, o, std::move(comm.value()));
  return runner.run();
}

}  // namespace braid::perf
