// collectives-check: one rank of the multi-rank correctness suite. Start it with braid-run,
// mpiexec or torchrun; every rank runs the whole matrix and checks its results against an
// independent reference (check_values.h). Exits 0 only when every check on this rank passed.
//
//   collectives_check [--quick] [--allreduce-only] [--algos all|NAME,NAME,...]
// --algos all (the default): every all-reduce algorithm of the table that can run on these ranks
// (Communicator::algorithms), then auto; a list names algorithms (and auto) explicitly.
//   collectives_check --scenario kill|stall|mismatch-count|mismatch-order|shrink-kill|
//                                shrink-healthy|shrink-mismatch|shrink-silent|split-silent|
//                                subgroup-silent|wait-timeout|pieces
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "braid/comm.hpp"
#include "core/clock.h"
#include "core/params.h"
#include "tests/multirank/check_values.h"

namespace braid::test {
namespace {

struct Checker {
  Communicator* comm;
  int failures = 0;
  int checks = 0;

  void fail(const std::string& what) {
    ++failures;
    if (failures <= 20) fprintf(stderr, "rank %d: FAIL %s\n", comm->rank(), what.c_str());
  }
  bool ok(const Status& s, const std::string& what) {
    ++checks;
    if (!s.isOk()) fail(what + ": " + s.toString());
    return s.isOk();
  }
};

constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,
                               DataType::kUint32,  DataType::kInt64,   DataType::kUint64,
                               DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                               DataType::kBFloat16};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin,
                             ReduceOp::kAvg};

std::string caseName(const char* coll, const std::string& algo, DataType t, ReduceOp op,
                     size_t count, bool inplace) {
  return std::string(coll) + " algo=" + algo + " type=" + dataTypeName(t) + " op=" +
         reduceOpName(op) + " count=" + std::to_string(count) + (inplace ? " in-place" : " out-of-place");
}

// Compares count elements of buf with expected(i); reports the first few differences.
template <typename F>
void compare(Checker& c, const std::string& name, DataType t, ReduceOp op, const void* buf,
             size_t count, F expected) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = expected(i);
    double got = loadValue(t, buf, i);
    if (!closeEnough(t, op, got, want)) {
      if (wrong < 3) {
        fprintf(stderr, "rank %d: %s: element %zu = %g, expected %g\n", c.comm->rank(),
                name.c_str(), i, got, want);
      }
      ++wrong;
    }
  }
  if (wrong > 0) c.fail(name + ": " + std::to_string(wrong) + " wrong elements");
}

void checkAllReduce(Checker& c, const std::string& algo, DataType t, ReduceOp op, size_t count,
                    bool inplace, uint32_t salt, std::vector<uint8_t>& a, std::vector<uint8_t>& b) {
  const int p = c.comm->size(), r = c.comm->rank();
  const size_t es = dataTypeSize(t);
  a.resize(std::max<size_t>(count * es, 1));
  b.resize(std::max<size_t>(count * es, 1));
  for (size_t i = 0; i < count; ++i) storeValue(t, a.data(), i, testValue(t, op, r, i, salt));
  void* out = inplace ? a.data() : b.data();
  std::string name = caseName("allreduce", algo, t, op, count, inplace);
  if (!c.ok(c.comm->allReduce(a.data(), out, count, t, op), name)) return;
  compare(c, name, t, op, out, count, [&](size_t i) { return expectedReduce(t, op, p, i, salt); });
}

void runAllReduceMatrix(Checker& c, const std::vector<std::string>& algos, bool quick) {
  std::vector<uint8_t> a, b;
  const std::vector<size_t> small = {0, 1, 7, 1023};
  const size_t large = quick ? 65537 : (size_t{1} << 20) + 3;
  uint32_t salt = 1;
  int rotation = 0;
  for (const std::string& algo : algos) {
    Status s = c.comm->setAlgorithm(Collective::kAllReduce, algo);
    if (!s.isOk()) {
      if (c.comm->rank() == 0) printf("# skipping all-reduce algorithm %s: %s\n", algo.c_str(), s.message().c_str());
      continue;
    }
    for (DataType t : kTypes) {
      for (ReduceOp op : kOps) {
        for (size_t count : small) {
          for (bool inplace : {false, true}) checkAllReduce(c, algo, t, op, count, inplace, salt++, a, b);
        }
      }
    }
    // The large count: f32 sum on every algorithm, and every type × op on one algorithm each
    // (rotating), in-place and out-of-place alternating.
    checkAllReduce(c, algo, DataType::kFloat32, ReduceOp::kSum, large, false, salt++, a, b);
    int k = 0;
    for (DataType t : kTypes) {
      for (ReduceOp op : kOps) {
        if ((k++ % static_cast<int>(algos.size())) == rotation) {
          checkAllReduce(c, algo, t, op, large, (k & 1) != 0, salt++, a, b);
        }
      }
    }
    ++rotation;
  }
  (void)c.comm->setAlgorithm(Collective::kAllReduce, "auto");
}

void runOtherCollectivesWith(Checker& c, bool quick, const std::string& algo, bool rootedToo) {
  const int p = c.comm->size(), r = c.comm->rank();
  const std::vector<size_t> counts = {0, 1, 7, 1023, quick ? size_t{65537} : (size_t{1} << 20) + 3};
  std::vector<uint8_t> a, b;
  uint32_t salt = rootedToo ? 100000 : 200000;
  for (DataType t : kTypes) {
    const size_t es = dataTypeSize(t);
    for (size_t count : counts) {
      const bool big = count > 100000;
      for (ReduceOp op : kOps) {
        if (big && op != ReduceOp::kSum) continue;
        for (bool inplace : {false, true}) {
          // reduce-scatter: input p·count, output count (in place: output is block r of input).
          ++salt;
          a.assign(std::max<size_t>(count * es * p, 1), 0);
          b.assign(std::max<size_t>(count * es, 1), 0);
          for (size_t i = 0; i < count * p; ++i) storeValue(t, a.data(), i, testValue(t, op, r, i, salt));
          void* out = inplace ? a.data() + count * es * r : b.data();
          std::string name = caseName("reducescatter", algo, t, op, count, inplace);
          if (c.ok(c.comm->reduceScatter(a.data(), out, count, t, op), name)) {
            compare(c, name, t, op, out, count,
                    [&](size_t i) { return expectedReduce(t, op, p, r * count + i, salt); });
          }
          // reduce to a varying root.
          if (!rootedToo) continue;
          ++salt;
          const int root = static_cast<int>((count + salt) % p);
          a.assign(std::max<size_t>(count * es, 1), 0);
          b.assign(std::max<size_t>(count * es, 1), 0);
          for (size_t i = 0; i < count; ++i) storeValue(t, a.data(), i, testValue(t, op, r, i, salt));
          void* rout = inplace ? a.data() : b.data();
          name = caseName("reduce", c.comm->algorithmFor(Collective::kReduce, count * es), t, op,
                          count, inplace) +
                 " root=" + std::to_string(root);
          if (c.ok(c.comm->reduce(a.data(), rout, count, t, op, root), name) && r == root) {
            compare(c, name, t, op, rout, count, [&](size_t i) { return expectedReduce(t, op, p, i, salt); });
          }
        }
      }
      for (bool inplace : {false, true}) {
        const ReduceOp none = ReduceOp::kSum;
        // all-gather: block q of the output is rank q's input.
        ++salt;
        a.assign(std::max<size_t>(count * es * p, 1), 0);
        b.assign(std::max<size_t>(count * es * p, 1), 0);
        uint8_t* in = inplace ? b.data() + count * es * r : a.data();
        for (size_t i = 0; i < count; ++i) storeValue(t, in, i, testValue(t, none, r, i, salt));
        std::string name = caseName("allgather", algo, t, none, count, inplace);
        if (c.ok(c.comm->allGather(in, b.data(), count, t), name)) {
          compare(c, name, t, none, b.data(), count * p,
                  [&](size_t i) { return testValue(t, none, static_cast<int>(i / std::max<size_t>(count, 1)), i % std::max<size_t>(count, 1), salt); });
        }
        // broadcast from a varying root.
        if (!rootedToo) continue;
        ++salt;
        const int root = static_cast<int>((count + salt) % p);
        a.assign(std::max<size_t>(count * es, 1), 0);
        b.assign(std::max<size_t>(count * es, 1), 0);
        if (r == root) {
          for (size_t i = 0; i < count; ++i) storeValue(t, a.data(), i, testValue(t, none, root, i, salt));
        }
        void* bout = inplace ? a.data() : b.data();
        name = caseName("broadcast", c.comm->algorithmFor(Collective::kBroadcast, count * es), t,
                        none, count, inplace) +
               " root=" + std::to_string(root);
        if (c.ok(c.comm->broadcast(a.data(), bout, count, t, root), name)) {
          compare(c, name, t, none, bout, count, [&](size_t i) { return testValue(t, none, root, i, salt); });
        }
        // all-to-all: block j of rank q's input lands in block q of rank j's output.
        if (count > 100000 && t != DataType::kFloat32) continue;
        ++salt;
        a.assign(std::max<size_t>(count * es * p, 1), 0);
        b.assign(std::max<size_t>(count * es * p, 1), 0);
        for (size_t i = 0; i < count * p; ++i) storeValue(t, a.data(), i, testValue(t, none, r, i, salt));
        void* aout = inplace ? a.data() : b.data();
        name = caseName("alltoall", c.comm->algorithmFor(Collective::kAllToAll, count * es * p), t,
                        none, count, inplace);
        if (c.ok(c.comm->allToAll(a.data(), aout, count, t), name)) {
          compare(c, name, t, none, aout, count * p, [&](size_t i) {
            size_t q = i / std::max<size_t>(count, 1), j = i % std::max<size_t>(count, 1);
            return testValue(t, none, static_cast<int>(q), r * count + j, salt);
          });
        }
      }
    }
  }
  c.ok(c.comm->barrier(), "barrier");
  // send/recv around the ring (even ranks send first, odd ranks receive first).
  if (p > 1) {
    for (size_t count : counts) {
      ++salt;
      const DataType t = DataType::kInt32;
      a.assign(std::max<size_t>(count * 4, 1), 0);
      b.assign(std::max<size_t>(count * 4, 1), 0);
      for (size_t i = 0; i < count; ++i) storeValue(t, a.data(), i, testValue(t, ReduceOp::kSum, r, i, salt));
      const int to = (r + 1) % p, from = (r - 1 + p) % p;
      std::string name = "sendrecv count=" + std::to_string(count);
      Status s1, s2;
      if (r % 2 == 0) {
        s1 = c.comm->send(a.data(), count, t, to);
        s2 = c.comm->recv(b.data(), count, t, from);
      } else {
        s2 = c.comm->recv(b.data(), count, t, from);
        s1 = c.comm->send(a.data(), count, t, to);
      }
      if (c.ok(s1, name + " send") && c.ok(s2, name + " recv")) {
        compare(c, name, t, ReduceOp::kSum, b.data(), count,
                [&](size_t i) { return testValue(t, ReduceOp::kSum, from, i, salt); });
      }
    }
  }
}

