#include "collectives/selector/calibration.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "collectives/p2p.h"
#include "collectives/shm_segment.h"
#include "core/copy.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/params.h"
#include "core/reduce.h"
#include "braid/store.h"

namespace braid::detail {
namespace {

constexpr size_t kSmallProbeBytes = 8;
constexpr size_t kMidProbeBytes = size_t{16} << 10;  // LinkCost::kMidBytes
constexpr size_t kSmallCopyProbeBytes = size_t{8} << 10;  // LinkCost::kSmallBytes
constexpr size_t kPieceCopyProbeBytes = size_t{256} << 10;  // kSegmentPieceBytes
constexpr int kSmallRounds = 24;

double nowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<uint8_t> toBytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string fromBytes(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

Status mkdirs(const std::string& dir) {
  std::string path;
  std::stringstream ss(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') path = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    path += part + "/";
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return systemError("cannot create " + path + ": " + std::strerror(errno));
    }
  }
  return Status::ok();
}

// The pair that probes a link class: {lower, higher} global ranks, or {-1, -1}.
std::pair<int, int> intraPair(const std::vector<int>& hostOf) {
  const int p = static_cast<int>(hostOf.size());
  for (int a = 0; a < p; ++a) {
    for (int b = a + 1; b < p; ++b) {
      if (hostOf[a] == hostOf[b]) return {a, b};
    }
  }
  return {-1, -1};
}

std::pair<int, int> interPair(const std::vector<int>& hostOf) {
  for (int b = 1; b < static_cast<int>(hostOf.size()); ++b) {
    if (hostOf[b] != hostOf[0]) return {0, b};
  }
  return {-1, -1};
}

Fingerprint probeFp(size_t bytes) {
  Fingerprint fp;
  fp.collective = Collective::kSend;
  fp.type = DataType::kUint8;
  fp.count = bytes;
  return fp;
}

double lowerMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// Initiator: sends `bytes`, waits for an 8-byte answer; returns the round trip in µs. The
// responder mirrors it. `echo`: the answer is as large as the message (a ping-pong).
Status exchange(P2p& net, bool initiator, int peer, uint8_t* buf, size_t bytes, bool echo,
                double* us) {
  const size_t back = echo ? bytes : kSmallProbeBytes;
  net.begin(0, probeFp(bytes));
  const double t0 = nowUs();
  if (initiator) {
    net.postSend(peer, buf, bytes);
    BRAID_RETURN_IF_ERROR(net.waitAll());
    net.begin(0, probeFp(back));
    net.postRecv(peer, buf, back);
    BRAID_RETURN_IF_ERROR(net.waitAll());
  } else {
    net.postRecv(peer, buf, bytes);
    BRAID_RETURN_IF_ERROR(net.waitAll());
    net.begin(0, probeFp(back));
    net.postSend(peer, buf, back);
    BRAID_RETURN_IF_ERROR(net.waitAll());
  }
  *us = nowUs() - t0;
  return Status::ok();
}

// The median step time of small exchanges: a step as the algorithms see it, including the
// scheduling delays of a shared or oversubscribed machine. Each round is one step as the
// algorithms run it: both sides post a receive and a send and wait for both (a symmetric
// exchange takes one one-way latency). The first half of the rounds only warms up: the first
// exchanges after connecting, or after a peer has gone to sleep, run on cold caches and paths.
Status smallStepUs(P2p& net, int peer, const uint8_t* out, double* us) {
  uint8_t in[kSmallProbeBytes];
  std::vector<double> steps;
  for (int i = 0; i < 2 * kSmallRounds; ++i) {
    net.begin(0, probeFp(kSmallProbeBytes));
    const double t0 = nowUs();
    BRAID_RETURN_IF_ERROR(net.sendRecv(peer, out, kSmallProbeBytes, peer, in, kSmallProbeBytes));
    if (i >= kSmallRounds) steps.push_back(nowUs() - t0);
  }
  std::sort(steps.begin(), steps.end());
  *us = steps[steps.size() / 10];  // the 10th percentile: see probeLink
  return Status::ok();
}

// α and β of one link between two ranks; only the initiator's numbers are meaningful. `steady`
// is false when α measured before and after the bandwidth rounds disagrees by more than 2x (and
// by more than 2 µs), or the one-way α is implausible beside it: something else was using the
// machine, and the result is not cached.
Status probeLink(P2p& net, bool initiator, int peer, size_t mid, size_t large, int reps,
                 size_t outOfCache, LinkCost* out, bool* steady) {
  std::vector<uint8_t> buf(large, 0x5a);
  double us = 0;
  double alphaBefore = 0, alphaAfter = 0;
  BRAID_RETURN_IF_ERROR(smallStepUs(net, peer, buf.data(), &alphaBefore));
  // One way: half an 8-byte ping-pong (a tree edge, where the receiver waits for the sender),
  // the 10th percentile of the later half of the rounds. Not the median: on a busy machine (a
  // build on the other core) most rounds wait for a descheduled peer, and the median read
  // 17-19 µs where a stream of 8-byte collectives ran its steps in 0.5-1 µs (measured by
  // Communicator::Impl::measureCallOverhead beside it); a stream settles in step with the
  // scheduler, as the lower rounds do.
  std::vector<double> pingPong;
  for (int i = 0; i < 2 * kSmallRounds; ++i) {
    double rtt = 0;
    BRAID_RETURN_IF_ERROR(
        exchange(net, initiator, peer, buf.data(), kSmallProbeBytes, false, &rtt));
    if (i >= kSmallRounds) pingPong.push_back(rtt);
  }
  std::sort(pingPong.begin(), pingPong.end());
  const double oneWay = std::max(0.05, pingPong[pingPong.size() / 10] / 2);
  // β: one-way transfers answered by 8 B (a tree edge), and exchanges where both sides send
  // and receive at once (a ring step), less α. Each kind runs its rounds back to back, and each
  // takes the lower median of its rounds: interleaved, a round of one kind inherits the other's
  // traffic still queued on the link (an exchange's send is complete once the kernel holds it),
  // and a shaped link (tc tbf) lets the first round after a pause run on saved-up tokens.
  std::vector<uint8_t> back(large);
  std::vector<double> one, sym;
  BRAID_RETURN_IF_ERROR(exchange(net, initiator, peer, buf.data(), mid, false, &us));
  for (int i = 0; i < reps; ++i) {
    BRAID_RETURN_IF_ERROR(exchange(net, initiator, peer, buf.data(), large, false, &us));
    one.push_back(us);
  }
  for (int i = 0; i < reps; ++i) {
    net.begin(0, probeFp(large));
    const double t0 = nowUs();
    BRAID_RETURN_IF_ERROR(net.sendRecv(peer, buf.data(), large, peer, back.data(), large));
    sym.push_back(nowUs() - t0);
  }
  const double tOne = lowerMedian(one), tSym = lowerMedian(sym);
  // Mid-sized messages, where the per-message work of the transport (its cells and flags)
  // weighs more than at the large size, and small ones, below the size from which copies into
  // shared memory stream past the cache (core/copy.h), where the receiver pulls lines dirty in
  // the sender's cache instead: 24 rounds of each kind, the later 16 counted; lower medians.
  auto sizedRounds = [&](size_t bytes, double* tOneOut, double* tSymOut) -> Status {
    std::vector<double> o, e;
    for (int i = 0; i < 24; ++i) {
      BRAID_RETURN_IF_ERROR(exchange(net, initiator, peer, buf.data(), bytes, false, &us));
      if (i >= 8) o.push_back(us);
    }
    for (int i = 0; i < 24; ++i) {
      net.begin(0, probeFp(bytes));
      const double t0 = nowUs();
      BRAID_RETURN_IF_ERROR(net.sendRecv(peer, buf.data(), bytes, peer, back.data(), bytes));
      if (i >= 8) e.push_back(nowUs() - t0);
    }
    *tOneOut = lowerMedian(o);
    *tSymOut = lowerMedian(e);
    return Status::ok();
  };
  double tOneMid = 0, tSymMid = 0, tOneSmall = 0, tSymSmall = 0;
  BRAID_RETURN_IF_ERROR(sizedRounds(kMidProbeBytes, &tOneMid, &tSymMid));
  BRAID_RETURN_IF_ERROR(sizedRounds(kSmallCopyProbeBytes, &tOneSmall, &tSymSmall));
  BRAID_RETURN_IF_ERROR(smallStepUs(net, peer, buf.data(), &alphaAfter));
  const double faster = std::min(alphaBefore, alphaAfter);
  const double slower = std::max(alphaBefore, alphaAfter);
  // Half a ping-pong cannot take much longer than an exchange step, which moves the same bytes
  // both ways at once: a one-way α 4x the step's is a peer descheduled between the rounds (868 µs
  // against 0.7 µs was seen with a build on the other core).
  *steady = (slower <= 2 * faster || slower - faster <= 2.0) &&
            oneWay <= 4 * std::max(faster, 0.25) + 2.0;
  out->alphaUs = std::max(0.05, faster);
  out->alphaOneWayUs = oneWay;
  const double dl = static_cast<double>(large);
  // A one-way round is the message one way and 8 bytes back: two one-way latencies.
  out->betaUsPerByte = std::max(tOne - 2 * oneWay, 0.5 * tOne) / dl;
  out->betaSymUsPerByte = std::max(tSym - out->alphaUs, 0.5 * tSym) / dl;
  const double dm = static_cast<double>(kMidProbeBytes);
  out->betaMidUsPerByte = std::max(tOneMid - 2 * oneWay, 0.5 * tOneMid) / dm;
  out->betaSymMidUsPerByte = std::max(tSymMid - out->alphaUs, 0.5 * tSymMid) / dm;
  const double ds = static_cast<double>(kSmallCopyProbeBytes);
  out->betaSmallUsPerByte = std::max(tOneSmall - 2 * oneWay, 0.5 * tOneSmall) / ds;
  out->betaSymSmallUsPerByte = std::max(tSymSmall - out->alphaUs, 0.5 * tSymSmall) / ds;
  if (outOfCache > 0) {
    // Exchanges from buffers that together exceed the last-level cache, cut into pipelining
    // chunks that are all posted at once, as the ring posts a large step (they fill the
    // transport's buffers, so flow control is paid too).
    const size_t n = outOfCache;
    const size_t chunk = static_cast<size_t>(std::max<int64_t>(4096, paramInt("BRAID_CHUNK_BYTES")));
    std::vector<uint8_t> pool(2 * 2 * n, 0x11);  // two send/receive pairs, the older first
    double tBig = 1e30;
    for (int i = 0; i < 2; ++i) {
      uint8_t* s = pool.data() + static_cast<size_t>(i) * 2 * n;
      net.begin(0, probeFp(std::min(n, chunk)));
      const double t0 = nowUs();
      for (size_t off = 0; off < n; off += chunk) {
        const size_t len = std::min(chunk, n - off);
        if (len != std::min(n, chunk)) net.begin(0, probeFp(len));
        net.postRecv(peer, s + n + off, len);
        net.postSend(peer, s + off, len);
      }
      BRAID_RETURN_IF_ERROR(net.waitAll());
      tBig = std::min(tBig, nowUs() - t0);
    }
    out->betaSymLargeUsPerByte =
        std::max(out->betaSymUsPerByte, (tBig - out->alphaUs) / static_cast<double>(n));
  }
  return Status::ok();
}

// Hand-offs through this host's segment, every local rank at once (as the segment algorithms
// run): empty ones for the synchronization cost, then ones that publish `bytes` into the own slot
// (streamed, as copyToShared does) and read a peer's slot back, for the copy cost per byte.
Status probeSegment(ShmSegment& seg, int rounds, size_t bytes, double* syncUs,
                    double* copyUsPerByte, double* copySmallUsPerByte, bool* streamShared,
                    double* cmaUsPerByte) {
  Fingerprint fp;
  fp.collective = Collective::kBarrier;
  fp.type = DataType::kUint8;
  bytes = std::min(bytes, seg.halfBytes());
  std::vector<uint8_t> local(bytes, 0x3c);
  const int peer = (seg.localIndex() + 1) % seg.localSize();
  // One timed round of the segment's two hand-offs: `publish(g)` before this rank arrives,
  // `consume(g)` once every rank has. The copy rounds and the single-copy rounds below share it,
  // so that their rates compare.
  auto handoffRound = [&](auto&& publish, auto&& consume, double* us) -> Status {
    const double t0 = nowUs();
    const uint64_t g = seg.nextGeneration();
    publish(g);
    seg.arrive(g, 0, fp);
    BRAID_RETURN_IF_ERROR(seg.waitArrived(g, false));
    BRAID_RETURN_IF_ERROR(consume(g));
    seg.markDone(g);
    BRAID_RETURN_IF_ERROR(seg.waitDone(g));
    *us = nowUs() - t0;
    return Status::ok();
  };
  auto round = [&](size_t n, double* us, bool stream = true) -> Status {
    return handoffRound(
        [&](uint64_t g) {
          copyToSharedAs(stream, seg.half(seg.localIndex(), static_cast<int>(g & 1)), local.data(),
                         n);
        },
        [&](uint64_t g) {
          if (n > 0) copyBytes(local.data(), seg.half(peer, static_cast<int>(g & 1)), n);
          return Status::ok();
        },
        us);
  };
  // Many rounds: ranks that enter the probe at different times first fall behind each other
  // into futex sleeps (a wake-up costs ~20 us here) and need a few dozen rounds to run in step,
  // as a stream of collectives does; a median of a dozen rounds measured the sleeps (24 us
  // instead of ~0.2 us), the median of 200 measures the rounds in step.
  std::vector<double> t(static_cast<size_t>(rounds));
  double us = 0;
  BRAID_RETURN_IF_ERROR(round(0, &us));
  for (double& x : t) BRAID_RETURN_IF_ERROR(round(0, &x));
  std::sort(t.begin(), t.end());
  // A collective's one hand-off costs about a whole probe round (measured here, 2 ranks: a round
  // 0.15 us, an 8-byte shm all-reduce 0.2 us): the round's second hand-off finds the ranks in
  // step, while a collective's also carries the call's own fixed work. The 10th percentile: with
  // more ranks than cores the rounds come in two modes, in step with the scheduler or not (4
  // ranks on 2 cores: 3.5 or 6.9 us); a stream of collectives settles in step, but a probe can
  // spend three quarters of its rounds out of step (the lower quartile read 6.9 us while
  // braid-perf's 8-byte shm all-reduce took 3.8–4.4 us).
  *syncUs = t[t.size() / 10];
  // Two untimed rounds first, one per half: the first touch of a half's pages faults each one
  // in (~2–3 us per 4 KiB here), and with one warm-up the median of three timed rounds caught
  // the other half's faults (8–12 GB/s where the collectives copy at 13–16). Then the lower
  // quartile of eight, as for the hand-off.
  // Non-temporal and plain stores alternate, round by round, at the probe's size and at 256 KiB
  // (a pipelined piece): plain ones are chosen when 10% faster at 256 KiB and no slower at the
  // probe's size, as on an Intel Xeon VM (2 MiB of L2 per core; probe 1.55x faster at 256 KiB,
  // 1.07-1.15x at 2 MiB; the shm all-reduce 1.1-2x faster at 64 KiB-16 MiB), not on the EPYC
  // VMs (streaming 3-4x faster at 64 KiB-2 MiB: shared/docs/machine-facts.md).
  auto lowerQuartile = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 4];
  };
  auto compare = [&](size_t n, int reps, double* streamUs, double* plainUs) -> Status {
    std::vector<double> s(static_cast<size_t>(reps)), p(static_cast<size_t>(reps));
    for (int warm = 0; warm < 2; ++warm) {
      BRAID_RETURN_IF_ERROR(round(n, &us, true));
      BRAID_RETURN_IF_ERROR(round(n, &us, false));
    }
    for (size_t i = 0; i < s.size(); ++i) {
      BRAID_RETURN_IF_ERROR(round(n, &s[i], true));
      BRAID_RETURN_IF_ERROR(round(n, &p[i], false));
    }
    *streamUs = lowerQuartile(s);
    *plainUs = lowerQuartile(p);
    return Status::ok();
  };
  double streamUs = 0, plainUs = 0, streamMidUs = 0, plainMidUs = 0;
  BRAID_RETURN_IF_ERROR(compare(bytes, 8, &streamUs, &plainUs));
  BRAID_RETURN_IF_ERROR(compare(std::min(bytes, kPieceCopyProbeBytes), 12, &streamMidUs,
                                &plainMidUs));
  *streamShared = !(plainUs <= streamUs && plainMidUs < 0.9 * streamMidUs);
  if (seg.localIndex() == 0) {
    BRAID_INFO("calibration: a copy through the segment, %zu KiB: non-temporal %.1f us, plain "
               "%.1f us; %zu KiB: %.1f, %.1f us; %s stores", bytes >> 10, streamUs, plainUs,
               std::min(bytes, kPieceCopyProbeBytes) >> 10, streamMidUs, plainMidUs,
               *streamShared ? "non-temporal" : "plain");
  }
  const double copyUs = *streamShared ? streamUs : plainUs;
  *copyUsPerByte = bytes > 0 ? std::max(0.0, copyUs - *syncUs) / (2.0 * bytes) : 0;
  // Below the streaming threshold a copy stays in the writer's cache, and the reader pulls the
  // dirty lines: 0.3–2 GB/s on the test VM, depending on where its two cores sit. The rounds
  // come in two modes, in step or not (a median of nine rounds read 3 and 15 GB/s in two probes
  // of the same machine): the lower quartile of 48, as a stream of collectives runs in step.
  const size_t small = std::min(kSmallCopyProbeBytes, bytes);
  std::vector<double> cs(48);
  BRAID_RETURN_IF_ERROR(round(small, &us));
  for (double& x : cs) BRAID_RETURN_IF_ERROR(round(small, &x));
  std::sort(cs.begin(), cs.end());
  *copySmallUsPerByte =
      small > 0 ? std::max(0.0, cs[cs.size() / 4] - *syncUs) / (2.0 * static_cast<double>(small))
                : 0;
  // The single copy where the kernel allows it: each rank reads its neighbour's private buffer
  // of the probe's size (process_vm_readv) in a round like the copy rounds above, all at once,
  // as the all-reduce's single copies run; two untimed rounds (the landing buffer's first
  // touch), then the lower quartile of eight.
  *cmaUsPerByte = 0;
  if (seg.singleCopy() && bytes > 0) {
    std::vector<uint8_t> landing(bytes);
    auto cmaRound = [&](double* out) -> Status {
      return handoffRound(
          [&](uint64_t g) { seg.setWindowRefs(g, reinterpret_cast<uintptr_t>(local.data()), 0); },
          [&](uint64_t g) {
            return seg.readPeer(peer, landing.data(), seg.peerRef(peer, g, true), bytes);
          },
          out);
    };
    std::vector<double> c(8);
    for (int warm = 0; warm < 2; ++warm) BRAID_RETURN_IF_ERROR(cmaRound(&us));
    for (double& x : c) BRAID_RETURN_IF_ERROR(cmaRound(&x));
    const double cmaUs = lowerQuartile(c);
    *cmaUsPerByte = std::max(0.0, cmaUs - *syncUs) / static_cast<double>(bytes);
    if (seg.localIndex() == 0) {
      BRAID_INFO("calibration: a single copy (process_vm_readv) of %zu KiB: %.1f us, %.2f GB/s; "
                 "through the segment %.2f GB/s a copy", bytes >> 10, cmaUs,
                 *cmaUsPerByte > 0 ? 1e-3 / *cmaUsPerByte : 0.0,
                 *copyUsPerByte > 0 ? 1e-3 / *copyUsPerByte : 0.0);
    }
  }
  return Status::ok();
}

}  // namespace

