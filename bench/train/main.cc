// braid-train-bench: replays a model's backward pass (gradient sizes in backward order and the
// compute between them) against the Bucketer and reports how much communication stays exposed.
//
//   braid-train-bench --ranks 2 [-p resnet50,bert-base,gpt2-small] [-m per-tensor,fixed-25m,auto]
//                     [--compute sleep|triad] [--backward-ms PROFILE=MS,...] [-n 10] [-w 2]
//                     [--scale F] [--codecs SPEC;SPEC...] [-J FILE] [--zero-copy]
//
// Compute is emulated, never run: each gradient is marked ready at its deadline t0 + (share of
// the backward time), reached by sleeping (clock_nanosleep to an absolute CLOCK_MONOTONIC
// deadline: the ideal, contention-free case) or by a memory-bound triad loop (the same deadline,
// spent streaming memory: CPU memory-bandwidth contention, not GPU SMs). Every output line says
// compute=emulated(...). Per (profile, mode), after -w warm-up steps (the first one rebuilds the
// layout; auto sizes its buckets from it), -n comm-only steps, then -n compute-only steps
// alternating with -n overlapped steps:
//   comm-only     T_comm0: every gradient marked ready at once, no compute;
//   compute-only  T_comp0: the same emulated backward without the Bucketer (no copies into
//                 buckets, no collectives): what the step costs without braid, so that copying
//                 gradients in and out counts as exposed, as a user timing the step sees it;
//   overlapped    T_step : compute and communication together.
// A step's time is the slowest rank's; each figure is the median over the -n steps.
// exposed = T_step − T_comp0, η = 1 − exposed/T_comm0 clamped to [0, 1] (shared/docs/
// compression-overlap.md §4); ω = |comm ∩ compute| / |comm| from the Bucketer's own metrics
// (rank 0, median); tail = finishStep() wait (rank 0, median); tail_floor = the last-ready
// gradient all-reduced alone at the end of each compute-only step, as its backward ends
// (nothing else in flight, outside the step's time; slowest rank, median): the exposed time no
// bucket layout can remove, since that gradient exists only when backward ends.
// exposed_per_floor = the median over the overlapped steps of (T_step − T_comp0) ÷ the floor
// taken just before that step.
//
// Modes: per-tensor = one all-reduce per gradient (a bucket per tensor, same engine);
// fixed-25m = 25 MiB buckets with a 1 MiB first bucket (DDP's defaults); auto = braid's sizing.
//
// Codecs (--codecs, ';'-separated specs as BucketerOptions::codec takes them, e.g.
// "none;powersgd:rank=4,start=0"): every mode runs once per codec, in the same run, and each line
// names its codec and the wire bytes of a step (what this rank handed to collectives; dense
// bytes when uncompressed). Compression runs on the Bucketer's engine thread; with --compute
// sleep it competes with nothing, with triad it competes for the cores like a GPU's compression
// kernels would compete for SMs (not modelled). Tensors are registered with their matrix shape
// (profile rows) so PowerSGD compresses weight matrices and sends 1-D tensors dense. The codecs'
// step counter counts communicating steps, warm-up included: give PowerSGD start=0 (or fewer
// start steps than -w) so that the comm-only and overlapped phases are all compressed.
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench/train/profiles.h"
#include "braid/bucketer.hpp"
#include "braid/comm.hpp"
#include "braid/git_revision.h"
#include "core/clock.h"
#include "core/params.h"
#include "transport/bootstrap/launchers.h"
#include "transport/bootstrap/local_launch.h"