// One point-to-point group per round: every rank sends to every other rank before it receives
// anything (as batch_isend_irecv or ncclGroupStart/End do), 4 MiB and more per message - more
// than any transport buffers, so sends posted one after the other would wait on each other -
// and two messages to each peer, whose order the group must keep. Then bad groups are rejected
// before anything is posted and leave the communicator usable.
void runP2pGroups(Checker& c) {
  const int p = c.comm->size(), r = c.comm->rank();
  if (p < 2) return;
  const DataType t = DataType::kInt32;
  for (size_t count : {size_t{0}, size_t{5}, (size_t{1} << 20) + 1}) {
    const uint32_t salt = 7000 + static_cast<uint32_t>(count);
    std::vector<std::vector<uint8_t>> out(2 * p), in(2 * p);
    std::vector<P2pOp> ops;
    for (int q = 0; q < p; ++q) {
      if (q == r) continue;
      for (int k = 0; k < 2; ++k) {  // message k to q: count + k elements
        std::vector<uint8_t>& o = out[2 * q + k];
        o.assign((count + k) * 4 + 1, 0);
        for (size_t i = 0; i < count + k; ++i) {
          storeValue(t, o.data(), i, testValue(t, ReduceOp::kSum, r, i + q, salt + k));
        }
        ops.push_back({true, o.data(), count + k, t, q});
      }
    }
    for (int q = p - 1; q >= 0; --q) {  // receives after every send, peers in the other order
      if (q == r) continue;
      for (int k = 0; k < 2; ++k) {
        in[2 * q + k].assign((count + k) * 4 + 1, 0xee);
        ops.push_back({false, in[2 * q + k].data(), count + k, t, q});
      }
    }
    const std::string name = "p2p group count=" + std::to_string(count);
    if (!c.ok(c.comm->sendRecvGroup(std::move(ops)), name)) continue;
    for (int q = 0; q < p; ++q) {
      if (q == r) continue;
      for (int k = 0; k < 2; ++k) {
        compare(c, name + " from " + std::to_string(q) + " #" + std::to_string(k), t,
                ReduceOp::kSum, in[2 * q + k].data(), count + k,
                [&](size_t i) { return testValue(t, ReduceOp::kSum, q, i + r, salt + k); });
      }
    }
  }
  std::vector<int32_t> buf(16, 1);
  auto expectInvalid = [&](std::vector<P2pOp> ops, const char* what) {
    ++c.checks;
    Status s = c.comm->sendRecvGroup(std::move(ops));
    if (s.code() != Code::kInvalidArgument) {
      c.fail(std::string("p2p group ") + what + ": expected invalid argument, got " + s.toString());
    }
  };
  const int next = (r + 1) % p;
  expectInvalid({{true, buf.data(), 16, t, next}, {true, buf.data(), 16, t, r}}, "to itself");
  expectInvalid({{false, buf.data(), 16, t, p}}, "peer out of range");
  expectInvalid({{true, nullptr, 16, t, next}}, "null buffer");
  expectInvalid({{false, buf.data(), 16, static_cast<DataType>(42), next}}, "dtype");
  ++c.checks;
  if (!c.comm->sendRecvGroup({}).isOk()) c.fail("an empty p2p group failed");
  c.ok(c.comm->barrier(), "barrier after bad p2p groups");
}

// Shared windows (allocShared): all-reduces whose buffers lie in them, at offsets, in place and
// out of place, above the small-message size and beyond one data slot, then freeShared's
// errors (a pointer that is no window, a double free).
// sharedPart (MPI_Win_shared_query) on a window whose part is base + step·rank bytes on each
// rank: every rank marks its own part's first and last byte, and byte 8 of its right
// neighbour's part through sharedPart; then every rank reads every part it can reach. A rank's
// memory is mapped here when it is this rank, or shares this host's segment (same host, more
// than one rank there, the transport not forced to tcp); otherwise kInvalidArgument.
void runSharedParts(Checker& c, uint8_t* mine, size_t base, size_t step) {
  const int p = c.comm->size(), r = c.comm->rank();
  const char* transport = getenv("BRAID_TRANSPORT");
  const bool tcp = transport != nullptr && std::string(transport) == "tcp";
  int onMyHost = 0;
  for (int q = 0; q < p; ++q) onMyHost += c.comm->hostOf(q) == c.comm->hostOf(r) ? 1 : 0;
  auto mapped = [&](int q) {
    return q == r || (!tcp && onMyHost > 1 && c.comm->hostOf(q) == c.comm->hostOf(r));
  };
  auto mark = [](int q) { return static_cast<uint8_t>(0x40 + q); };
  const size_t myBytes = base + step * static_cast<size_t>(r);
  mine[0] = mark(r);
  mine[myBytes - 1] = mark(r);
  const int right = (r + 1) % p;
  Result<SharedPart> next = c.comm->sharedPart(mine, right);
  ++c.checks;
  if (next.isOk() != mapped(right)) {
    c.fail("sharedPart(rank " + std::to_string(right) + ") on rank " + std::to_string(r) +
           ": expected " + (mapped(right) ? "its part" : "kInvalidArgument") + ", got " +
           (next.isOk() ? "a part" : next.status().toString()));
  } else if (next.isOk() && right != r) {
    static_cast<uint8_t*>(next->ptr)[8] = mark(r);
  }
  if (!c.ok(c.comm->barrier(), "barrier after writing through sharedPart")) return;
  for (int q = 0; q < p; ++q) {
    Result<SharedPart> part = c.comm->sharedPart(mine, q);
    const std::string what = "sharedPart(rank " + std::to_string(q) + ") on rank " +
                             std::to_string(r);
    ++c.checks;
    if (!mapped(q)) {
      if (part.status().code() != Code::kInvalidArgument) {
        c.fail(what + ": expected kInvalidArgument, got " + part.status().toString());
      }
      continue;
    }
    if (!c.ok(part.status(), what)) continue;
    const auto* bytes = static_cast<const uint8_t*>(part->ptr);
    const size_t want = base + step * static_cast<size_t>(q);
    if (part->bytes != want || bytes[0] != mark(q) || bytes[want - 1] != mark(q)) {
      c.fail(what + ": " + std::to_string(part->bytes) + " bytes (want " + std::to_string(want) +
             "), first/last byte " + std::to_string(bytes[0]) + "/" +
             std::to_string(part->bytes > 0 ? bytes[part->bytes - 1] : 0) + " (want " +
             std::to_string(mark(q)) + ")");
    }
  }
  const int left = (r + p - 1) % p;
  ++c.checks;
  if (left != r && mapped(left) && mine[8] != mark(left)) {
    c.fail("byte 8 of rank " + std::to_string(r) + "'s part: " + std::to_string(mine[8]) +
           ", not what rank " + std::to_string(left) + " wrote through sharedPart");
  }
  ++c.checks;
  if (c.comm->sharedPart(mine + 64, r).status().code() != Code::kInvalidArgument ||
      c.comm->sharedPart(mine, p).status().code() != Code::kInvalidArgument) {
    c.fail("sharedPart of a non-window pointer or of rank " + std::to_string(p) +
           " did not fail with kInvalidArgument");
  }
  // Every rank has read every part before anyone clears its marks.
  c.ok(c.comm->barrier(), "barrier after sharedPart");
  mine[0] = mine[8] = mine[myBytes - 1] = 0;
}

