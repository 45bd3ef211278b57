// The binomial tree that broadcast, reduce and the tree all-reduce run over.
//
// Ranks are renumbered v = (rank − root) mod p. Rank v's parent is v − lowbit(v); its children
// are v + 2^k for every 2^k < lowbit(v) (all v + 2^k < p at the root), largest subtree first.
// Depth ⌈log2 p⌉.
#pragma once

#include <vector>

#include "collectives/selector/cost_model.h"

namespace braid::detail {

struct BinomialTree {
  int parent = -1;  ///< real rank, -1 at the root
  int children[32];
  int nchildren = 0;  ///< ordered from the largest subtree to the smallest
};
BinomialTree binomialTree(int rank, int size, int root);

/// The tree rooted at 0 as CostModel::pipelinedTreeUs prices it: level k holds the edges between
/// every v whose lowest set bit is k and v − 2^k.
std::vector<CostModel::Step> binomialLevels(const CostModel& m);

}  // namespace braid::detail