namespace braid::bench {
namespace {

struct Options {
  int ranks = 0;
  bool fileStore = false;
  int timeoutS = 900;
  std::vector<std::string> profiles = {"resnet50", "bert-base", "gpt2-small"};
  std::vector<std::string> modes = {"per-tensor", "fixed-25m", "auto"};
  std::string compute = "sleep";
  std::map<std::string, double> backwardMs = {
      {"resnet50", 400}, {"bert-base", 800}, {"gpt2-small", 1600}};
  double defaultBackwardMs = 500;
  int steps = 10;
  int warmup = 2;
  double scale = 1;
  std::string jsonFile;
  std::vector<std::string> codecs = {""};  // "" = BRAID_CODEC
  bool zeroCopy = false;  // gradients live in the buckets (BucketerOptions::zeroCopy)
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

void usage() {
  printf(
      "usage: braid-train-bench [--ranks N] [-p PROFILES] [-m MODES] [--compute sleep|triad]\n"
      "                         [--backward-ms [PROFILE=]MS,...] [-n STEPS] [-w WARMUP]\n"
      "                         [--scale F] [--codecs SPEC;SPEC...] [-J FILE] [--file-store]\n"
      "                         [-T SECONDS] [--zero-copy]\n"
      "  --ranks N  start N local ranks (default 1) unless started as a rank by a launcher\n"
      "      (torchrun variables, srun, mpirun/mpiexec; braid-info launch shows which)\n"
      "  -p  comma list of resnet50, bert-base, gpt2-small or profile files\n"
      "      (lines 'name elements work' in backward order)\n"
      "  -m  comma list of per-tensor, fixed-25m, auto\n"
      "  --backward-ms  emulated backward time per step; defaults resnet50=400, bert-base=800,\n"
      "      gpt2-small=1600 (chosen so the profiles are compute-bound on a 2-core CPU box over\n"
      "      shm; not GPU measurements)\n"
      "  --scale F  divide every tensor's element count by F (tensor count unchanged; a matrix\n"
      "      keeps its rows and loses columns)\n"
      "  --codecs   ';'-separated codec specs, each run for every mode (default: BRAID_CODEC),\n"
      "      e.g. 'none;fp16;powersgd:rank=4,start=0'\n"
      "  -J FILE    one JSON object per profile and mode\n"
      "  --zero-copy  gradients live in bucket storage (BucketerOptions::zeroCopy, DDP's\n"
      "      gradient_as_bucket_view): no copy into the buckets or back\n"
      "BRAID_METRICS_FILE=PATH (%%r = rank) appends every step's Bucketer metrics, per bucket\n"
      "ready/start/done times included, one JSON line per step and rank.\n");
}

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--ranks")
      o->ranks = atoi(next().c_str());
    else if (a == "--file-store")
      o->fileStore = true;
    else if (a == "-T")
      o->timeoutS = atoi(next().c_str());
    else if (a == "-p" || a == "--profiles")
      o->profiles = split(next());
    else if (a == "-m" || a == "--modes")
      o->modes = split(next());
    else if (a == "--compute")
      o->compute = next();
    else if (a == "--backward-ms") {
      for (const std::string& kv : split(next())) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) {
          o->defaultBackwardMs = atof(kv.c_str());
          o->backwardMs.clear();
        } else {
          o->backwardMs[kv.substr(0, eq)] = atof(kv.c_str() + eq + 1);
        }
      }
    } else if (a == "-n")
      o->steps = std::max(1, atoi(next().c_str()));
    else if (a == "-w")
      o->warmup = std::max(1, atoi(next().c_str()));
    else if (a == "--scale")
      o->scale = std::max(1.0, atof(next().c_str()));
    else if (a == "-J")
      o->jsonFile = next();
    else if (a == "--zero-copy")
      o->zeroCopy = true;
    else if (a == "--codecs") {
      o->codecs.clear();
      const std::string list = next();
      size_t b = 0;
      while (b <= list.size()) {
        size_t e = list.find(';', b);
        if (e == std::string::npos) e = list.size();
        if (e > b) o->codecs.push_back(list.substr(b, e - b));
        b = e + 1;
      }
      if (o->codecs.empty()) o->codecs.push_back("none");
    } else if (a == "-h" || a == "--help") {
      usage();
      exit(0);
    } else {
      fprintf(stderr, "braid-train-bench: unknown argument %s (see --help)\n", a.c_str());
      return false;
    }
  }
  if (o->compute != "sleep" && o->compute != "triad") {
    fprintf(stderr, "braid-train-bench: --compute must be sleep or triad\n");
    return false;
  }
  for (const std::string& m : o->modes) {
    if (m != "per-tensor" && m != "fixed-25m" && m != "auto") {
      fprintf(stderr, "braid-train-bench: unknown mode %s\n", m.c_str());
      return false;
    }
  }
  return true;
}