void runSharedWindows(Checker& c, bool quick) {
  const int p = c.comm->size(), r = c.comm->rank();
  const size_t largest = quick ? 65537 : (size_t{1} << 20) + 3;  // 8-byte elements: > 4 MiB
  const size_t region = largest * 8 + 4096;
  // Sizes differ per rank; the receive region starts at an odd offset of whole elements.
  Result<void*> win = c.comm->allocShared(2 * region + 4096 * static_cast<size_t>(r));
  if (!c.ok(win.status(), "allocShared")) return;
  // Windows change only the shm rows' schedules: where every rank is on this host, force them,
  // whatever this machine's model picks (elsewhere the memory works as any other; auto runs).
  constexpr Collective kWindowed[] = {Collective::kAllReduce, Collective::kReduceScatter,
                                      Collective::kAllGather, Collective::kBroadcast};
  const bool oneHost = c.comm->numHosts() == 1 && p > 1 &&
                       c.comm->setAlgorithm(Collective::kAllReduce, "shm").isOk();
  for (Collective k : kWindowed) {
    if (oneHost) c.ok(c.comm->setAlgorithm(k, "shm"), "forcing the shm row");
  }
  uint8_t* base = static_cast<uint8_t*>(*win);
  ++c.checks;
  if (base[0] != 0 || base[2 * region - 1] != 0) c.fail("allocShared memory is not zeroed");
  runSharedParts(c, base, 2 * region, 4096);
  struct Case {
    DataType t;
    ReduceOp op;
  };
  const Case cases[] = {{DataType::kFloat32, ReduceOp::kSum},
                        {DataType::kInt32, ReduceOp::kMax},
                        {DataType::kBFloat16, ReduceOp::kAvg},
                        {DataType::kFloat64, ReduceOp::kProd}};
  uint32_t salt = 9100;
  for (size_t count : {size_t{4097}, size_t{65537}, largest}) {
    for (const Case& k : cases) {
      for (bool inplace : {false, true}) {
        uint8_t* in = base + 64;
        uint8_t* out = inplace ? in : base + region + 8 * 3;
        for (size_t i = 0; i < count; ++i) {
          storeValue(k.t, in, i, testValue(k.t, k.op, r, i, salt));
        }
        const std::string name =
            caseName("allreduce in shared windows", "auto", k.t, k.op, count, inplace);
        if (c.ok(c.comm->allReduce(in, out, count, k.t, k.op), name)) {
          compare(c, name, k.t, k.op, out, count,
                  [&](size_t i) { return expectedReduce(k.t, k.op, p, i, salt); });
        }
        ++salt;
      }
    }
  }
  // Reduce-scatter, all-gather and broadcast in the same window: blocks of 4097 elements and of
  // `largest` (beyond a half slot for reduce-scatter), in place and out of place.
  for (size_t block : {size_t{4097}, largest / static_cast<size_t>(p) + 1}) {
    const DataType t = DataType::kFloat32;
    const size_t total = block * static_cast<size_t>(p);
    if ((total + block) * 4 + 64 > 2 * region) continue;
    for (bool inplace : {false, true}) {
      uint8_t* in = base + 64;
      const size_t mine = static_cast<size_t>(r) * block * 4;
      // Reduce-scatter: the whole vector in, this rank's block out.
      for (size_t i = 0; i < total; ++i)
        storeValue(t, in, i, testValue(t, ReduceOp::kSum, r, i, salt));
      uint8_t* rsOut = inplace ? in + mine : base + 2 * region - block * 4;
      std::string name =
          caseName("reducescatter in shared windows", "auto", t, ReduceOp::kSum, block, inplace);
      if (c.ok(c.comm->reduceScatter(in, rsOut, block, t, ReduceOp::kSum), name)) {
        compare(c, name, t, ReduceOp::kSum, rsOut, block, [&](size_t i) {
          return expectedReduce(t, ReduceOp::kSum, p, static_cast<size_t>(r) * block + i, salt);
        });
      }
      ++salt;
      // All-gather: this rank's block in, every block out.
      uint8_t* agOut = in;
      uint8_t* agIn = inplace ? agOut + mine : base + 2 * region - block * 4;
      for (size_t i = 0; i < block; ++i)
        storeValue(t, agIn, i, testValue(t, ReduceOp::kSum, r, i, salt));
      name = caseName("allgather in shared windows", "auto", t, ReduceOp::kSum, block, inplace);
      if (c.ok(c.comm->allGather(agIn, agOut, block, t), name)) {
        compare(c, name, t, ReduceOp::kSum, agOut, total, [&](size_t i) {
          return testValue(t, ReduceOp::kSum, static_cast<int>(i / block), i % block, salt);
        });
      }
      ++salt;
      // Broadcast from the last rank: the message is `total` elements.
      const int root = p - 1;
      uint8_t* bcIn = base + 64;
      uint8_t* bcOut = inplace ? bcIn : base + region + 8 * 3;
      for (size_t i = 0; i < total; ++i) {
        storeValue(t, bcIn, i, r == root ? testValue(t, ReduceOp::kSum, root, i, salt) : -1.0);
      }
      name = caseName("broadcast in shared windows", "auto", t, ReduceOp::kSum, total, inplace);
      if (c.ok(c.comm->broadcast(bcIn, bcOut, total, t, root), name)) {
        compare(c, name, t, ReduceOp::kSum, bcOut, total,
                [&](size_t i) { return testValue(t, ReduceOp::kSum, root, i, salt); });
      }
      ++salt;
    }
  }
  // Asynchronous all-reduces in windows, two in flight on the progress thread (the windowed
  // schedule there), in place in the two halves of the window.
  {
    const DataType t = DataType::kFloat32;
    const size_t count = (region / 4 - 64) / 2;
    float* half[2] = {reinterpret_cast<float*>(base + 64),
                      reinterpret_cast<float*>(base + 64) + count};
    std::shared_ptr<Work> works[2];
    for (int k = 0; k < 2; ++k) {
      for (size_t i = 0; i < count; ++i) {
        storeValue(t, half[k], i, testValue(t, ReduceOp::kSum, r, i, salt + k));
      }
      auto w = c.comm->allReduceAsync(half[k], half[k], count, t, ReduceOp::kSum);
      if (!c.ok(w.status(), "allReduceAsync in a shared window")) return;
      works[k] = *w;
    }
    for (int k = 0; k < 2; ++k) {
      const std::string name = "async allreduce in a shared window #" + std::to_string(k);
      if (!c.ok(works[k]->wait(), name)) continue;
      compare(c, name, t, ReduceOp::kSum, half[k], count,
              [&](size_t i) { return expectedReduce(t, ReduceOp::kSum, p, i, salt + k); });
    }
    salt += 2;
  }
  // freeShared is local: rank 0 frees a pointer that is no window (kInvalidArgument), and
  // nothing changes for anyone.
  if (r == 0) {
    Status bad = c.comm->freeShared(base + 64);
    ++c.checks;
    if (bad.code() != Code::kInvalidArgument)
      c.fail("freeShared of a non-window: " + bad.toString());
  }
  c.ok(c.comm->allReduce(base + 64, base + region, 4097, DataType::kFloat32, ReduceOp::kSum),
       "allreduce in a window after a failed freeShared");
  c.ok(c.comm->freeShared(base), "freeShared");
  Status twice = c.comm->freeShared(base);
  ++c.checks;
  if (twice.code() != Code::kInvalidArgument) c.fail("double freeShared: got " + twice.toString());
  for (Collective k : kWindowed) c.ok(c.comm->setAlgorithm(k, "auto"), "back to auto");
  c.ok(c.comm->barrier(), "barrier after shared windows");
}

// Reduce-scatter and all-gather once per algorithm of the table that can run on these ranks
// (hierarchical across hosts that hold as many ranks each); reduce and broadcast once.
// Every reduce-scatter algorithm that can run here, with the all-gather of the same name; the
// broadcast and reduce with the first of them (the broadcast forced to its first row, the tree)
// and with every name the broadcast also has (its shm row with theirs).
void runOtherCollectives(Checker& c, bool quick) {
  const std::vector<std::string> algos = c.comm->algorithms(Collective::kReduceScatter);
  const std::vector<std::string> bcast = c.comm->algorithms(Collective::kBroadcast);
  for (size_t i = 0; i < algos.size(); ++i) {
    const bool sameBroadcast = std::find(bcast.begin(), bcast.end(), algos[i]) != bcast.end();
    const std::string b = sameBroadcast ? algos[i] : bcast.front();
    if (!c.ok(c.comm->setAlgorithm(Collective::kReduceScatter, algos[i]),
              "force reducescatter " + algos[i]) ||
        !c.ok(c.comm->setAlgorithm(Collective::kAllGather, algos[i]),
              "force allgather " + algos[i]) ||
        !c.ok(c.comm->setAlgorithm(Collective::kBroadcast, b), "force broadcast " + b)) {
      continue;
    }
    runOtherCollectivesWith(c, quick, algos[i], i == 0 || sameBroadcast);
  }
  for (Collective k : {Collective::kReduceScatter, Collective::kAllGather, Collective::kBroadcast}) {
    (void)c.comm->setAlgorithm(k, "auto");
  }
}