std::string HostView::summary() const {
  return "nics=" + nics + " cores=" + std::to_string(cores);
}

std::string fabricFingerprint(const Placement& placement, const std::string& transport,
                              const std::string& hostSummary) {
  std::vector<int> perHost(static_cast<size_t>(placement.numHosts()), 0);
  for (int h : placement.hostOf) ++perHost[h];
  // v12: the segment copy-out rate through copyBytes (v11 probes copied into a malloc'd buffer
  // with glibc's memcpy, which ran 2 KiB-512 KiB copies between buffers aligned differently at
  // 1.9 GB/s on the EPYC VM: core/copy.h); v11: the single copy's rate (cma_us_per_byte; v10
  // caches lack it, and the all-reduce would take single copies that this machine runs
  // slower); v10: the kind of stores for copies into shared memory (stream_shared), and the
  // segment copy rate with that kind; v9: one core's copy alone (v8 caches lack it), and the
  // segment copy rate without the page faults of a half's first touch (earlier caches may hold
  // a rate 1.2-1.8x too slow); v8: the small segment copy rate from the lower quartile of 48
  // rounds (v7 took the median of nine, which could catch the rounds out of step); v7: α and
  // one-way α from the 10th percentile of their rounds (v6 caches may hold a median taken on a
  // busy machine); v6: one-way α (half an 8-byte ping-pong) besides the exchange step, 8 KiB β
  // and segment copies (below the streaming threshold); v5: bandwidth rounds of one kind back to
  // back (lower median). Caches of older probes are ignored.
  std::string s = "v12 hosts=" + std::to_string(placement.numHosts()) + " per_host=";
  for (int n : perHost) s += std::to_string(n) + ",";
  s += " transport=" + transport + " segment=" + (placement.segment ? "1" : "0") + " " +
       hostSummary + " tcp_streams=" + paramString("BRAID_TCP_STREAMS");
  return s;
}

