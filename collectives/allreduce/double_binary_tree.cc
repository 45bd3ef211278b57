// Double binary tree all-reduce (NCCL's tree): two binary trees over the ranks, each reducing and
// broadcasting half of the vector, such that every rank is interior in at most one of them; a
// rank that forwards half the data in one tree is a leaf of the other, so every rank sends and
// receives about 2·S however many ranks there are (the binomial tree's root moves ⌈log2 p⌉·S).
//
// Trees: tree A is the in-order binary tree over positions 0..p−1: the root of an interval of m
// positions starting at lo is lo + 2^⌊log2 m⌋ − 1; its left subtree (perfect) is the interval
// before it, its right subtree the interval after it. Intervals start at even positions, so the
// odd positions are interior and the even ones leaves; the height is H = ⌊log2 p⌋. Tree B is
// tree A shifted by one: rank r sits at position (r + 1) mod p, so its interior ranks are the
// even ones, the leaves of tree A.
//
// Schedule: tree A carries elements [0, ⌈n/2⌉), tree B the rest, each cut into c chunks (c from
// the pipelining chunk). The ranks run in rounds, each posting all its messages of the round
// (tree A's first, then tree B's, so that two messages between the same pair keep the same order
// on both sides) and waiting for them; in a tree, a node of height h sends its partial chunk k to
// its parent in round k + h (its children's arrived before: their heights are lower), the root
// sends the reduced chunk k down in round k + H, and a node of depth d forwards it in round
// k + H + d. Reduce and broadcast thus overlap, and the two trees run side by side:
// c + 2H − 1 rounds.
// Cost (b = S/(2c) per chunk): the first chunk's 2H rounds, each costing the busiest rank one
//   exchange step α per send/receive pair it handles, plus b·β for every chunk it receives (b·β
//   per chunk crossing one host's link) and b·γ for every chunk it reduces; then c − 1 further
//   rounds in which every rank is busy in both trees (an interior rank: 4 chunks in, 4 out, 2
//   reduced): ≈ (c − 1)·(4·α + 4·b·β + 2·b·γ). Unpipelined: ~2H·α + 2H·S·β; pipelined, for
//   large c: ~2·S·β + S·γ + 4c·α. The selector picks its chunk (from 64 KiB: algorithms.cc).
#include <algorithm>
#include <cmath>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {
namespace allreduce_double_binary_tree {
namespace {

int floorLog2(int m) {
  int k = 0;
  while ((2 << k) <= m) ++k;
  return k;
}

// The root of the subtree over positions [lo, hi] (not empty).
int rootOf(int lo, int hi) { return lo + (1 << floorLog2(hi - lo + 1)) - 1; }

// One position's place in tree A: parent, children, depth, and the heights (edges down to the
// deepest leaf) of itself and of its children.
struct Node {
  int parent = -1;  // position, -1 at the root
  int child[2] = {-1, -1};
  int childHeight[2] = {0, 0};
  int depth = 0;
  int height = 0;
};

Node nodeAt(int v, int p) {
  Node n;
  int lo = 0, hi = p - 1;
  for (;;) {
    const int root = rootOf(lo, hi);
    if (root == v) break;
    n.parent = root;
    ++n.depth;
    if (v < root) {
      hi = root - 1;
    } else {
      lo = root + 1;
    }
  }
  n.height = floorLog2(hi - lo + 1);
  if (lo < v) {
    n.child[0] = rootOf(lo, v - 1);
    n.childHeight[0] = floorLog2(v - lo);
  }
  if (v < hi) {
    n.child[1] = rootOf(v + 1, hi);
    n.childHeight[1] = floorLog2(hi - v);
  }
  return n;
}

// Tree t ∈ {0 = A, 1 = B}: rank r's position, and position v's rank.
int positionOf(int t, int r, int p) { return t == 0 ? r : (r + 1) % p; }
int rankAt(int t, int v, int p) { return t == 0 ? v : (v - 1 + p) % p; }

// This rank in one tree, in ranks.
struct Role {
  Node node;  // positions and heights
  int parent = -1;
  int child[2] = {-1, -1};
  size_t off = 0, len = 0;  // the tree's elements of the vector
};

}  // namespace

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int /*root*/) {
  uint8_t* buf = beginAllReduce(a, sendbuf, recvbuf, count);
  if (a.size == 1) return Status::ok();
  const int p = a.size;
  const size_t es = a.elemSize;
  P2p& net = *a.p2p;

  Role role[2];
  for (int t = 0; t < 2; ++t) {
    Role& ro = role[t];
    ro.node = nodeAt(positionOf(t, a.rank, p), p);
    if (ro.node.parent >= 0) ro.parent = a.peer(rankAt(t, ro.node.parent, p));
    for (int j = 0; j < 2; ++j) {
      if (ro.node.child[j] >= 0) ro.child[j] = a.peer(rankAt(t, ro.node.child[j], p));
    }
    ro.off = t == 0 ? 0 : blockStart(count, 2, 1);
    ro.len = t == 0 ? blockStart(count, 2, 1) : count - blockStart(count, 2, 1);
  }
  const int treeHeight = floorLog2(p);  // both trees' (the root's height)
  const size_t chunkElems = std::max<size_t>(1, a.chunkBytes / es);
  const int nchunks =
      static_cast<int>(std::max<size_t>(1, (role[0].len + chunkElems - 1) / chunkElems));
  // Chunk k of a tree: elements [lo, hi) of the vector.
  auto chunk = [&](const Role& ro, int k, size_t* lo, size_t* n) {
    const size_t b = blockStart(ro.len, nchunks, k), e = blockStart(ro.len, nchunks, k + 1);
    *lo = ro.off + b;
    *n = e - b;
  };
  const size_t maxChunk =
      (role[0].len + static_cast<size_t>(nchunks) - 1) / static_cast<size_t>(nchunks);
  // The children's chunks land here: one slot per tree and child.
  uint8_t* tmp = a.scratch->get(4 * maxChunk * es + 64);
  auto slot = [&](int t, int j) { return tmp + static_cast<size_t>(2 * t + j) * maxChunk * es; };
  const int rounds = nchunks + 2 * treeHeight - 1;
  for (int r = 0; r < rounds; ++r) {
    // The children's chunks this round receives, to reduce once they are in: chunk index per
    // (tree, child), −1 for none.
    int landed[2][2] = {{-1, -1}, {-1, -1}};
    for (int t = 0; t < 2; ++t) {
      const Role& ro = role[t];
      const Node& nd = ro.node;
      size_t lo, n;
      // Up: children's partial chunks in, this rank's partial chunk to its parent.
      for (int j = 0; j < 2; ++j) {
        const int k = r - nd.childHeight[j];
        if (ro.child[j] < 0 || k < 0 || k >= nchunks) continue;
        chunk(ro, k, &lo, &n);
        net.postRecv(ro.child[j], slot(t, j), n * es);
        landed[t][j] = k;
      }
      if (ro.parent >= 0) {
        const int k = r - nd.height;
        if (k >= 0 && k < nchunks) {
          chunk(ro, k, &lo, &n);
          net.postSend(ro.parent, buf + lo * es, n * es);
        }
      }
      // Down: the reduced chunk from the parent (the root has it), on to the children.
      if (ro.parent >= 0) {
        const int k = r - treeHeight - nd.depth + 1;
        if (k >= 0 && k < nchunks) {
          chunk(ro, k, &lo, &n);
          net.postRecv(ro.parent, buf + lo * es, n * es);
        }
      }
      const int k = r - treeHeight - nd.depth;
      if (k >= 0 && k < nchunks && (ro.child[0] >= 0 || ro.child[1] >= 0)) {
        chunk(ro, k, &lo, &n);
        // At the root the chunk is complete now: kAvg divides it once, before it goes down.
        if (ro.parent < 0 && a.op == ReduceOp::kAvg) scaleForAvg(a.type, buf + lo * es, n, p);
        for (int j = 0; j < 2; ++j) {
          if (ro.child[j] >= 0) net.postSend(ro.child[j], buf + lo * es, n * es);
        }
      }
    }
    BRAID_RETURN_IF_ERROR(net.waitAll());
    for (int t = 0; t < 2; ++t) {
      for (int j = 0; j < 2; ++j) {
        if (landed[t][j] < 0) continue;
        size_t lo, n;
        chunk(role[t], landed[t][j], &lo, &n);
        if (n > 0) a.reduce(buf + lo * es, buf + lo * es, slot(t, j), n);
      }
    }
  }
  return Status::ok();
}