// Several asynchronous all-reduces in flight, completed in order.
void runAsync(Checker& c) {
  const int p = c.comm->size(), r = c.comm->rank();
  const DataType t = DataType::kFloat32;
  const size_t count = 100003;
  std::vector<std::vector<uint8_t>> bufs(6, std::vector<uint8_t>(count * 4));
  std::vector<std::shared_ptr<Work>> works;
  for (size_t k = 0; k < bufs.size(); ++k) {
    for (size_t i = 0; i < count; ++i) storeValue(t, bufs[k].data(), i, testValue(t, ReduceOp::kSum, r, i, 7000 + k));
    auto w = c.comm->allReduceAsync(bufs[k].data(), bufs[k].data(), count, t, ReduceOp::kSum);
    if (!c.ok(w.status(), "allReduceAsync")) return;
    works.push_back(*w);
  }
  // A blocking collective issued after them runs after them.
  c.ok(c.comm->barrier(), "barrier after async");
  for (size_t k = 0; k < works.size(); ++k) {
    if (!c.ok(works[k]->wait(), "async allreduce wait")) continue;
    if (!works[k]->test()) c.fail("Work::test() false after wait()");
    compare(c, "async allreduce #" + std::to_string(k), t, ReduceOp::kSum, bufs[k].data(), count,
            [&](size_t i) { return expectedReduce(t, ReduceOp::kSum, p, i, 7000 + k); });
  }
  // With nothing queued, a blocking call runs on this thread (not through the worker); then one
  // queued behind a fresh asynchronous call, and a rank that issues its blocking call late: each
  // result must be this call's, in issue order on every rank.
  for (int round = 0; round < 3; ++round) {
    const uint32_t salt = 7100 + 10 * round;
    for (size_t i = 0; i < count; ++i) {
      storeValue(t, bufs[0].data(), i, testValue(t, ReduceOp::kSum, r, i, salt));
      storeValue(t, bufs[1].data(), i, testValue(t, ReduceOp::kSum, r, i, salt + 1));
    }
    if (round == 2 && r == p - 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!c.ok(c.comm->allReduce(bufs[0].data(), bufs[0].data(), count, t, ReduceOp::kSum),
              "blocking allreduce with nothing queued")) {
      return;
    }
    auto w = c.comm->allReduceAsync(bufs[1].data(), bufs[1].data(), count, t, ReduceOp::kSum);
    if (!c.ok(w.status(), "allReduceAsync")) return;
    if (!c.ok(c.comm->allReduce(bufs[2].data(), bufs[2].data(), 1, t, ReduceOp::kSum),
              "blocking allreduce behind an async one")) {
      return;
    }
    if (!c.ok((*w)->wait(), "async allreduce wait")) return;
    for (int k = 0; k < 2; ++k) {
      compare(c, "allreduce mixed round " + std::to_string(round) + " #" + std::to_string(k), t,
              ReduceOp::kSum, bufs[static_cast<size_t>(k)].data(), count,
              [&](size_t i) { return expectedReduce(t, ReduceOp::kSum, p, i, salt + k); });
    }
  }
}

// Whether the file store (BRAID_FILE_STORE, one file per key, '.' encoded as %2E) still holds a
// key whose name contains `part`; fails the check and says which.
void expectNoStoreKey(Checker& c, const std::string& part, const char* what) {
  const char* dir = std::getenv("BRAID_FILE_STORE");
  if (dir == nullptr || c.comm->rank() != 0) return;
  ++c.checks;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(part) != std::string::npos) {
      return c.fail(std::string("a destroyed ") + what + "'s key is still in the store: " + name);
    }
  }
  if (ec) c.fail("cannot list BRAID_FILE_STORE " + std::string(dir) + ": " + ec.message());
}

// split: two interleaved halves ranked in reverse (key = -rank), rank 0 opting out; each child
// reduces its members' parent ranks, and the parent stays usable alongside its children.
void runSplit(Checker& c) {
  const int r = c.comm->rank();
  const int p = c.comm->size();
  const int color = r == 0 ? -1 : r % 2;
  auto child = c.comm->split(color, -r);
  if (!c.ok(child.status(), "split")) return;
  ++c.checks;
  if (color < 0) {
    if (*child != nullptr) c.fail("split with color -1 returned a communicator");
  } else {
    std::vector<int> members;
    for (int q = p - 1; q >= 1; --q) {
      if (q % 2 == color) members.push_back(q);
    }
    Communicator* sub = child->get();
    if (sub == nullptr) return c.fail("split returned no communicator");
    const int expectRank =
        static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
    if (sub->size() != static_cast<int>(members.size()) || sub->rank() != expectRank) {
      c.fail("split: rank " + std::to_string(sub->rank()) + " of " + std::to_string(sub->size()) +
             ", expected " + std::to_string(expectRank) + " of " + std::to_string(members.size()));
    }
    std::vector<double> v(1000, static_cast<double>(r + 1));
    if (c.ok(sub->allReduce(v.data(), v.data(), v.size(), DataType::kFloat64, ReduceOp::kSum),
             "allreduce on a split communicator")) {
      double want = 0;
      for (int q : members) want += q + 1;
      ++c.checks;
      if (v[0] != want || v[999] != want) c.fail("allreduce on a split communicator: wrong sum");
    }
  }
  child->reset();  // destroyed here: its rank 0 erases the child's keys once all have left
  std::vector<float> w(16, 1.0f);
  c.ok(c.comm->allReduce(w.data(), w.data(), w.size(), DataType::kFloat32, ReduceOp::kSum),
       "parent allreduce after split");
  ++c.checks;
  if (w[0] != static_cast<float>(p)) c.fail("parent allreduce after split: wrong sum");
  // The parent's all-reduce started after every child was destroyed, so the store holds no key
  // of a split child any more.
  expectNoStoreKey(c, "%2Es", "split child");
}

// subgroup: created by its members alone (every rank but 1, in descending order; on 2 ranks
// both, in descending order), twice over the same list (two live communicators under different
// keys), while rank 1 stays out; each reduces its members' parent ranks and its rank order is
// the list's. Bad lists fail on the caller without any communication.
void runSubgroup(Checker& c) {
  const int r = c.comm->rank();
  const int p = c.comm->size();
  auto expectCode = [&](const Status& s, Code code, const char* what) {
    ++c.checks;
    if (s.code() != code) c.fail(std::string("subgroup ") + what + ": got " + s.toString());
  };
  expectCode(c.comm->subgroup({r, r}).status(), Code::kInvalidArgument, "with a duplicate");
  expectCode(c.comm->subgroup({r, p}).status(), Code::kInvalidArgument, "outside the ranks");
  if (p > 1) {
    expectCode(c.comm->subgroup({(r + 1) % p}).status(), Code::kInvalidUsage, "without the caller");
  }
  std::vector<int> members;
  for (int q = p - 1; q >= 0; --q) {
    if (q != 1 || p <= 2) members.push_back(q);
  }
  if (std::find(members.begin(), members.end(), r) != members.end()) {
    auto first = c.comm->subgroup(members);
    auto second = c.comm->subgroup(members);
    if (!c.ok(first.status(), "subgroup") || !c.ok(second.status(), "second subgroup")) return;
    const int expectRank =
        static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
    double want = 0;
    for (int q : members) want += q + 1;
    for (Communicator* sub : {first->get(), second->get()}) {
      ++c.checks;
      if (sub->size() != static_cast<int>(members.size()) || sub->rank() != expectRank) {
        c.fail("subgroup: rank " + std::to_string(sub->rank()) + " of " +
               std::to_string(sub->size()) + ", expected " + std::to_string(expectRank) + " of " +
               std::to_string(members.size()));
      }
    }
    // Both at once: the second's all-reduce is issued before the first's completes.
    std::vector<double> a(1000, static_cast<double>(r + 1)), b(3000, 2.0 * (r + 1));
    auto wa = (*first)->allReduceAsync(a.data(), a.data(), a.size(), DataType::kFloat64,
                                       ReduceOp::kSum);
    c.ok((*second)->allReduce(b.data(), b.data(), b.size(), DataType::kFloat64, ReduceOp::kSum),
         "allreduce on the second subgroup");
    if (c.ok(wa.status(), "allreduce on the first subgroup") &&
        c.ok((*wa)->wait(), "allreduce on the first subgroup")) {
      ++c.checks;
      if (a[0] != want || a[999] != want || b[0] != 2 * want || b[2999] != 2 * want) {
        c.fail("allreduce on a subgroup: wrong sum");
      }
    }
  }
  // The parent is untouched by its subgroups (rank 1 reached here at once).
  std::vector<float> w(16, 1.0f);
  c.ok(c.comm->allReduce(w.data(), w.data(), w.size(), DataType::kFloat32, ReduceOp::kSum),
       "parent allreduce after subgroup");
  ++c.checks;
  if (w[0] != static_cast<float>(p)) c.fail("parent allreduce after subgroup: wrong sum");
  // Every subgroup was destroyed before this all-reduce started: their keys are gone.
  expectNoStoreKey(c, "%2Eg", "subgroup");
}