std::string cacheDirectory() {
  std::string dir = paramString("BRAID_CALIBRATION_CACHE");
  if (dir == "off" || dir == "0" || dir == "none") return "";
  if (!dir.empty()) return dir;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/braid";
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.cache/braid";
  return "";
}

std::string cachePathFor(const std::string& fingerprint) {
  const std::string dir = cacheDirectory();
  if (dir.empty()) return "";
  char name[48];
  std::snprintf(name, sizeof(name), "/fabric-%016llx.txt",
                static_cast<unsigned long long>(fnv1a64(fingerprint)));
  return dir + name;
}

std::string cachedFingerprint(const std::string& path) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("fingerprint ", 0) == 0) return line.substr(12);
  }
  return "";
}

Result<FabricModel> parseCachedModel(const std::string& text, const std::string& fingerprint,
                                     const std::string& name) {
  std::istringstream f(text);
  std::string line, fpLine, modelLine;
  while (std::getline(f, line)) {
    if (line.rfind("fingerprint ", 0) == 0) fpLine = line.substr(12);
    if (line.rfind("model ", 0) == 0) modelLine = line.substr(6);
  }
  if (fpLine != fingerprint) return invalidArgument(name + " belongs to another fabric");
  auto m = FabricModel::parse(modelLine);
  if (!m.isOk()) return m.status().withContext(name);
  m->source = "cache";
  return m;
}

