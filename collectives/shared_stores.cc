#include "collectives/shared_stores.h"

#include <algorithm>

#include "core/clock.h"
#include "core/copy.h"
#include "core/log.h"

namespace braid::detail {

namespace {
int sizeClass(size_t bytes) {
  int c = 0;
  while (bytes > 1 && c < StoreKindPolicy::kSizeClasses - 1) {
    bytes >>= 1;
    ++c;
  }
  return c;
}

const char* kindName(bool stream) { return stream ? "non-temporal" : "plain"; }
}  // namespace

void StoreKindPolicy::reset(bool stream) {
  stream_ = stream;
  calls_ = 0;
  votes_ = 0;
  recent_ = {};
}

StoreKindPolicy::Pick StoreKindPolicy::next() {
  ++calls_;
  Pick p;
  p.explore = calls_ % kExploreEvery == 0;
  p.stream = p.explore ? !stream_ : stream_;
  return p;
}

void StoreKindPolicy::record(const Pick& pick, size_t bytes, double ratio) {
  if (!(ratio > 0)) return;
  Recent& r = recent_[static_cast<size_t>(sizeClass(bytes))];
  if (!pick.explore) {
    if (pick.stream != stream_) return;  // picked before a switch
    r.ratio[r.next] = static_cast<float>(ratio);
    r.next = static_cast<uint8_t>((r.next + 1) % kRecent);
    r.count = static_cast<uint8_t>(std::min<int>(r.count + 1, kRecent));
    return;
  }
  if (pick.stream == stream_ || r.count == 0) return;  // nothing of its size to compare with
  // The (lower) median of the latest calls of this size with the kind in use.
  const float a = r.ratio[0], b = r.ratio[1], c = r.ratio[2];
  const double typical = r.count == 1   ? a
                         : r.count == 2 ? std::min(a, b)
                                        : std::max(std::min(a, b), std::min(std::max(a, b), c));
  if (ratio < kSwitchBelow * typical) {
    if (++votes_ >= kVotesToSwitch) {
      stream_ = pick.stream;
      ++switches_;
      votes_ = 0;
      recent_ = {};
    }
  } else {
    votes_ = 0;
  }
}

namespace {
struct Global {
  std::mutex mu;
  StoreKindPolicy policy;
  bool adapt = false;
  bool configured = false;
};
Global& global() {
  static Global* g = new Global;  // never destroyed: used by threads that outlive main's statics
  return *g;
}
}  // namespace

void SharedStores::configure(bool stream, bool adapt) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!adapt || !g.adapt || !g.configured) g.policy.reset(stream);
  g.adapt = adapt;
  g.configured = true;
  setStreamToShared(g.policy.stream());
}

SharedStores::Call SharedStores::begin(bool sameHost, size_t bytes, double pricedUs) {
  Call c;
  if (!sameHost || pricedUs < kEligibleUs) return c;
  Global& g = global();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (!g.adapt) return c;
    c.pick = g.policy.next();
    if (c.pick.explore) setStreamToShared(c.pick.stream);
  }
  c.timed = true;
  c.bytes = bytes;
  c.pricedUs = pricedUs;
  c.startNs = nowNs();
  return c;
}

void SharedStores::end(const Call& c, bool ok) {
  if (!c.timed) return;
  const double ratio = static_cast<double>(nowNs() - c.startNs) / 1000.0 / c.pricedUs;
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  const bool before = g.policy.stream();
  if (ok) g.policy.record(c.pick, c.bytes, ratio);
  const bool now = g.policy.stream();
  if (now != before) {
    BRAID_INFO("shared-memory copies: %s stores from now on: with them, %d calls in a row took "
               "under %.2fx the time of the latest like-sized calls with %s stores (the last: "
               "%zu bytes, %.2fx the model's price)",
               kindName(now), StoreKindPolicy::kVotesToSwitch, StoreKindPolicy::kSwitchBelow,
               kindName(before), c.bytes, ratio);
  }
  if (c.pick.explore || now != before) setStreamToShared(now);
}

bool SharedStores::streaming() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.policy.stream();
}

uint64_t SharedStores::switches() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.policy.switches();
}

}  // namespace braid::detail