// Bad input is rejected with kInvalidArgument and leaves the communicator usable.
void runBadArgs(Checker& c) {
  std::vector<float> buf(16, 1.0f);
  auto expectInvalid = [&](const Status& s, const char* what) {
    ++c.checks;
    if (s.code() != Code::kInvalidArgument) c.fail(std::string(what) + ": expected invalid argument, got " + s.toString());
  };
  expectInvalid(c.comm->allReduce(nullptr, buf.data(), 16, DataType::kFloat32, ReduceOp::kSum), "null send");
  expectInvalid(c.comm->allReduce(buf.data(), buf.data() + 1, 8, DataType::kFloat32, ReduceOp::kSum), "overlap");
  expectInvalid(c.comm->allReduce(buf.data(), buf.data(), 16, static_cast<DataType>(42), ReduceOp::kSum), "dtype");
  expectInvalid(c.comm->allReduce(buf.data(), buf.data(), 16, DataType::kFloat32, static_cast<ReduceOp>(9)), "op");
  expectInvalid(c.comm->broadcast(buf.data(), buf.data(), 16, DataType::kFloat32, c.comm->size()), "root");
  expectInvalid(c.comm->allReduce(buf.data(), buf.data(), size_t{1} << 62, DataType::kFloat32, ReduceOp::kSum), "oversized");
  expectInvalid(c.comm->setAlgorithm(Collective::kAllReduce, "bogus"), "algorithm name");
  // Still usable.
  c.ok(c.comm->allReduce(buf.data(), buf.data(), 16, DataType::kFloat32, ReduceOp::kSum), "allreduce after bad input");
  if (buf[0] != static_cast<float>(c.comm->size())) c.fail("allreduce after bad input gave a wrong result");
}

int finish(Checker& c, const char* what) {
  printf("rank %d: %s: %d checks, %d failures\n", c.comm->rank(), what, c.checks, c.failures);
  fflush(stdout);
  return c.failures == 0 ? 0 : 1;
}

// kill: the last rank SIGKILLs itself in the middle of large all-reduces; every other rank must
// fail with an error naming it within BRAID_TIMEOUT_MS + 2 s of the fault.
// stall: the last rank SIGSTOPs itself instead (a helper process kills it later); the others
// must time out with an error naming it within BRAID_TIMEOUT_MS + 3 s of the fault.
// The victim writes the moment of its fault (CLOCK_MONOTONIC, which every process on the host
// shares) to a file named after the launcher's pid, so that the survivors measure from the fault
// and not from the start of a collective that a loaded machine may have made slow.
std::string faultStampPath() { return "/tmp/braid-fault-stamp-" + std::to_string(getppid()); }

uint64_t readFaultStamp() {
  unsigned long long ns = 0;
  if (FILE* f = fopen(faultStampPath().c_str(), "r")) {
    if (fscanf(f, "%llu", &ns) != 1) ns = 0;
    fclose(f);
  }
  return ns;
}
// The victim's fault, 30 ms from now: SIGKILL, or SIGSTOP (and a helper process that kills it
// timeoutMs + 4 s later), after writing the fault stamp.
void armFault(bool stall, int64_t timeoutMs) {
  if (stall) {
    pid_t self = getpid();
    if (fork() == 0) {
      usleep(static_cast<useconds_t>((timeoutMs + 4000) * 1000));
      kill(self, SIGKILL);
      _exit(0);
    }
  }
  std::thread([stall] {
    usleep(30000);
    std::string tmp = faultStampPath() + ".tmp";
    if (FILE* f = fopen(tmp.c_str(), "w")) {
      fprintf(f, "%llu\n", static_cast<unsigned long long>(nowNs()));
      fclose(f);
      rename(tmp.c_str(), faultStampPath().c_str());
    }
    raise(stall ? SIGSTOP : SIGKILL);
  }).detach();
}

// Large all-reduces until one fails (the victim's fault); the error, or ok if none came.
Status allReduceUntilFailure(Communicator* comm, std::vector<float>& buf, uint64_t* start) {
  for (int iter = 0; iter < 100000; ++iter) {
    *start = nowNs();
    Status s =
        comm->allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
    if (!s.isOk()) return s;
  }
  return Status::ok();
}

int scenarioKill(Communicator* comm, bool stall) {
  const int victim = comm->size() - 1;
  const size_t count = size_t{16} << 20;  // 64 MiB of float
  std::vector<float> buf(count, 1.0f);
  if (!comm->barrier().isOk()) return 3;
  const int64_t timeoutMs = paramInt("BRAID_TIMEOUT_MS");
  // A stall is seen only after BRAID_TIMEOUT_MS without progress, and progress goes on for a
  // while after the fault (data already in socket buffers): one more second for it.
  const int64_t limitMs = timeoutMs + (stall ? 3000 : 2000);
  if (comm->rank() == victim) armFault(stall, timeoutMs);
  uint64_t start = 0;
  Status s = allReduceUntilFailure(comm, buf, &start);
  if (s.isOk()) {
    fprintf(stderr, "rank %d: FAIL no error although rank %d was killed\n", comm->rank(), victim);
    return 1;
  }
  uint64_t fault = readFaultStamp();
  double ms = static_cast<double>(nowNs() - std::max(start, fault)) / 1e6;
  std::string needle = "rank " + std::to_string(victim);
  bool named = s.message().find(needle) != std::string::npos;
  printf("rank %d: error %.0f ms after the fault (limit %lld): %s\n", comm->rank(), ms,
         static_cast<long long>(limitMs), s.toString().c_str());
  if (!named)
    fprintf(stderr, "rank %d: FAIL error does not name %s\n", comm->rank(), needle.c_str());
  if (ms > static_cast<double>(limitMs)) fprintf(stderr, "rank %d: FAIL too slow\n", comm->rank());
  // Later calls fail at once with the same error.
  Status again = comm->barrier();
  bool sticky = !again.isOk();
  if (!sticky)
    fprintf(stderr, "rank %d: FAIL communicator still usable after failure\n", comm->rank());
  return named && sticky && ms <= static_cast<double>(limitMs) ? 0 : 1;
}

// mismatch-count / mismatch-order: every rank must get kInvalidUsage, and the error must name
// two ranks' views.
// mismatch-count: an all-reduce whose count differs on rank 0. mismatch-order: the collectives
// in another order on rank 0. mismatch-big: a broadcast (then, had it passed, an all-gather)
// large enough for the single copy (process_vm_readv/writev of the others' private buffers)
// whose count differs on rank 0: the call must fail before any rank reads or writes a peer's
// buffer with the wrong size (ASan would see the overrun in this process; the peer's in its).
int scenarioMismatch(Communicator* comm, const std::string& kind) {
  const int r = comm->rank();
  const size_t big = 200000;  // 800 KB messages, 800 KB all-gather blocks
  std::vector<float> buf(kind == "big" ? (big + 1) * static_cast<size_t>(comm->size()) : 4096, 1.0f);
  Status s;
  if (kind == "big") {
    const size_t count = r == 0 ? big : big + 1;
    s = comm->broadcast(buf.data(), buf.data(), count, DataType::kFloat32, 0);
    if (s.isOk()) s = comm->allGather(buf.data(), buf.data(), count, DataType::kFloat32);
  } else if (kind == "order") {
    if (r == 0) {
      s = comm->allReduce(buf.data(), buf.data(), 1000, DataType::kFloat32, ReduceOp::kSum);
      if (s.isOk()) s = comm->broadcast(buf.data(), buf.data(), 1000, DataType::kFloat32, 0);
    } else {
      s = comm->broadcast(buf.data(), buf.data(), 1000, DataType::kFloat32, 0);
      if (s.isOk()) s = comm->allReduce(buf.data(), buf.data(), 1000, DataType::kFloat32, ReduceOp::kSum);
    }
  } else {
    s = comm->allReduce(buf.data(), buf.data(), r == 0 ? 1000 : 1001, DataType::kFloat32, ReduceOp::kSum);
  }
  printf("rank %d: %s\n", r, s.toString().c_str());
  if (s.code() != Code::kInvalidUsage) {
    fprintf(stderr, "rank %d: FAIL expected invalid usage, got %s\n", r, s.toString().c_str());
    return 1;
  }
  if (s.message().find("mismatch") == std::string::npos) {
    fprintf(stderr, "rank %d: FAIL message does not describe the mismatch\n", r);
    return 1;
  }
  return 0;
}

