// Which stores the copies into shared memory use (core/copy.h: plain ones, which leave the data
// in this core's cache, or non-temporal ones, which send it to memory), chosen while the job runs.
//
// The calibration probe measures both once and picks one (FabricModel::streamShared). On the
// 2-core EPYC VM the right pick changes under a running job: the hypervisor moves the two vCPUs
// between cores that share a last-level cache (a cache line's round trip between the cores 90-140
// ns) and cores that do not (450-530 ns), for seconds to minutes at a time. Measured there
// (2 ranks, 6 calls a run, medians; BRAID_SHM_STREAM=on against off in turns, the round trip
// timed before and after each pair): 128 MiB near 42.5 ms streamed against 30.7 plain, far 33.6
// against 48.1; 8 MiB near 2.01 against 1.41, far 1.40 against 2.80. So with
// BRAID_SHM_STREAM=auto the kind in use is held to account by the calls themselves: every
// kExploreEvery-th eligible call (one host, priced at kEligibleUs or more: the copies dominate)
// runs with the other kind, and its time over the model's price is compared with the last calls
// of its size class (a power of two) that used the kind in use; kVotesToSwitch such calls in a row
// quicker by kSwitchBelow switch the kind, process-wide. Ranks decide on their own: the kind
// changes how fast the peers read, never what they read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace braid::detail {

/// The bookkeeping behind the choice: no clock, no globals (SharedStores drives it).
class StoreKindPolicy {
 public:
  static constexpr uint64_t kExploreEvery = 16;
  static constexpr int kVotesToSwitch = 2;
  static constexpr double kSwitchBelow = 0.85;
  static constexpr int kSizeClasses = 48;
  static constexpr int kRecent = 3;  // record() takes the median of 1-3 of them

  struct Pick {
    bool stream = false;
    bool explore = false;
  };

  explicit StoreKindPolicy(bool stream = false) { reset(stream); }
  void reset(bool stream);
  /// The kind for the next eligible call.
  Pick next();
  /// That call took `ratio` times its price; `bytes` gives its size class.
  void record(const Pick& pick, size_t bytes, double ratio);
  /// The kind in use between explorations.
  bool stream() const { return stream_; }
  /// How many times the kind in use changed.
  uint64_t switches() const { return switches_; }

 private:
  struct Recent {
    std::array<float, kRecent> ratio{};
    uint8_t count = 0;
    uint8_t next = 0;
  };
  bool stream_ = false;
  uint64_t calls_ = 0;
  uint64_t switches_ = 0;
  int votes_ = 0;
  std::array<Recent, kSizeClasses> recent_{};  ///< the kind in use, per size class
};

/// The process-wide choice: every communicator of the process copies with the same kind (a
/// property of where the process's threads run).
class SharedStores {
 public:
  /// Calls priced under this are not timed: their hand-offs weigh as much as their copies.
  static constexpr double kEligibleUs = 200;

  /// A communicator's model (or BRAID_SHM_STREAM) says what to start from. adapt=false fixes
  /// the kind; adapt=true lets the calls choose, starting from `stream` unless they already are.
  static void configure(bool stream, bool adapt);

  /// One call's use of the choice: begin() picks the kind (and sets it when the call explores),
  /// end() records its time.
  struct Call {
    bool timed = false;
    StoreKindPolicy::Pick pick;
    size_t bytes = 0;
    double pricedUs = 0;
    uint64_t startNs = 0;
  };
  static Call begin(bool sameHost, size_t bytes, double pricedUs);
  static void end(const Call& call, bool ok);

  /// For tests and logs: the kind in use and the switches so far.
  static bool streaming();
  static uint64_t switches();
};

}  // namespace braid::detail