// The rounds of the first chunk (round h: partial chunks from the nodes of height h to their
// parents; round H + d: the reduced chunk from the nodes of depth d to their children), then one
// round with every message of both trees (what each further chunk adds).
void plan(const CostModel& m, CostPlan* plan) {
  const int p = m.placement().size();
  const int H = floorLog2(p);
  std::vector<CostModel::Messages> up(static_cast<size_t>(H)), down(static_cast<size_t>(H));
  CostModel::Messages allUp, allDown;
  for (int t = 0; t < 2; ++t) {
    for (int v = 0; v < p; ++v) {
      const Node n = nodeAt(v, p);
      if (n.parent < 0) continue;
      const int child = rankAt(t, v, p), parent = rankAt(t, n.parent, p);
      up[static_cast<size_t>(n.height)].push_back({child, parent});
      down[static_cast<size_t>(n.depth - 1)].push_back({parent, child});
      allUp.push_back({child, parent});
      allDown.push_back({parent, child});
    }
  }
  for (int h = 0; h < H; ++h) plan->steps.push_back(m.makeStep(up[static_cast<size_t>(h)]));
  for (int d = 0; d < H; ++d) plan->steps.push_back(m.makeStep({}, down[static_cast<size_t>(d)]));
  plan->steps.push_back(m.makeStep(allUp, allDown));
}

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t chunkBytes) {
  const FabricModel& f = m.model();
  const double half = static_cast<double>(bytes) / 2;
  const double c = std::max(1.0, std::ceil(half / static_cast<double>(chunkBytes)));
  const double b = half / c;
  const double miss = m.outOfCache(static_cast<double>(bytes));
  const double mem = m.memoryFactor(static_cast<double>(bytes));
  auto round = [&](const CostModel::Step& s) {
    const double cpu = m.cpuShare(s.active);
    const double pairs = std::max(1.0, s.ops / 2.0);  // exchange steps of the busiest rank
    double t = 0;
    if (s.intra) {
      t = std::max(t, m.stepAlpha(f.intra.alphaUs, cpu) * pairs +
                          cpu * s.in * b * f.intra.beta(true, b, miss));
    }
    if (s.inter) {
      t = std::max(
          t, m.stepAlpha(f.inter.alphaUs, cpu) * pairs + s.share * b * f.inter.beta(true, b, miss));
    }
    return t + cpu * s.reduces * b * f.gammaUsPerByte * mem;
  };
  double first = 0;
  for (size_t i = 0; i + 1 < plan.steps.size(); ++i) first += round(plan.steps[i]);
  return first + (c - 1) * round(plan.steps.back());
}

}  // namespace allreduce_double_binary_tree
}  // namespace braid::detail