// A p2p ring (each rank sends 1000 floats to the next and receives from the previous) whose
// receive on rank 1 expects one element more, and on rank 0 one element less, than its peer
// sends: both must fail with a point-to-point mismatch naming the peer and the counts (their
// own, or the other's that aborted the communicator first); the other ranks finish their groups
// or fail, in bounded time either way.
int scenarioMismatchP2p(Communicator* comm) {
  const int r = comm->rank(), p = comm->size();
  const int prev = (r - 1 + p) % p;
  std::vector<float> out(2048, 1.0f), in(2048, 0.0f);
  const size_t expect = r == 1 ? 1001 : r == 0 ? 999 : 1000;
  std::vector<P2pOp> ops = {{true, out.data(), 1000, DataType::kFloat32, (r + 1) % p},
                            {false, in.data(), expect, DataType::kFloat32, prev}};
  Status s = comm->sendRecvGroup(std::move(ops));
  printf("rank %d: %s\n", r, s.toString().c_str());
  if (r > 1) return 0;
  // Its own mismatch, or the other one's, when that rank found its own first and aborted the
  // communicator (the abort carries its message).
  const int last = p - 1;
  const std::string rank1 =
      "rank 1's receive from rank 0 expects 1001 float but rank 0 sent 1000 float";
  const std::string rank0 = "rank 0's receive from rank " + std::to_string(last) +
                            " expects 999 float but rank " + std::to_string(last) + " sent more";
  const std::string& own = r == 1 ? rank1 : rank0;
  const std::string& other = r == 1 ? rank0 : rank1;
  const std::string& m = s.message();
  const bool ok = s.code() == Code::kInvalidUsage &&
                  (m.find(own) != std::string::npos ||
                   (m.find("aborted") != std::string::npos && m.find(other) != std::string::npos));
  if (!ok) {
    fprintf(stderr, "rank %d: FAIL expected \"%s\" (or an abort carrying \"%s\"), got %s\n", r,
            own.c_str(), other.c_str(), s.toString().c_str());
    return 1;
  }
  return 0;
}

// Rank 0 all-reduces buffers of a shared window, the others buffers of their own: every rank
// must fail with kInvalidUsage saying that its peer's buffers were (or were not) in windows, or
// with the abort of a rank that found the mismatch first.
int scenarioMismatchWindows(Communicator* comm, bool reduceScatter) {
  const int r = comm->rank(), p = comm->size();
  // 1 MiB of float for the all-reduce; for the reduce-scatter 12 MiB in all, beyond a half
  // slot, where the others run the ring over the transport and never meet rank 0 in the segment.
  const size_t count = reduceScatter ? (size_t{3} << 20) / static_cast<size_t>(p) : size_t{1} << 18;
  Result<void*> win = comm->allocShared((static_cast<size_t>(p) + 1) * count * 4);
  if (!win.isOk()) {
    fprintf(stderr, "rank %d: FAIL allocShared: %s\n", r, win.status().toString().c_str());
    return 1;
  }
  // Windows change only the shm row's schedule: force it, whatever this machine's model picks.
  Status forced = comm->setAlgorithm(
      reduceScatter ? Collective::kReduceScatter : Collective::kAllReduce, "shm");
  if (!forced.isOk()) {
    fprintf(stderr, "rank %d: FAIL forcing shm: %s\n", r, forced.toString().c_str());
    return 1;
  }
  std::vector<float> own((static_cast<size_t>(p) + 1) * count, 1.0f);
  float* buf = r == 0 ? static_cast<float*>(*win) : own.data();
  Status s = reduceScatter
                 ? comm->reduceScatter(buf, buf + static_cast<size_t>(p) * count, count,
                                       DataType::kFloat32, ReduceOp::kSum)
                 : comm->allReduce(buf, buf + count, count, DataType::kFloat32, ReduceOp::kSum);
  printf("rank %d: %s\n", r, s.toString().c_str());
  const std::string& m = s.message();
  const bool ok = s.code() == Code::kInvalidUsage &&
                  m.find("collective mismatch") != std::string::npos &&
                  (m.find("buffers in shared windows") != std::string::npos ||
                   m.find("aborted") != std::string::npos);
  if (!ok) {
    fprintf(stderr, "rank %d: FAIL expected a mismatch naming shared windows, got %s\n", r,
            s.toString().c_str());
    return 1;
  }
  return 0;
}

// Closed-loop tuning with another thread in the communicator (poisoned_cache.sh plants a cache
// whose bandwidths are 30x too slow and sets BRAID_RETUNE_INTERVAL): 1 MiB all-reduces run on
// the progress thread, eight at a time, while this thread keeps asking the selector
// (algorithmFor, predictedUs, selectorModel, every 200 us) until they complete. Every result
// must be right, and by the end the model in effect must be a fresh probe's, not the cache's.
int scenarioRetune(Communicator* comm) {
  Checker c{comm};
  const int p = comm->size(), r = comm->rank();
  const DataType t = DataType::kFloat32;
  const size_t count = size_t{1} << 18;
  const std::string before = comm->selectorModel();
  std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(count * 4));
  for (uint32_t round = 0; round < 24; ++round) {
    std::vector<std::shared_ptr<Work>> works;
    for (size_t k = 0; k < bufs.size(); ++k) {
      const uint32_t salt = 9000 + round * 8 + static_cast<uint32_t>(k);
      for (size_t i = 0; i < count; ++i) storeValue(t, bufs[k].data(), i, testValue(t, ReduceOp::kSum, r, i, salt));
      auto w = comm->allReduceAsync(bufs[k].data(), bufs[k].data(), count, t, ReduceOp::kSum);
      if (!c.ok(w.status(), "allReduceAsync")) return finish(c, "retune");
      works.push_back(*w);
    }
    while (!works.back()->test()) {
      (void)comm->algorithmFor(Collective::kAllReduce, count * 4);
      (void)comm->predictedUs(Collective::kAllReduce, count * 4);
      (void)comm->selectorModel();
      // Not a spin: a third busy thread on two cores would slow the all-reduces as much as the
      // planted model says they take.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (size_t k = 0; k < works.size(); ++k) {
      const uint32_t salt = 9000 + round * 8 + static_cast<uint32_t>(k);
      if (!c.ok(works[k]->wait(), "async allreduce wait")) continue;
      compare(c, "retune allreduce", t, ReduceOp::kSum, bufs[k].data(), count,
              [&](size_t i) { return expectedReduce(t, ReduceOp::kSum, p, i, salt); });
    }
  }
  const std::string after = comm->selectorModel();
  ++c.checks;
  if (after.find("from probe") == std::string::npos) {
    c.fail("expected the cached model to give way to a probe's; before: " + before + "; after: " + after);
  }
  // The check at creation may have caught the planted model already (it times the runner-up
  // algorithm at 8 bytes too); then the closed loop had nothing to repair.
  if (r == 0) {
    printf("# retune: the model in effect at creation came from %s\n",
           before.find("from cache") != std::string::npos ? "the cache" : "a probe");
  }
  return finish(c, "retune");
}

// The whole matrix on one communicator (the one created, or the one a shrink made).
int runMatrix(Communicator* comm, std::vector<std::string> algos, bool quick, bool allReduceOnly) {
  Checker c{comm};
  if (algos.empty()) {
    algos = comm->algorithms(Collective::kAllReduce);
    algos.push_back("auto");
  }
  if (comm->rank() == 0) {
    printf("# collectives-check: %d ranks on %d host(s), %s\n", comm->size(), comm->numHosts(),
           quick ? "quick" : "full matrix");
    std::string list;
    for (const std::string& a : algos) list += (list.empty() ? "" : ", ") + a;
    printf("# all-reduce algorithms: %s\n", list.c_str());
  }
  runBadArgs(c);
  runAllReduceMatrix(c, algos, quick);
  if (allReduceOnly) return finish(c, "all-reduce");
  runOtherCollectives(c, quick);
  runP2pGroups(c);
  runSharedWindows(c, quick);
  runAsync(c);
  runSplit(c);
  runSubgroup(c);
  return finish(c, "collectives");
}

// Checks what a shrink returned on a rank that stays: its size and the dense renumbering.
bool checkShrunk(Communicator* old, const Result<std::unique_ptr<Communicator>>& shrunk,
                 const std::vector<int>& excluded) {
  const int r = old->rank();
  if (!shrunk.isOk()) {
    fprintf(stderr, "rank %d: FAIL shrink: %s\n", r, shrunk.status().toString().c_str());
    return false;
  }
  const Communicator* next = shrunk.value().get();
  if (next == nullptr) {
    fprintf(stderr, "rank %d: FAIL shrink returned no communicator to a rank that stays\n", r);
    return false;
  }
  int below = 0;
  for (int q : excluded) below += q < r ? 1 : 0;
  const int wantSize = old->size() - static_cast<int>(excluded.size());
  if (next->size() != wantSize || next->rank() != r - below) {
    fprintf(stderr, "rank %d: FAIL shrink gave rank %d of %d, expected %d of %d\n", r, next->rank(),
            next->size(), r - below, wantSize);
    return false;
  }
  return true;
}

