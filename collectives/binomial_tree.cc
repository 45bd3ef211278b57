#include "collectives/binomial_tree.h"

namespace braid::detail {

BinomialTree binomialTree(int rank, int size, int root) {
  BinomialTree t;
  const int v = (rank - root + size) % size;
  int mask = 1;
  while (mask < size) {
    if (v & mask) {
      t.parent = ((v - mask) + root) % size;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < size) t.children[t.nchildren++] = (v + mask + root) % size;
  }
  return t;
}

std::vector<CostModel::Step> binomialLevels(const CostModel& m) {
  const int p = m.placement().size();
  std::vector<CostModel::Step> levels;
  for (int k = 0; (1 << k) < p; ++k) {
    CostModel::Messages edges;
    for (int v = 1 << k; v < p; v += 2 << k) edges.push_back({v, v - (1 << k)});
    levels.push_back(m.makeStep(edges));
  }
  return levels;
}

}  // namespace braid::detail
