// Per-rank timelines: BRAID_TRACE_FILE=trace-%r.json makes every communicator write Chrome /
// Perfetto trace events (the JSON object format: {"traceEvents": [...]}) when it is destroyed —
// its collectives (algorithm, bytes, sequence number), the Bucketer's buckets (from their
// gradients' readiness, the rank's arrival, to completion), and waits on a
// peer longer than kMinWaitNs (with the peer) — timed from a zero that every rank takes at the
// exit of two barriers at communicator creation, so that the ranks' files line up on one
// timeline (to within a barrier's exit skew, one message latency). `braid-trace merge` joins the
// files, `braid-trace report` prints the slowest collectives and the last rank to arrive at each.
//
// Tracing off costs one null-pointer test per collective and per wait; recording takes a lock
// and allocates (it is a diagnostic mode).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid::detail {

class Tracer {
 public:
  /// Waits on a peer shorter than this are not recorded (a trace of every poll would swamp the
  /// collectives).
  static constexpr uint64_t kMinWaitNs = 20000;
  /// Event lanes (Chrome's "tid") so that overlapping kinds do not nest wrongly.
  enum Lane : int { kCollectives = 0, kWaits = 1, kBuckets = 2 };

  /// `pattern` with %r (rank), %p (pid), %h (host) substituted is the file written at close.
  Tracer(const std::string& pattern, int rank, int size);
  ~Tracer();  ///< close()s
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// The timeline's zero: now (steady clock), taken by every rank at the same moment.
  void setZero();
  /// One complete event ("ph":"X") from startNs to endNs (nowNs() clock); `args` is the text of
  /// a JSON object's members ("\"seq\":3,\"bytes\":8") or "".
  void complete(const std::string& name, const char* category, Lane lane, uint64_t startNs,
                uint64_t endNs, const std::string& args);
  /// Writes the file (once); later events are dropped.
  Status close();
  const std::string& path() const { return path_; }

  /// The tracer of this process's most recently created tracing communicator (null when none):
  /// the Bucketer records its buckets there without a new API.
  static Tracer* active();

 private:
  struct Event {
    std::string name;
    const char* category;
    Lane lane;
    uint64_t startNs, endNs;
    std::string args;
  };
  std::string path_;
  int rank_, size_;
  uint64_t zeroNs_ = 0;
  int64_t zeroWallUs_ = 0;
  std::mutex mu_;
  std::vector<Event> events_;
  bool closed_ = false;
};

}  // namespace braid::detail