const char* instrumentedRun() {
#if defined(__SANITIZE_ADDRESS__)
  return "AddressSanitizer";
#elif defined(__SANITIZE_THREAD__)
  return "ThreadSanitizer";
#else
  // valgrind preloads its own libraries into the program it runs (vgpreload_<tool>-<arch>.so).
  const char* preload = getenv("LD_PRELOAD");
  return preload != nullptr && strstr(preload, "vgpreload") != nullptr ? "valgrind" : nullptr;
#endif
}

Result<FabricModel> readCachedModel(const std::string& path, const std::string& fingerprint) {
  std::ifstream f(path);
  if (!f) return invalidArgument("no calibration cache at " + path);
  std::stringstream text;
  text << f.rdbuf();
  return parseCachedModel(text.str(), fingerprint, path);
}

Status writeCachedModel(const std::string& path, const std::string& fingerprint,
                        const FabricModel& model) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) BRAID_RETURN_IF_ERROR(mkdirs(path.substr(0, slash)));
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp);
    if (!f) return systemError("cannot write " + tmp);
    f << "# braid calibration cache: the alpha-beta-gamma model of one fabric (see "
         "docs/tuning-file.md)\n";
    f << "fingerprint " << fingerprint << "\n";
    f << "model " << model.serialize() << "\n";
    if (!f) return systemError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return systemError("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
  return Status::ok();
}

