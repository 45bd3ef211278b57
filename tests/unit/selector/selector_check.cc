// Multi-rank selector checks, one scenario per launch (braid-run -n N -- selector_check S):
//   override: BRAID_ALGO=allreduce:tree;broadcast:tree is what the communicator runs, and the
//             results are right;
//   explain:  BRAID_EXPLAIN=1 logs one decision line per distinct decision;
//   unknown:  BRAID_ALGO=allreduce:bogus fails communicator creation, listing the valid names.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "braid/comm.hpp"

namespace {

constexpr braid::Collective kAllReduce = braid::Collective::kAllReduce;
int failures = 0;

void check(bool ok, const std::string& what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "selector_check rank %d: FAILED: %s\n", rank, what.c_str());
    ++failures;
  }
}

// Sums of rank+1 over p ranks, in a few sizes (one algorithm-crossing sweep).
void checkAllReduce(braid::Communicator& c) {
  const int p = c.size();
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{300007}}) {
    std::vector<float> v(count, static_cast<float>(c.rank() + 1));
    braid::Status s = c.allReduce(v.data(), v.data(), count, braid::DataType::kFloat32,
                                  braid::ReduceOp::kSum);
    check(s.isOk(), "allReduce of " + std::to_string(count) + ": " + s.toString(), c.rank());
    const float want = static_cast<float>(p * (p + 1) / 2);
    for (size_t i = 0; i < count; ++i) {
      if (v[i] != want) {
        check(false, "allReduce of " + std::to_string(count) + " wrong at " + std::to_string(i),
              c.rank());
        break;
      }
    }
  }
  std::vector<int32_t> b(777, c.rank() == 1 % p ? 42 : 0);
  braid::Status s = c.broadcast(b.data(), b.data(), b.size(), braid::DataType::kInt32, 1 % p);
  check(s.isOk() && b[0] == 42 && b[776] == 42, "broadcast: " + s.toString(), c.rank());
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t countOf(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "override";
  if (scenario == "override") {
    setenv("BRAID_ALGO", "allreduce:tree;broadcast:tree", 1);
    auto comm = braid::Communicator::createFromEnvironment();
    if (!comm) {
      std::fprintf(stderr, "selector_check: %s\n", comm.status().toString().c_str());
      return 1;
    }
    braid::Communicator& c = **comm;
    for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{64} << 20}) {
      check(c.algorithmFor(kAllReduce, bytes) == "tree",
            "BRAID_ALGO=allreduce:tree but " + std::to_string(bytes) + " B uses " +
                c.algorithmFor(kAllReduce, bytes),
            c.rank());
    }
    checkAllReduce(c);
    // The API still overrides the environment, and "" returns to it.
    check(c.setAlgorithm(kAllReduce, "ring").isOk(), "setAlgorithm(allreduce, ring)", c.rank());
    check(c.algorithmFor(kAllReduce, 8) == "ring", "API force ignored", c.rank());
    check(c.setAlgorithm(kAllReduce, "").isOk(), "setAlgorithm(allreduce, '')", c.rank());
    check(c.algorithmFor(kAllReduce, 8) == "tree", "BRAID_ALGO lost after the API reset", c.rank());
    check(c.predictedUs(kAllReduce, 1 << 20, "tree") > 0, "no prediction for tree", c.rank());
  } else if (scenario == "explain") {
    setenv("BRAID_EXPLAIN", "1", 1);
    char path[] = "/tmp/braid-selector-check-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return 1;
    const int saved = dup(2);
    dup2(fd, 2);
    int rank = -1;
    {
      auto comm = braid::Communicator::createFromEnvironment();
      if (comm) {
        rank = (*comm)->rank();
        checkAllReduce(**comm);
        checkAllReduce(**comm);  // the same decisions again: not logged again
        (void)(*comm)->barrier();
      }
    }
    dup2(saved, 2);
    close(fd);
    const std::string log = readFile(path);
    unlink(path);
    std::fputs(log.c_str(), stderr);
    check(rank >= 0, "communicator creation failed", rank);
    check(countOf(log, "explain: allreduce 4000 B on ") == 1,
          "expected one decision line for 4000 B, got " +
              std::to_string(countOf(log, "explain: allreduce 4000 B on ")),
          rank);
    check(log.find("candidates ring=") != std::string::npos, "no candidates listed", rank);
    check(log.find("(model; ") != std::string::npos, "reason 'model' missing", rank);
  } else if (scenario == "unknown") {
    setenv("BRAID_ALGO", "allreduce:bogus", 1);
    auto comm = braid::Communicator::createFromEnvironment();
    check(!comm.isOk(), "BRAID_ALGO=allreduce:bogus was accepted", -1);
    if (!comm.isOk()) {
      const std::string msg = comm.status().message();
      check(msg.find("unknown allreduce algorithm 'bogus'; valid: ring, tree, halving_doubling, "
                     "shm, hierarchical, hierarchical_leader") != std::string::npos,
            "error does not list the valid names: " + msg, -1);
    }
  } else {
    std::fprintf(stderr, "selector_check: unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  if (failures == 0) std::printf("selector_check %s: OK\n", scenario.c_str());
  return failures == 0 ? 0 : 1;
}