// shrink-kill: rank 2 (the last rank of fewer than 4) SIGKILLs itself in the middle of large
// all-reduces; the survivors get the error, shrink it away within BRAID_TIMEOUT_MS + 2 s (the
// failed communicator stays failed), and run the whole matrix (quick sizes) on the new
// communicator, where the ranks above the victim moved down by one.
int scenarioShrinkKill(Communicator* comm, const std::vector<std::string>& algos) {
  const int victim = std::min(2, comm->size() - 1);
  const int r = comm->rank();
  if (victim == 0) return 2;
  std::vector<float> buf(size_t{4} << 20, 1.0f);
  if (!comm->barrier().isOk()) return 3;
  const int64_t timeoutMs = paramInt("BRAID_TIMEOUT_MS");
  if (r == victim) armFault(false, timeoutMs);
  uint64_t start = 0;
  Status s = allReduceUntilFailure(comm, buf, &start);
  if (s.isOk()) {
    fprintf(stderr, "rank %d: FAIL no error although rank %d was killed\n", r, victim);
    return 1;
  }
  const uint64_t t0 = nowNs();
  auto shrunk = comm->shrink({victim});
  const double ms = static_cast<double>(nowNs() - t0) / 1e6;
  printf("rank %d: after \"%s\", shrink took %.0f ms\n", r, s.toString().c_str(), ms);
  if (!checkShrunk(comm, shrunk, {victim})) return 1;
  if (ms > static_cast<double>(timeoutMs + 2000)) {
    fprintf(stderr, "rank %d: FAIL shrink took %.0f ms\n", r, ms);
    return 1;
  }
  if (comm->barrier().isOk() || comm->health().isOk()) {
    fprintf(stderr, "rank %d: FAIL the failed communicator works again after shrink\n", r);
    return 1;
  }
  return runMatrix(shrunk.value().get(), algos, true, false);
}

// shrink-healthy: rank 1 is dropped while healthy and calls shrink too (it gets no
// communicator); the parent stays usable beside the new one; then the new one shrinks again
// (fresh keys) dropping its rank 0, and the rest all-reduce.
int scenarioShrinkHealthy(Communicator* comm) {
  const int r = comm->rank(), p = comm->size();
  auto shrunk = comm->shrink({1});
  if (r == 1) {
    if (!shrunk.isOk() || shrunk.value() != nullptr) {
      fprintf(stderr, "rank 1: FAIL an excluded caller should get no communicator: %s\n",
              shrunk.status().toString().c_str());
      return 1;
    }
  } else {
    if (!checkShrunk(comm, shrunk, {1})) return 1;
    Communicator* next = shrunk.value().get();
    std::vector<double> v(1003, r + 1.0);
    Status s = next->allReduce(v.data(), v.data(), v.size(), DataType::kFloat64, ReduceOp::kSum);
    const double want = p * (p + 1) / 2.0 - 2.0;  // every old rank's r + 1 but rank 1's
    if (!s.isOk() || v[0] != want || v[1002] != want) {
      fprintf(stderr, "rank %d: FAIL allreduce after shrink: %s, %g (expected %g)\n", r,
              s.toString().c_str(), v[0], want);
      return 1;
    }
    if (next->size() >= 2) {
      auto again = next->shrink({0});
      if (next->rank() == 0) {
        if (!again.isOk() || again.value() != nullptr) {
          fprintf(stderr, "rank %d: FAIL second shrink on its excluded rank\n", r);
          return 1;
        }
      } else {
        if (!checkShrunk(next, again, {0})) return 1;
        int one = 1;
        s = again.value()->allReduce(&one, &one, 1, DataType::kInt32, ReduceOp::kSum);
        if (!s.isOk() || one != p - 2) {
          fprintf(stderr, "rank %d: FAIL allreduce after the second shrink: %s, %d\n", r,
                  s.toString().c_str(), one);
          return 1;
        }
      }
    }
  }
  std::vector<float> w(16, 1.0f);
  Status s = comm->allReduce(w.data(), w.data(), w.size(), DataType::kFloat32, ReduceOp::kSum);
  if (!s.isOk() || w[0] != static_cast<float>(p)) {
    fprintf(stderr, "rank %d: FAIL the parent after a healthy shrink: %s\n", r,
            s.toString().c_str());
    return 1;
  }
  printf("rank %d: healthy shrinks passed\n", r);
  return 0;
}

// shrink-mismatch: the lower half of the ranks excludes the last rank, the upper half the one
// before it; every rank gets kInvalidUsage naming both lists, before the deadline.
int scenarioShrinkMismatch(Communicator* comm) {
  const int r = comm->rank(), p = comm->size();
  const int excluded = r < p / 2 ? p - 1 : p - 2;
  const uint64_t t0 = nowNs();
  auto shrunk = comm->shrink({excluded});
  const double ms = static_cast<double>(nowNs() - t0) / 1e6;
  const Status s = shrunk.status();
  printf("rank %d: %.0f ms: %s\n", r, ms, s.toString().c_str());
  if (s.code() != Code::kInvalidUsage || s.message().find("same excluded") == std::string::npos ||
      s.message().find("[" + std::to_string(p - 1) + "]") == std::string::npos ||
      s.message().find("[" + std::to_string(p - 2) + "]") == std::string::npos) {
    fprintf(stderr, "rank %d: FAIL expected invalid usage naming both lists\n", r);
    return 1;
  }
  if (ms > static_cast<double>(paramInt("BRAID_TIMEOUT_MS"))) {
    fprintf(stderr, "rank %d: FAIL a mismatch should not wait for the deadline\n", r);
    return 1;
  }
  return 0;
}

// A silent peer: the last rank stays away for BRAID_TIMEOUT_MS + 2.5 s; on every other rank
// call() must end in a kTimeout whose message holds `needle`, within BRAID_TIMEOUT_MS + 2 s.
template <typename F>
int expectTimeoutWhileLastIsSilent(Communicator* comm, const std::string& needle, F call) {
  const int r = comm->rank(), p = comm->size();
  const int64_t timeoutMs = paramInt("BRAID_TIMEOUT_MS");
  if (r == p - 1) {
    usleep(static_cast<useconds_t>((timeoutMs + 2500) * 1000));
    return 0;
  }
  const uint64_t t0 = nowNs();
  const Status s = call();
  const double ms = static_cast<double>(nowNs() - t0) / 1e6;
  printf("rank %d: %.0f ms (limit %lld): %s\n", r, ms, static_cast<long long>(timeoutMs + 2000),
         s.toString().c_str());
  if (s.code() != Code::kTimeout || s.message().find(needle) == std::string::npos) {
    fprintf(stderr, "rank %d: FAIL expected a timeout naming rank %d ('%s')\n", r, p - 1,
            needle.c_str());
    return 1;
  }
  if (ms > static_cast<double>(timeoutMs + 2000)) {
    fprintf(stderr, "rank %d: FAIL too slow\n", r);
    return 1;
  }
  return 0;
}

// shrink-silent: rank 1 leaves and the last rank (which stays) never calls shrink; the others
// get a kTimeout naming the last rank.
int scenarioShrinkSilent(Communicator* comm) {
  if (comm->rank() == 1) return 0;
  const std::string last = std::to_string(comm->size() - 1);
  return expectTimeoutWhileLastIsSilent(comm, "rank(s) [" + last + "] did not call shrink",
                                        [&] { return comm->shrink({1}).status(); });
}

// split-silent: the last rank never calls split; the others get a kTimeout naming it (split's
// exchange is a collective of the parent).
int scenarioSplitSilent(Communicator* comm) {
  if (!comm->barrier().isOk()) return 3;
  const std::string last = std::to_string(comm->size() - 1);
  return expectTimeoutWhileLastIsSilent(comm, "rank " + last,
                                        [&] { return comm->split(0, comm->rank()).status(); });
}

// subgroup-silent: every rank is listed, and the last one never calls subgroup; the others get a
// kTimeout naming it (only the members' check-in waits for it: nothing of the parent does).
int scenarioSubgroupSilent(Communicator* comm) {
  if (!comm->barrier().isOk()) return 3;
  const int p = comm->size();
  std::vector<int> all(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) all[static_cast<size_t>(q)] = q;
  return expectTimeoutWhileLastIsSilent(
      comm, "rank(s) [" + std::to_string(p - 1) + "] did not call subgroup",
      [&] { return comm->subgroup(all).status(); });
}