KernelRates measureKernelRates() {
  constexpr size_t kElems = 64 * 1024;  // 256 KiB per operand
  constexpr size_t kCopyBytes = 2u << 20;
  std::vector<float> a(kElems, 1.0f), b(kElems, 2.0f), out(kElems);
  std::vector<uint8_t> src(kCopyBytes, 1), dst(kCopyBytes, 0);
  const ReduceFn fn = getReduceFn(DataType::kFloat32, ReduceOp::kSum);
  double reduceUs = 1e30, copyUs = 1e30;
  for (int round = 0; round < kKernelRounds; ++round) {
    if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int i = 0; i < 3; ++i) {
      const double t0 = nowUs();
      fn(out.data(), a.data(), b.data(), kElems);
      reduceUs = std::min(reduceUs, nowUs() - t0);
    }
    for (size_t i = 0; i < 2; ++i) {
      const double t0 = nowUs();
      std::memcpy(dst.data(), src.data(), kCopyBytes);
      copyUs = std::min(copyUs, nowUs() - t0);
      src[i] = dst[kCopyBytes - 1 - i];  // the copies depend on each other
    }
  }
  return {reduceUs / (kElems * sizeof(float)), copyUs / kCopyBytes};
}

bool kernelRatesPlausible(const KernelRates& r) {
  return r.reduceUsPerByte > 0 && r.copyUsPerByte > 0 &&
         r.reduceUsPerByte <= kMaxReducePerCopy * r.copyUsPerByte;
}

