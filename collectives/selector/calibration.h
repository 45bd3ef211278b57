// Calibration: the numbers of the cost model (cost_model.h), measured at communicator creation
// by a short probe, cached per fabric fingerprint, and agreed by every rank.
//
// Protocol (every rank runs it; every wait is bounded by the deadline):
//   1. Rank 0 computes the fabric fingerprint (hosts, ranks per host, transport, this host's NICs
//      and cores) and looks it up in the cache (BRAID_CALIBRATION_CACHE). It publishes a plan in
//      the store: "model <serialized>" (cache hit, or BRAID_CALIBRATION=off: the defaults) or
//      "probe".
//   2. On "probe": the first two ranks of the first host with two ranks ping-pong over their
//      intra-host link, rank 0 and the first rank of another host over the network link (8 B
//      round trips for α; two one-way transfers of different sizes, each answered by 8 B, for β
//      as the slope, which also cancels a token-bucket burst on shaped links). Every host's ranks
//      time a few hand-offs through their shared segment. The lower rank of each pair publishes
//      its numbers; rank 0 times the reduction kernel (γ) and memcpy locally, assembles the
//      model, writes the cache and publishes "model ...".
//   3. Every rank reads rank 0's model: the selection is identical everywhere.
//   4. The communicator then times 8-byte all-reduces with the selected algorithm and the
//      runner-up (measureCallOverhead); a cached model that predicts them 4x too slow, or runs
//      8x slower, is re-probed once (forceProbe, under a store prefix of its own); a fresh probe
//      that predicts them 4x too slow serves the job uncached; only a model that passes is cached.
//   5. While the job runs, its all-reduces are held against their predictions (closed-loop
//      tuning, communicator.cc): every BRAID_RETUNE_INTERVAL collectives the ranks vote, and a
//      model 4x too slow or 8x too fast is re-probed by every rank at that collective.
// The whole probe stays well under 200 ms on a 1 Gbit/s link (about 50 ms of transfers there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"
#include "collectives/selector/cost_model.h"
#include "core/clock.h"

namespace braid {
class Store;
}

namespace braid::detail {

class P2p;
class ShmSegment;

/// What the communicator knows of this host from the topology layer (the probe detects nothing
/// itself): its NICs, online cores and last-level cache.
struct HostView {
  std::string nics;   ///< "name:speedMbps," per non-loopback NIC, sorted ("" when none/unknown)
  int cores = 0;      ///< online cores
  size_t llcBytes = 0;  ///< last-level cache, 0 when unknown
  /// "nics=<nics> cores=<cores>": this host's part of the fabric fingerprint.
  std::string summary() const;
};

/// Text that identifies a fabric for the cache: hosts, ranks per host, transport, NICs, cores.
std::string fabricFingerprint(const Placement& placement, const std::string& transport,
                              const std::string& hostSummary);
/// The cache directory: BRAID_CALIBRATION_CACHE, else $XDG_CACHE_HOME/braid, else
/// $HOME/.cache/braid; "" when the cache is off.
std::string cacheDirectory();
/// The cache file for a fingerprint: cacheDirectory()/fabric-<hash>.txt; "" when the cache is off.
std::string cachePathFor(const std::string& fingerprint);
/// The fingerprint line of a cache file ("" when it has none).
std::string cachedFingerprint(const std::string& path);
/// Parses a cache file's text (`name` labels errors); kInvalidArgument when stale (another
/// fingerprint) or malformed.
Result<FabricModel> parseCachedModel(const std::string& text, const std::string& fingerprint,
                                     const std::string& name);
/// Reads a cached model; kInvalidArgument when absent, stale (another fingerprint) or malformed.
Result<FabricModel> readCachedModel(const std::string& path, const std::string& fingerprint);
/// What slows this process down several times, so that its probes are never cached: a sanitizer
/// it was built with (ASan, TSan) or valgrind running it; null for a plain run.
const char* instrumentedRun();
/// Writes atomically (temporary file + rename), creating the directory.
Status writeCachedModel(const std::string& path, const std::string& fingerprint,
                        const FabricModel& model);

/// Local kernel costs on this core, µs per byte: the float sum of two 256 KiB operands (in L2,
/// like a pipelined chunk) and a 2 MiB memcpy. Each is the best of kKernelRounds short bursts
/// taken in turns with 1 ms pauses between them (~10 ms in all), so that one descheduling cannot
/// spoil every sample, as it could when each kernel ran its 4-5 runs back to back.
struct KernelRates {
  double reduceUsPerByte = 0;
  double copyUsPerByte = 0;
};
constexpr int kKernelRounds = 8;
KernelRates measureKernelRates();
/// The reduction reads two operands from L2 and writes one; the copy streams 2 MiB. Per byte the
/// reduction took 1.1-1.4x the copy in the five sound models cached on the 2-core EPYC VM. Over
/// kMaxReducePerCopy times it, the probe is not cached (calibrateFabric): the core was taken
/// away during every burst of one kernel and not the other, or the reduction is instrumented or
/// unoptimized where libc's memcpy is not. An ASan+UBSan build measures 16x (γ 1.29 GB/s); the
/// 3-rank model this VM had cached held that very γ (10.2x its copy), from before sanitizer
/// builds were kept out of the cache by name (instrumentedRun), which a UBSan-only build is not.
constexpr double kMaxReducePerCopy = 4.0;
bool kernelRatesPlausible(const KernelRates& rates);

/// One rank's view for the probe.
struct ProbeContext {
  int rank = 0;
  std::vector<int> hostOf;
  Store* store = nullptr;
  std::string prefix;  ///< store key prefix of this communicator
  P2p* p2p = nullptr;
  ShmSegment* segment = nullptr;  ///< this host's segment, or null
  std::string transport;          ///< "auto", "shm" or "tcp"
  bool segmentPlacement = false;
  HostView host;                  ///< this host, as the communicator assembled it
  bool forceProbe = false;        ///< probe even when the cache holds this fabric (a re-probe)
  Deadline deadline = Deadline::never();
};

/// A probe's model waiting for the communicator's check against live collectives before it is
/// cached (rank 0 only; empty path: nothing to write).
struct PendingCache {
  std::string path;
  std::string fingerprint;
};

/// Runs the protocol above; returns the model every rank agrees on. With `pending`, rank 0 does
/// not write the cache after a probe but says where the model would go.
Result<FabricModel> calibrateFabric(const ProbeContext& ctx, PendingCache* pending = nullptr);

}  // namespace braid::detail
