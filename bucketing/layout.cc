// Bucket layout and automatic bucket sizing; see layout.h for the rules.
#include "bucketing/layout.h"

#include <algorithm>
#include <deque>
#include <map>

#include "core/hash.h"

namespace braid::detail {

std::vector<int> reverseOrder(size_t n) {
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int>(n - 1 - i);
  return order;
}

BucketPlan planBuckets(const std::vector<ParamSpec>& params, const std::vector<int>& order,
                       size_t cap, size_t firstCap, bool isolateLarge) {
  struct Open {
    std::vector<int> members;
    size_t bytes = 0;
    int closedSoFar = 0;
  };
  std::map<int, Open> open;  // by dtype
  std::vector<std::pair<int, std::vector<int>>> closed;  // (position of first member, members)
  std::vector<int> pos(params.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = static_cast<int>(i);
  auto close = [&](Open& o) {
    closed.emplace_back(pos[static_cast<size_t>(o.members.front())], std::move(o.members));
    o.members.clear();
    o.bytes = 0;
    ++o.closedSoFar;
  };
  for (int idx : order) {
    Open& o = open[static_cast<int>(params[static_cast<size_t>(idx)].type)];
    const size_t bytes = params[static_cast<size_t>(idx)].bytes();
    if (isolateLarge && !o.members.empty() && bytes >= (o.closedSoFar == 0 ? firstCap : cap)) {
      close(o);
    }
    o.members.push_back(idx);
    o.bytes += bytes;
    if (o.bytes >= (o.closedSoFar == 0 ? firstCap : cap)) close(o);
  }
  for (auto& [type, o] : open) {
    (void)type;
    if (!o.members.empty()) {
      closed.emplace_back(pos[static_cast<size_t>(o.members.front())], std::move(o.members));
    }
  }
  std::sort(closed.begin(), closed.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  BucketPlan plan;
  plan.reserve(closed.size());
  for (auto& c : closed) plan.push_back(std::move(c.second));
  return plan;
}

double simulatePlan(const std::vector<ParamSpec>& params, const BucketPlan& plan,
                    const std::vector<double>& readyNs, const AlphaBeta& model) {
  // The pieces in launch order: (ready time, bytes copied back or 0 (a bucket of one gradient is
  // reduced where that gradient lies), bytes).
  struct Piece {
    double ready;
    size_t copied, bytes;
  };
  std::vector<Piece> pieces;
  for (const std::vector<int>& b : plan) {
    double ready = 0;
    size_t bytes = 0;
    for (int idx : b) {
      ready = std::max(ready, readyNs[static_cast<size_t>(idx)]);
      bytes += params[static_cast<size_t>(idx)].bytes();
    }
    const size_t piece = model.pieceBytes > 0 ? model.pieceBytes : std::max<size_t>(bytes, 1);
    size_t off = 0;
    do {
      const size_t len = std::min(piece, bytes - off);
      pieces.push_back(Piece{ready, b.size() == 1 ? 0 : len, len});
      off += len;
    } while (off < bytes);
  }
  // The engine's loop (engine.cc runStep): launch the next piece if it is ready and the window
  // has room; otherwise wait for the oldest queued piece and copy it back; otherwise wait for
  // the next piece's gradients. The communicator runs queued all-reduces one at a time.
  const size_t window = static_cast<size_t>(std::max(1, model.window));
  std::deque<std::pair<double, size_t>> queued;  // (all-reduce done, bytes copied back)
  double now = 0, commFree = 0;
  size_t next = 0;
  while (next < pieces.size() || !queued.empty()) {
    if (next < pieces.size() && pieces[next].ready <= now && queued.size() < window) {
      commFree = std::max(now, commFree) + model.commNs(pieces[next].bytes);
      queued.emplace_back(commFree, pieces[next].copied);
      ++next;
    } else if (!queued.empty()) {
      now = std::max(now, queued.front().first) + model.copyNs(queued.front().second);
      queued.pop_front();
    } else {
      now = pieces[next].ready;
    }
  }
  return now;
}

AutoChoice chooseCaps(const std::vector<ParamSpec>& params, const std::vector<int>& order,
                      const std::vector<double>& readyNs, const AlphaBeta& model) {
  AutoChoice best;
  std::vector<AutoChoice> all;
  for (size_t cap = size_t{32} << 10; cap <= (size_t{128} << 20); cap *= 2) {
    for (size_t first : {size_t{128} << 10, size_t{1} << 20, cap}) {
      for (bool isolate : {false, true}) {
        first = std::min(first, cap);
        BucketPlan plan = planBuckets(params, order, cap, first, isolate);
        AutoChoice c;
        c.cap = cap;
        c.firstCap = first;
        c.isolateLarge = isolate;
        c.buckets = plan.size();
        c.predictedNs = simulatePlan(params, plan, readyNs, model);
        all.push_back(c);
      }
    }
  }
  // Judge candidates by their tail (last completion − last gradient ready), the part of the
  // step the model says stays exposed. Among those within 2% (+ two bucket latencies) of the
  // best tail, the fewest buckets (then the larger cap, then no isolation): the model knows
  // nothing of per-message jitter, which punishes many small messages. (A 10% slack let a 94 MB
  // last bucket carry 5 MB more than it had to: a tail 2 ms longer on shm.)
  double lastReady = 0;
  for (double r : readyNs) lastReady = std::max(lastReady, r);
  double bestTail = all.front().predictedNs - lastReady;
  for (const AutoChoice& c : all) bestTail = std::min(bestTail, c.predictedNs - lastReady);
  bool have = false;
  for (const AutoChoice& c : all) {
    if (c.predictedNs - lastReady > bestTail * 1.02 + 2 * model.aNs) continue;
    if (!have || c.buckets < best.buckets || (c.buckets == best.buckets && c.cap > best.cap)) {
      best = c;
      have = true;
    }
  }
  return best;
}

std::vector<uint32_t> encodePlan(const BucketPlan& plan, size_t n) {
  std::vector<uint32_t> enc;
  enc.reserve(2 * n);
  std::vector<uint32_t> bucketOf;
  bucketOf.reserve(n);
  for (size_t k = 0; k < plan.size(); ++k) {
    for (int idx : plan[k]) {
      enc.push_back(static_cast<uint32_t>(idx));
      bucketOf.push_back(static_cast<uint32_t>(k));
    }
  }
  enc.insert(enc.end(), bucketOf.begin(), bucketOf.end());
  return enc;
}

bool decodePlan(const std::vector<uint32_t>& enc, size_t n, BucketPlan* plan) {
  if (enc.size() != 2 * n) return false;
  std::vector<bool> seen(n, false);
  plan->clear();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t idx = enc[i], k = enc[n + i];
    if (idx >= n || seen[idx]) return false;
    seen[idx] = true;
    if (k == plan->size()) {
      plan->emplace_back();
    } else if (plan->empty() || k != plan->size() - 1) {
      return false;  // bucket numbers must be 0, 0, ..., 1, 1, ... in order
    }
    plan->back().push_back(static_cast<int>(idx));
  }
  return true;
}

uint64_t hashParam(const ParamSpec& p) {
  // FNV-1a over the fields; stable across processes and builds.
  uint64_t h = kFnv64Offset;
  auto mix = [&h](const void* data, size_t len) { h = fnv1a64(data, len, h); };
  const uint64_t count = p.count;
  const int32_t type = static_cast<int32_t>(p.type);
  mix(&p.id, sizeof(p.id));
  mix(&count, sizeof(count));
  mix(&type, sizeof(type));
  mix(p.name.data(), p.name.size());
  if (p.rows != 0) {
    const uint64_t rows = p.rows;
    mix(&rows, sizeof(rows));
  }
  return h;
}

uint64_t hashBucket(const std::vector<ParamSpec>& params, const std::vector<int>& members) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ members.size();
  for (int idx : members) {
    h ^= hashParam(params[static_cast<size_t>(idx)]) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return h;
}

}  // namespace braid::detail