Result<FabricModel> calibrateFabric(const ProbeContext& ctx, PendingCache* pending) {
  Placement placement;
  placement.hostOf = ctx.hostOf;
  placement.segment = ctx.segmentPlacement;
  const int size = placement.size();
  const std::string mode = paramString("BRAID_CALIBRATION");
  const std::string planKey = ctx.prefix + "sel/plan";

  // Read once: the default model carries it, and the probe sizes its out-of-cache rounds by it.
  const double llc = static_cast<double>(ctx.host.llcBytes);
  std::string fingerprint, cachePath;
  if (ctx.rank == 0) {
    std::string plan = "probe";
    FabricModel m;  // defaults
    m.coresPerHost = ctx.host.cores;
    if (llc > 0) m.llcBytes = llc;
    if (size <= 1 || mode == "off") {
      plan = "model " + m.serialize();
    } else if (mode == "auto") {
      fingerprint = fabricFingerprint(placement, ctx.transport, ctx.host.summary());
      cachePath = cachePathFor(fingerprint);
      if (!cachePath.empty()) {
        auto cached = ctx.forceProbe ? Result<FabricModel>(invalidArgument("re-probing"))
                                     : readCachedModel(cachePath, fingerprint);
        if (cached.isOk() && cached->copyAloneUsPerByte > 0 &&
            !kernelRatesPlausible({cached->gammaUsPerByte, cached->copyAloneUsPerByte})) {
          // Written before the probe checked its kernels (a sanitizer build's, say): no live
          // call can show it where the ranks outnumber the cores.
          BRAID_WARN("calibration: the cached model's reduction (%.3g GB/s) takes %.1fx its "
                     "copy's time per byte, more than a sound probe measures; re-probing (%s)",
                     1e-3 / cached->gammaUsPerByte,
                     cached->gammaUsPerByte / cached->copyAloneUsPerByte, cachePath.c_str());
        } else if (cached.isOk()) {
          plan = "cache " + cached->serialize();
        } else {
          BRAID_INFO("calibration: %s; probing", cached.status().message().c_str());
        }
      }
    }
    if (mode == "probe") {
      fingerprint = fabricFingerprint(placement, ctx.transport, ctx.host.summary());
      cachePath = cachePathFor(fingerprint);
    }
    BRAID_RETURN_IF_ERROR(ctx.store->set(planKey, toBytes(plan)));
  }
  BRAID_ASSIGN_OR_RETURN(auto planBytes, ctx.store->get(planKey, ctx.deadline));
  const std::string plan = fromBytes(planBytes);
  if (plan.rfind("model ", 0) == 0 || plan.rfind("cache ", 0) == 0) {
    BRAID_ASSIGN_OR_RETURN(FabricModel m, FabricModel::parse(plan.substr(6)));
    m.source = plan.rfind("cache ", 0) == 0 ? "cache" : "default";
    return m;
  }

  // Probe. Every rank goes through the same steps; most only wait for the result.
  const double t0 = nowUs();
  const auto intra = intraPair(ctx.hostOf);
  const auto inter = interPair(ctx.hostOf);
  auto runPair = [&](std::pair<int, int> pair, size_t mid, size_t large, int reps,
                     size_t outOfCache, const char* key) -> Status {
    if (ctx.rank != pair.first && ctx.rank != pair.second) return Status::ok();
    const bool initiator = ctx.rank == pair.first;
    LinkCost l;
    bool steady = true;
    BRAID_RETURN_IF_ERROR(probeLink(*ctx.p2p, initiator, initiator ? pair.second : pair.first,
                                    mid, large, reps, outOfCache, &l, &steady)
                              .withContext(std::string("calibration probe of the ") + key +
                                           " link between ranks " + std::to_string(pair.first) +
                                           " and " + std::to_string(pair.second)));
    if (initiator) {
      char buf[256];
      std::snprintf(buf, sizeof(buf), "%.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g %d", l.alphaUs,
                    l.betaUsPerByte, l.betaSymUsPerByte, l.betaSymLargeUsPerByte,
                    l.betaMidUsPerByte, l.betaSymMidUsPerByte, l.alphaOneWayUs,
                    l.betaSmallUsPerByte, l.betaSymSmallUsPerByte, steady ? 1 : 0);
      BRAID_RETURN_IF_ERROR(ctx.store->set(ctx.prefix + "sel/" + key, toBytes(buf)));
    }
    return Status::ok();
  };
  // The out-of-cache exchanges use buffers twice the last-level cache in all.
  const size_t outOfCache = static_cast<size_t>(
      std::clamp(llc > 0 ? llc / 2 : FabricModel::kDefaultLlcBytes / 2, 4.0 * (1 << 20),
                 64.0 * (1 << 20)));
  if (intra.first >= 0) {
    BRAID_RETURN_IF_ERROR(runPair(intra, 256u << 10, 2u << 20, 8, outOfCache, "intra"));
  }
  if (inter.first >= 0) BRAID_RETURN_IF_ERROR(runPair(inter, 1u << 20, 3u << 20, 4, 0, "inter"));
  double syncUs = -1, segCopy = -1, segCopySmall = -1, segCma = 0;
  bool streamShared = true;
  if (ctx.segment != nullptr) {
    // Every rank waits (asleep in the store) until the pairs are done before it enters the
    // segment's probe, where it would wait for its peers by yielding: with 8 ranks on 2 cores
    // the six yielding ranks took the cores from the pair often enough that its α changed by
    // more than 2x between the rounds every time, so no 8-rank model was ever cached.
    for (const auto& [pair, key] : {std::make_pair(intra, "intra"), std::make_pair(inter, "inter")}) {
      if (pair.first >= 0) {
        BRAID_RETURN_IF_ERROR(ctx.store->get(ctx.prefix + "sel/" + key, ctx.deadline).status());
      }
    }
    BRAID_RETURN_IF_ERROR(
        probeSegment(*ctx.segment, 200, 2u << 20, &syncUs, &segCopy, &segCopySmall, &streamShared,
                     &segCma)
            .withContext("calibration probe of the intra-host segment"));
  }

  if (ctx.rank == 0) {
    FabricModel m;
    m.source = "probe";
    m.coresPerHost = ctx.host.cores;
    if (llc > 0) m.llcBytes = llc;
    const KernelRates kernels = measureKernelRates();
    m.gammaUsPerByte = kernels.reduceUsPerByte;
    m.copyUsPerByte = kernels.copyUsPerByte;
    m.copyAloneUsPerByte = m.copyUsPerByte;
    bool steady = kernelRatesPlausible(kernels);
    if (!steady) {
      BRAID_INFO("calibration: the reduction kernel took %.3g us/byte, %.1fx the copy's %.3g on "
                 "the same core (a busy machine, or an instrumented build?)",
                 kernels.reduceUsPerByte, kernels.reduceUsPerByte / kernels.copyUsPerByte,
                 kernels.copyUsPerByte);
    }
    auto readLink = [&](const char* key, LinkCost* l) -> Status {
      BRAID_ASSIGN_OR_RETURN(auto v, ctx.store->get(ctx.prefix + "sel/" + key, ctx.deadline));
      int linkSteady = 0;
      if (std::sscanf(fromBytes(v).c_str(), "%lf %lf %lf %lf %lf %lf %lf %lf %lf %d", &l->alphaUs,
                      &l->betaUsPerByte, &l->betaSymUsPerByte, &l->betaSymLargeUsPerByte,
                      &l->betaMidUsPerByte, &l->betaSymMidUsPerByte, &l->alphaOneWayUs,
                      &l->betaSmallUsPerByte, &l->betaSymSmallUsPerByte, &linkSteady) != 10) {
        return internalError(std::string("malformed calibration record for the ") + key + " link");
      }
      if (!linkSteady) {
        steady = false;
        BRAID_INFO("calibration: the %s link's latency changed by more than 2x during the probe "
                   "(a busy machine?)", key);
      }
      return Status::ok();
    };
    if (intra.first >= 0) BRAID_RETURN_IF_ERROR(readLink("intra", &m.intra));
    if (inter.first >= 0) BRAID_RETURN_IF_ERROR(readLink("inter", &m.inter));
    if (intra.first < 0 && inter.first >= 0) m.intra = m.inter;  // no two ranks share a host
    if (inter.first < 0) m.inter = m.intra;                       // one host
    // A segment hand-off as rank 0's host measured it; without a segment, half an intra round trip.
    m.syncUs = syncUs > 0 ? syncUs : m.intra.alphaUs;
    if (segCopy > 0) m.copyUsPerByte = segCopy;  // what the segment algorithms really copy at
    if (segCopySmall > 0) m.copySmallUsPerByte = segCopySmall;
    m.streamShared = streamShared;
    m.cmaUsPerByte = segCma;
    // An unsteady probe is used by this job only: cached, it would mislead every later job. So
    // is a probe of an instrumented process, which times the machine several times slower than
    // it is (a valgrind run of braid-perf cached a model 55x too slow).
    const char* instrumented = instrumentedRun();
    // (An instrumented process is named first: its reduction kernel fails the plausibility
    // check too, and "busy" would mislead.)
    if (!cachePath.empty() && instrumented != nullptr) {
      BRAID_INFO("calibration: this process runs under %s; the probe's result is not cached (%s)",
                 instrumented, cachePath.c_str());
    } else if (!cachePath.empty() && !steady) {
      BRAID_WARN("calibration: the machine was busy during the probe; its result is not cached "
                 "(%s)", cachePath.c_str());
    } else if (!cachePath.empty() && pending != nullptr) {
      pending->path = cachePath;
      pending->fingerprint = fingerprint;
    } else if (!cachePath.empty()) {
      Status w = writeCachedModel(cachePath, fingerprint, m);
      if (!w.isOk()) BRAID_WARN("calibration cache not written: %s", w.toString().c_str());
    }
    BRAID_INFO("calibration probe took %.1f ms: %s", (nowUs() - t0) / 1000,
               m.describe().c_str());
    BRAID_RETURN_IF_ERROR(ctx.store->set(ctx.prefix + "sel/model", toBytes(m.serialize())));
  }
  BRAID_ASSIGN_OR_RETURN(auto modelBytes, ctx.store->get(ctx.prefix + "sel/model", ctx.deadline));
  BRAID_ASSIGN_OR_RETURN(FabricModel m, FabricModel::parse(fromBytes(modelBytes)));
  m.source = "probe";
  return m;
}

}  // namespace braid::detail
