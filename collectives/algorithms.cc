#include "collectives/algorithms.h"

#include <cstring>

namespace braid::detail {

uint8_t* Scratch::get(size_t bytes) {
  if (buf_.size() < bytes) {
    buf_.clear();
    buf_.shrink_to_fit();
    buf_.resize(bytes);
  }
  return buf_.data();
}

void copyIfDistinct(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

const char* allReduceAlgoName(AllReduceAlgo algo) {
  switch (algo) {
    case AllReduceAlgo::kAuto: return "auto";
    case AllReduceAlgo::kRing: return "ring";
    case AllReduceAlgo::kTree: return "tree";
    case AllReduceAlgo::kHalvingDoubling: return "halving_doubling";
    case AllReduceAlgo::kShm: return "shm";
    case AllReduceAlgo::kHierarchical: return "hierarchical";
    case AllReduceAlgo::kHierarchicalLeader: return "hierarchical_leader";
  }
  return "?";
}

Result<AllReduceAlgo> parseAllReduceAlgo(const std::string& name) {
  if (name.empty() || name == "auto") return AllReduceAlgo::kAuto;
  if (name == "ring") return AllReduceAlgo::kRing;
  if (name == "tree") return AllReduceAlgo::kTree;
  if (name == "halving_doubling" || name == "hd" || name == "rabenseifner") {
    return AllReduceAlgo::kHalvingDoubling;
  }
  if (name == "shm") return AllReduceAlgo::kShm;
  if (name == "hierarchical" || name == "hier") return AllReduceAlgo::kHierarchical;
  if (name == "hierarchical_leader" || name == "leader") {
    return AllReduceAlgo::kHierarchicalLeader;
  }
  return invalidArgument("unknown all-reduce algorithm '" + name +
                         "'; valid: auto, ring, tree, halving_doubling (hd), shm, hierarchical "
                         "(hier), hierarchical_leader (leader)");
}

}  // namespace braid::detail