// The memory-bound stand-in: a[i] = b[i] + s·c[i] over arrays larger than the last-level cache.
struct Triad {
  std::vector<double> a, b, c;
  size_t at = 0;
  Triad() : a(size_t{2} << 20, 1.0), b(size_t{2} << 20, 2.0), c(size_t{2} << 20, 0.5) {}
  void runUntil(uint64_t deadline) {
    const size_t chunk = 8192;
    while (nowNs() < deadline) {
      for (size_t i = at, e = std::min(at + chunk, a.size()); i < e; ++i) a[i] = b[i] + 1.5 * c[i];
      at = at + chunk >= a.size() ? 0 : at + chunk;
    }
  }
};

void sleepUntil(uint64_t deadline) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline / 1000000000ull);
  ts.tv_nsec = static_cast<long>(deadline % 1000000000ull);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

enum class Phase { kCompute, kComm, kStep };

struct Model {
  Profile prof;
  std::vector<int> tensorOf;  // per backward entry: tensor index or -1
  std::vector<std::vector<float>> grads;
  std::vector<size_t> rows;  // per tensor: matrix rows, 0 = 1-D
  double nsPerWork = 0;
};

struct StepOut {
  double ms = 0;
  StepMetrics m;
};

Status runStep(Bucketer& b, Model& md, Phase phase, const std::string& compute, Triad* triad,
               bool zeroCopy, std::vector<double>* lateness, StepOut* out) {
  const uint64_t t0 = nowNs();
  const bool bucketer = phase != Phase::kCompute;
  if (bucketer) BRAID_RETURN_IF_ERROR(b.beginStep());
  double cum = 0;
  for (size_t e = 0; e < md.prof.backward.size(); ++e) {
    if (phase != Phase::kComm) {
      cum += md.prof.backward[e].work * md.nsPerWork;
      const uint64_t deadline = t0 + static_cast<uint64_t>(cum);
      if (compute == "triad") {
        triad->runUntil(deadline);
      } else {
        sleepUntil(deadline);
      }
      if (lateness != nullptr) {
        const uint64_t now = nowNs();
        lateness->push_back(now > deadline ? static_cast<double>(now - deadline) * 1e-6 : 0.0);
      }
    }
    const int t = md.tensorOf[e];
    if (t >= 0 && bucketer) {
      // Zero-copy: backward wrote the gradient into its bucket (null: it is there already).
      void* grad = zeroCopy ? nullptr : md.grads[static_cast<size_t>(t)].data();
      BRAID_RETURN_IF_ERROR(b.markReady(static_cast<uint32_t>(t), grad));
    }
  }
  if (!bucketer) {
    out->ms = static_cast<double>(nowNs() - t0) * 1e-6;
    out->m = StepMetrics();
    return Status::ok();
  }
  auto m = b.finishStep();
  if (!m.isOk()) return m.status();
  out->ms = static_cast<double>(nowNs() - t0) * 1e-6;
  out->m = std::move(*m);
  return Status::ok();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

std::string machineLine() {
  utsname u{};
  uname(&u);
  std::string cpu = "unknown";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  return std::string("# machine: host=") + u.nodename + " kernel=" + u.release +
         " cpus=" + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cpu=\"" + cpu + "\"";
}

int runRank(const Options& o) {
  auto created = Communicator::createFromEnvironment();
  if (!created.isOk()) {
    fprintf(stderr, "braid-train-bench: %s\n", created.status().toString().c_str());
    return 2;
  }
  Communicator& comm = **created;
  const int rank = comm.rank(), p = comm.size();
  const std::string transport = paramString("BRAID_TRANSPORT");
  const std::string link = (transport == "tcp" || comm.numHosts() > 1) ? "tcp" : "shm";
  FILE* json = nullptr;
  if (rank == 0) {
    printf("%s\n", machineLine().c_str());
    printf("# build: braid-train-bench %s, git %s\n", BRAID_TRAIN_BUILD, BRAID_GIT_REVISION);
    printf(
        "# params: ranks=%d hosts=%d steps=%d warmup=%d compute=%s scale=%g "
        "BRAID_TRANSPORT=%s BRAID_ALGO='%s' BRAID_TIMEOUT_MS=%s\n",
        p, comm.numHosts(), o.steps, o.warmup, o.compute.c_str(), o.scale, transport.c_str(),
        paramString("BRAID_ALGO").c_str(), paramString("BRAID_TIMEOUT_MS").c_str());
    printf(
        "# exposed = step - compute; eta = 1 - exposed/comm; omega = |comm ∩ compute|/|comm| "
        "(rank 0); times in ms, medians of the slowest rank per step\n");
    if (!o.jsonFile.empty()) json = fopen(o.jsonFile.c_str(), "a");
  }
  Triad triad;
  int rc = 0;
  for (const std::string& pname : o.profiles) {
    std::string err;
    Model md;
    md.prof = loadProfile(pname, &err);
    if (md.prof.name.empty()) {
      if (rank == 0) fprintf(stderr, "braid-train-bench: %s\n", err.c_str());
      return 2;
    }
    auto bit = o.backwardMs.find(md.prof.name);
    const double backwardMs = bit != o.backwardMs.end() ? bit->second : o.defaultBackwardMs;
    md.nsPerWork = backwardMs * 1e6 / md.prof.work();
    for (const ProfileEntry& e : md.prof.backward) {
      if (e.elements == 0) {
        md.tensorOf.push_back(-1);
        continue;
      }
      md.tensorOf.push_back(static_cast<int>(md.grads.size()));
      size_t n =
          std::max<size_t>(1, static_cast<size_t>(static_cast<double>(e.elements) / o.scale));
      if (e.rows > 0) {
        const size_t cols = std::max<size_t>(
            1, static_cast<size_t>(static_cast<double>(e.elements / e.rows) / o.scale));
        n = e.rows * cols;
      }
      md.rows.push_back(e.rows);
      md.grads.emplace_back(n, 1.0f / static_cast<float>(1 + md.grads.size() % 7));
    }
    size_t bytes = 0;
    for (const auto& g : md.grads) bytes += g.size() * sizeof(float);
    int lastTensor = 0;  // the last gradient backward makes ready
    for (int t : md.tensorOf) lastTensor = t >= 0 ? t : lastTensor;
    const std::string computeLabel = "emulated(" + o.compute + ",profile=" + md.prof.name + ")";
    for (const std::string& mode : o.modes) {
      for (const std::string& codec : o.codecs) {
        const char* envCodec = getenv("BRAID_CODEC");  // what the Bucketer reads for ""
        const std::string codecLabel =
            !codec.empty() ? codec
                           : (envCodec != nullptr && envCodec[0] != '\0' ? envCodec : "none");
        BucketerOptions bo;
        // "": BRAID_METRICS_FILE, when set, gets every step's per-bucket timings.
        bo.metricsFile = "";
        bo.codec = codec;
        bo.zeroCopy = o.zeroCopy;
        if (mode == "per-tensor") {
          bo.sizing = BucketSizing::kFixed;
          bo.bucketCapBytes = 1;
          bo.firstBucketCapBytes = 1;
        } else if (mode == "fixed-25m") {
          bo.sizing = BucketSizing::kFixed;
          bo.bucketCapBytes = size_t{25} << 20;
          bo.firstBucketCapBytes = size_t{1} << 20;
        } else {
          bo.sizing = BucketSizing::kAuto;
        }
        auto cb = Bucketer::create(&comm, bo);
        Status s = cb.status();
        if (s.isOk()) {
          // Forward order (the framework's parameter order): the reverse of backward.
          std::vector<std::pair<int, std::string>> fwd;
          for (size_t e = 0; e < md.prof.backward.size(); ++e) {
            if (md.tensorOf[e] >= 0) fwd.emplace_back(md.tensorOf[e], md.prof.backward[e].name);
          }
          std::reverse(fwd.begin(), fwd.end());
          for (const auto& [t, name] : fwd) {
            if (!s.isOk()) break;
            const size_t count = md.grads[static_cast<size_t>(t)].size();
            const size_t rows = md.rows[static_cast<size_t>(t)];
            if (rows > 0) {
              s = (*cb)->registerParam(static_cast<uint32_t>(t),
                                       std::vector<size_t>{rows, count / rows}, DataType::kFloat32,
                                       name);
            } else {
              s = (*cb)->registerParam(static_cast<uint32_t>(t), count, DataType::kFloat32, name);
            }
          }
        }
        if (s.isOk()) s = (*cb)->finalize();
        std::vector<double> comp, commOnly, step, omega, tail, skew, late, tailFloor;
        StepOut so;
        for (int i = 0; i < o.warmup && s.isOk(); ++i) {
          s = runStep(**cb, md, Phase::kStep, o.compute, &triad, o.zeroCopy, nullptr, &so);
        }
        for (int i = 0; i < o.steps && s.isOk(); ++i) {
          s = runStep(**cb, md, Phase::kComm, o.compute, &triad, o.zeroCopy, nullptr, &so);
          commOnly.push_back(so.ms);
        }
        // Compute-only and overlapped steps alternate, and each compute-only step ends with the
        // tail floor: the last-ready gradient all-reduced alone as that emulated backward ends
        // (nothing else in flight, no compute running), from the state the overlapped step's
        // tail starts from, a moment apart. No bucket layout can finish a step sooner after
        // its last gradient. (Taken after all the phases instead, back to back, the floor ran
        // ~10% faster on the 2-core VM than the same all-reduce after an emulated backward, and
        // this VM's speed drifts up to 2x between minutes.)
        std::vector<float> last(md.grads[static_cast<size_t>(lastTensor)]);
        for (int i = 0; i < o.steps && s.isOk(); ++i) {
          s = runStep(**cb, md, Phase::kCompute, o.compute, &triad, o.zeroCopy, &late, &so);
          comp.push_back(so.ms);
          if (!s.isOk()) break;
          const uint64_t t0 = nowNs();
          s = comm.allReduce(last.data(), last.data(), last.size(), DataType::kFloat32,
                             ReduceOp::kSum);
          tailFloor.push_back(static_cast<double>(nowNs() - t0) * 1e-6);
          if (!s.isOk()) break;
          s = runStep(**cb, md, Phase::kStep, o.compute, &triad, o.zeroCopy, &late, &so);
          step.push_back(so.ms);
          omega.push_back(so.m.overlap);
          tail.push_back(so.m.exposedMs);
          skew.push_back(so.m.maxSkewMs);
        }
        if (s.isOk()) {
          // The slowest rank per step (the Bucketer's engine is idle between steps).
          std::vector<double> all;
          all.insert(all.end(), comp.begin(), comp.end());
          all.insert(all.end(), commOnly.begin(), commOnly.end());
          all.insert(all.end(), step.begin(), step.end());
          all.insert(all.end(), tailFloor.begin(), tailFloor.end());
          all.push_back(percentile(late, 0.99));
          s = comm.allReduce(all.data(), all.data(), all.size(), DataType::kFloat64,
                             ReduceOp::kMax);
          const size_t n = static_cast<size_t>(o.steps);
          comp.assign(all.begin(), all.begin() + static_cast<long>(n));
          commOnly.assign(all.begin() + static_cast<long>(n),
                          all.begin() + static_cast<long>(2 * n));
          step.assign(all.begin() + static_cast<long>(2 * n),
                      all.begin() + static_cast<long>(3 * n));
          tailFloor.assign(all.begin() + static_cast<long>(3 * n),
                           all.begin() + static_cast<long>(4 * n));
          late.assign(1, all.back());
        }
        if (!s.isOk()) {
          fprintf(stderr, "braid-train-bench: rank %d: profile %s mode %s codec %s: %s\n", rank,
                  md.prof.name.c_str(), mode.c_str(), codecLabel.c_str(), s.toString().c_str());
          rc = 1;
          break;
        }
        const double tStep = median(step), tComp = median(comp), tComm = median(commOnly);
        const double exposed = std::max(0.0, tStep - tComp);
        const double eta = tComm > 0 ? std::clamp(1.0 - exposed / tComm, 0.0, 1.0) : 1.0;
        const double floorMs = median(tailFloor);
        // Each overlapped step's exposed time against the floor taken just before it.
        std::vector<double> perFloor;
        for (size_t i = 0; i < step.size() && i < tailFloor.size(); ++i) {
          if (tailFloor[i] > 0) perFloor.push_back(std::max(0.0, step[i] - tComp) / tailFloor[i]);
        }
        const size_t buckets = (*cb)->bucketCount();
        if (rank == 0) {
          char line[1024];
          snprintf(line, sizeof(line),
                   "profile=%-10s mode=%-10s codec=%s grads=%s ranks=%d tensors=%zu MiB=%.1f "
                   "wire_MiB=%.2f "
                   "buckets=%zu "
                   "step_ms=%.2f compute_ms=%.2f comm_ms=%.2f exposed_ms=%.2f eta=%.3f omega=%.3f "
                   "tail_ms=%.2f tail_floor_ms=%.2f exposed_per_floor=%.2f skew_ms=%.3f "
                   "late_p99_ms=%.3f serial_speedup=%.2f compute=%s link=%s device=cpu",
                   md.prof.name.c_str(), mode.c_str(), codecLabel.c_str(),
                   o.zeroCopy ? "zero-copy" : "copy", p, md.grads.size(),
                   static_cast<double>(bytes) / (1 << 20),
                   static_cast<double>(so.m.wireBytes) / (1 << 20), buckets, tStep, tComp, tComm,
                   exposed, eta, median(omega), median(tail), floorMs, median(perFloor),
                   median(skew), late[0], tStep > 0 ? (tComp + tComm) / tStep : 0.0,
                   computeLabel.c_str(), link.c_str());
          printf("%s\n", line);
          fflush(stdout);
          if (json != nullptr) {
            fprintf(json,
                    "{\"profile\":\"%s\",\"mode\":\"%s\",\"codec\":\"%s\",\"grads\":\"%s\","
                    "\"ranks\":%d,"
                    "\"tensors\":%zu,\"bytes\":%zu,\"wire_bytes\":%llu,"
                    "\"buckets\":%zu,\"step_ms\":%.4f,\"compute_ms\":%.4f,\"comm_ms\":%.4f,"
                    "\"exposed_ms\":%.4f,\"eta\":%.4f,\"omega\":%.4f,\"tail_ms\":%.4f,"
                    "\"tail_floor_ms\":%.4f,\"exposed_per_floor\":%.4f,"
                    "\"skew_ms\":%.4f,\"late_p99_ms\":%.4f,\"backward_ms\":%.1f,\"steps\":%d,"
                    "\"compute\":\"%s\",\"link\":\"%s\",\"device\":\"cpu\"}\n",
                    md.prof.name.c_str(), mode.c_str(), codecLabel.c_str(),
                    o.zeroCopy ? "zero-copy" : "copy", p, md.grads.size(), bytes,
                    static_cast<unsigned long long>(so.m.wireBytes), buckets, tStep, tComp, tComm,
                    exposed, eta, median(omega), median(tail), floorMs, median(perFloor),
                    median(skew), late[0], backwardMs, o.steps, computeLabel.c_str(), link.c_str());
            fflush(json);
          }
        }
      }
      if (rc != 0) break;
    }
    if (rc != 0) break;
  }
  if (json != nullptr) fclose(json);
  return rc;
}

int runLauncher(const Options& o, int argc, char** argv) {
  launch::LaunchOptions lo;
  lo.ranks = o.ranks;
  lo.fileStore = o.fileStore;
  lo.timeoutMs = o.timeoutS * 1000;
  lo.argv.push_back(launch::selfExecutable());
  if (lo.argv[0].empty()) lo.argv[0] = argv[0];
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ranks") {
      ++i;
      continue;
    }
    if (a == "--file-store") continue;
    lo.argv.push_back(a);
  }
  auto r = launch::launchLocalRanks(lo);
  if (!r.isOk()) {
    fprintf(stderr, "braid-train-bench: %s\n", r.status().toString().c_str());
    return 2;
  }
  int bad = 0;
  for (size_t i = 0; i < r->exitCodes.size(); ++i) {
    if (r->exitCodes[i] != 0) {
      fprintf(stderr, "braid-train-bench: rank %zu exited with %d\n", i, r->exitCodes[i]);
      bad = 1;
    }
  }
  return bad || r->timedOut ? 1 : 0;
}

}  // namespace
}  // namespace braid::bench

int main(int argc, char** argv) {
  braid::bench::Options o;
  if (!braid::bench::parseArgs(argc, argv, &o)) return 2;
  // Started by a launcher (torchrun, srun, mpirun/mpiexec: a row of the launcher table), this is
  // one rank; otherwise it starts --ranks local ranks (one by default), as braid-perf does.
  const bool isRank = braid::launchedAsRank(braid::detectLaunch(
      braid::LaunchEnvironment::fromProcess(), braid::LaunchSettings::fromParams()));
  if (!isRank) {
    if (o.ranks <= 0) o.ranks = 1;
    return braid::bench::runLauncher(o, argc, argv);
  }
  return braid::bench::runRank(o);
}