// wait-timeout: the last rank joins an asynchronous all-reduce only BRAID_TIMEOUT_MS / 2 + 2 s
// late; the others' Work::wait(BRAID_TIMEOUT_MS / 4) returns kTimeout naming their rank and the
// all-reduce within 2 s of that limit, and fails the communicator: a later collective fails on
// every rank, the late one included.
int scenarioWaitTimeout(Communicator* comm) {
  const int r = comm->rank(), p = comm->size();
  const int64_t timeoutMs = paramInt("BRAID_TIMEOUT_MS");
  std::vector<float> buf(1 << 16, 1.0f);
  if (!comm->barrier().isOk()) return 3;
  if (r == p - 1) usleep(static_cast<useconds_t>((timeoutMs / 2 + 2000) * 1000));
  auto w =
      comm->allReduceAsync(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
  if (!w.isOk()) {
    fprintf(stderr, "rank %d: FAIL allReduceAsync: %s\n", r, w.status().toString().c_str());
    return 1;
  }
  const int64_t limit = timeoutMs / 4;
  const uint64_t t0 = nowNs();
  Status s = w.value()->wait(limit);
  const double ms = static_cast<double>(nowNs() - t0) / 1e6;
  printf("rank %d: wait(%lld) returned after %.0f ms: %s\n", r, static_cast<long long>(limit), ms,
         s.toString().c_str());
  if (r != p - 1) {
    if (s.code() != Code::kTimeout || s.message().find("rank " + std::to_string(r)) != 0 ||
        s.message().find("allreduce") == std::string::npos) {
      fprintf(stderr, "rank %d: FAIL expected a timeout naming this rank and the all-reduce\n", r);
      return 1;
    }
    // A peer whose own wait began a little earlier may time out first and abort this one (its
    // error then reads "the communicator was aborted: rank Q: Work.wait..."): up to the barrier's
    // exit skew early.
    const bool byPeer = s.message().find("was aborted") != std::string::npos;
    const double earliest = static_cast<double>(limit) - (byPeer ? 250 : 1);
    if (ms > static_cast<double>(limit + 2000) || ms < earliest) {
      fprintf(stderr, "rank %d: FAIL wait(%lld) took %.0f ms\n", r, static_cast<long long>(limit),
              ms);
      return 1;
    }
  }
  // Failed everywhere now (the late rank learns it from the store record or its peers).
  if (comm->barrier().isOk()) {
    fprintf(stderr, "rank %d: FAIL the communicator works after a Work.wait timeout\n", r);
    return 1;
  }
  return 0;
}

// The segment's pipelined broadcast, all-gather and reduce-scatter, piece after piece,
// interleaved with other collectives so that ranks enter each one at different moments (run
// with a small BRAID_SHM_SEGMENT_BYTES: many pieces at small sizes). A reader racing into a
// broadcast's next piece while a peer still checks the previous collective's fingerprints once
// read as a mismatch ("rank 1 issued #186 allgather but rank 3 issued #187 broadcast", 4 ranks).
int scenarioPieces(Communicator* comm, int rounds) {
  const int r = comm->rank(), p = comm->size();
  Checker c{comm};
  for (Collective k : {Collective::kAllGather, Collective::kBroadcast, Collective::kReduceScatter}) {
    if (!c.ok(comm->setAlgorithm(k, "shm"), "force shm")) return 1;
  }
  const DataType t = DataType::kInt32;
  std::vector<uint8_t> a, b;
  uint32_t salt = 300000;
  for (int round = 0; round < rounds && c.failures == 0; ++round) {
    // Counts that end in a partial piece, and ranks that arrive late in turn.
    const size_t count = 5000 + static_cast<size_t>(round % 7) * 4099;
    if (round % p == r) usleep(200);
    const int root = round % p;
    ++salt;
    a.assign(count * 4, 0);
    if (r == root) {
      for (size_t i = 0; i < count; ++i)
        storeValue(t, a.data(), i, testValue(t, ReduceOp::kSum, root, i, salt));
    }
    b.assign(count * 4, 0);
    std::string name =
        "broadcast shm count=" + std::to_string(count) + " root=" + std::to_string(root);
    if (c.ok(comm->broadcast(a.data(), b.data(), count, t, root), name)) {
      compare(c, name, t, ReduceOp::kSum, b.data(), count,
              [&](size_t i) { return testValue(t, ReduceOp::kSum, root, i, salt); });
    }
    const size_t block = round % 2 == 0 ? 2 : count / 3;
    ++salt;
    a.assign(block * 4, 0);
    for (size_t i = 0; i < block; ++i)
      storeValue(t, a.data(), i, testValue(t, ReduceOp::kSum, r, i, salt));
    b.assign(block * 4 * p, 0);
    name = "allgather shm count=" + std::to_string(block);
    if (c.ok(comm->allGather(a.data(), b.data(), block, t), name)) {
      compare(c, name, t, ReduceOp::kSum, b.data(), block * p, [&](size_t i) {
        return testValue(t, ReduceOp::kSum, static_cast<int>(i / block), i % block, salt);
      });
    }
    // Reduce-scatter of p such blocks: over one half slot (count/3 elements a block), piece by
    // piece; in place every other pair of rounds.
    ++salt;
    a.assign(block * 4 * p, 0);
    for (size_t i = 0; i < block * p; ++i)
      storeValue(t, a.data(), i, testValue(t, ReduceOp::kSum, r, i, salt));
    const bool inplace = round % 4 >= 2;
    b.assign(block * 4, 0);
    void* out = inplace ? a.data() + block * 4 * r : b.data();
    name = "reducescatter shm count=" + std::to_string(block) + (inplace ? " in place" : "");
    if (c.ok(comm->reduceScatter(a.data(), out, block, t, ReduceOp::kSum), name)) {
      compare(c, name, t, ReduceOp::kSum, out, block, [&](size_t i) {
        return expectedReduce(t, ReduceOp::kSum, p, static_cast<size_t>(r) * block + i, salt);
      });
    }
    int32_t one = 1, sum = 0;
    if (c.ok(comm->allReduce(&one, &sum, 1, t, ReduceOp::kSum), "allreduce") && sum != p) {
      c.fail("allreduce of ones gave " + std::to_string(sum));
    }
  }
  printf("rank %d: %d pieces checks, %d failures\n", r, c.checks, c.failures);
  return c.failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  using namespace braid;
  using namespace braid::test;
  std::string scenario;
  std::vector<std::string> algos;  // empty: every one the table has for these ranks, then auto
  bool quick = false, allReduceOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--scenario" && i + 1 < argc) {
      scenario = argv[++i];
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--allreduce-only") {
      allReduceOnly = true;
    } else if (a == "--algos" && i + 1 < argc) {
      algos.clear();
      std::string list = argv[++i];
      if (list == "all") continue;
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        algos.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      fprintf(stderr,
              "usage: %s [--quick] [--allreduce-only] [--algos all|LIST] [--scenario "
              "kill|stall|mismatch-count|mismatch-order|mismatch-p2p|mismatch-windows|mismatch-"
              "windows-rs|retune|"
              "shrink-kill|shrink-healthy|"
              "shrink-mismatch|shrink-silent|split-silent|subgroup-silent|wait-timeout|pieces]\n",
              argv[0]);
      return 2;
    }
  }
  auto created = Communicator::createFromEnvironment();
  if (!created.isOk()) {
    fprintf(stderr, "communicator creation failed: %s\n", created.status().toString().c_str());
    return 2;
  }
  std::unique_ptr<Communicator> comm = std::move(created).value();
  if (scenario == "kill") return scenarioKill(comm.get(), false);
  if (scenario == "stall") return scenarioKill(comm.get(), true);
  if (scenario == "mismatch-count") return scenarioMismatch(comm.get(), "count");
  if (scenario == "mismatch-order") return scenarioMismatch(comm.get(), "order");
  if (scenario == "mismatch-big") return scenarioMismatch(comm.get(), "big");
  if (scenario == "mismatch-p2p") return scenarioMismatchP2p(comm.get());
  if (scenario == "mismatch-windows") return scenarioMismatchWindows(comm.get(), false);
  if (scenario == "mismatch-windows-rs") return scenarioMismatchWindows(comm.get(), true);
  if (scenario == "retune") return scenarioRetune(comm.get());
  if (scenario == "shrink-kill") return scenarioShrinkKill(comm.get(), algos);
  if (scenario == "shrink-healthy") return scenarioShrinkHealthy(comm.get());
  if (scenario == "shrink-mismatch") return scenarioShrinkMismatch(comm.get());
  if (scenario == "shrink-silent") return scenarioShrinkSilent(comm.get());
  if (scenario == "wait-timeout") return scenarioWaitTimeout(comm.get());
  if (scenario == "split-silent") return scenarioSplitSilent(comm.get());
  if (scenario == "subgroup-silent") return scenarioSubgroupSilent(comm.get());
  if (scenario == "pieces") return scenarioPieces(comm.get(), quick ? 100 : 400);
  if (!scenario.empty()) {
    fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  return runMatrix(comm.get(), algos, quick, allReduceOnly);
}
