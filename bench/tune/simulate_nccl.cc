// braid-tune simulate --nccl-tuner: what the NCCL tuner plugin (NCCL_TUNER_PLUGIN=braid) picks
// for NCCL's inputs (nNodes, nRanks, collective, bytes), through the plugin's own Tuner, created
// as the plugin's init creates it (from BRAID_TUNER_MODEL, BRAID_TUNER_NET_*, BRAID_TUNER_FILE,
// BRAID_TUNING_FILE, BRAID_TUNER_CHANNEL_BYTES in the environment).
//
// NCCL hands the tuner its own cost table (float[7][3]: algorithm × protocol, -1 where NCCL rules
// a pair out). The simulation hands it a table in which every entry is allowed at the same cost,
// so the algorithm and channel count shown are the tuner's; the protocol, which the tuner takes
// as NCCL's cheapest within the chosen row, is NCCL's business and not shown.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/tune/simulate.h"
#include "core/params.h"
#include "plugin/nccl_abi.h"
#include "plugin/tuner/model.h"

namespace braid::tune {
namespace {

namespace tuner = braid::plugin::tuner;
namespace abi = braid::abi;

struct Pick {
  int algo = -1;
  int channels = 0;
  const char* source = "none";
  bool operator==(const Pick& o) const {
    return algo == o.algo && channels == o.channels && std::string(source) == o.source;
  }
};

// Every collective's picks at every size for one (nodes, ranks).
std::vector<Pick> picksFor(tuner::Tuner& t, const std::vector<size_t>& sizes) {
  std::vector<Pick> out;
  for (int coll = 0; coll < 5; ++coll) {
    for (size_t b : sizes) {
      float table[abi::kNumAlgorithms * abi::kNumProtocols];
      for (float& x : table) x = 1.0f;
      int channels = 0;
      const tuner::Decision d =
          t.getCollInfo(coll, b, table, abi::kNumAlgorithms, abi::kNumProtocols, &channels);
      out.push_back({d.algo, d.channels, d.source});
    }
  }
  return out;
}

std::string gpuRange(const std::vector<int>& g) {
  std::string s;
  for (size_t i = 0; i < g.size();) {
    size_t j = i;
    while (j + 1 < g.size() && g[j + 1] == g[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(g[i]) +
         (j > i ? "-" + std::to_string(g[j]) : std::string());
    i = j + 1;
  }
  return s;
}

}  // namespace

void ncclTunerTables(const std::vector<int>& nodes, const std::vector<int>& gpusPerNode,
                     const std::vector<size_t>& sizes, FILE* out, std::string* json) {
  if (out != nullptr) {
    // The link the tuner prices with, read back from its own model (ring on 2 nodes:
    // 2α + n/B).
    const auto two = tuner::Tuner::create(2, 2);
    const double alpha = two->ringUs(0) / 2;
    const double mbps = (1 << 20) / (two->ringUs(1 << 20) - 2 * alpha);
    std::fprintf(
        out,
        "\n# NCCL tuner plugin (NCCL_TUNER_PLUGIN=braid), as plugin/tuner/ decides: model "
        "alpha %.2f us, %.0f MB/s (BRAID_TUNER_MODEL='%s', BRAID_TUNER_NET_LATENCY_NS=%lld, "
        "BRAID_TUNER_NET_GBITS=%lld); rules: BRAID_TUNER_FILE='%s', BRAID_TUNING_FILE='%s'\n"
        "# ring/tree: the tuner's costs (us) of NCCL's schedules over the nodes; pick: the "
        "entry it lowers to 0 in NCCL's cost table (NCCL then takes its cheapest protocol "
        "of that row); channels: set when small (0 = NCCL's count); none: no opinion\n",
        alpha, mbps, paramString("BRAID_TUNER_MODEL").c_str(),
        static_cast<long long>(paramInt("BRAID_TUNER_NET_LATENCY_NS")),
        static_cast<long long>(paramInt("BRAID_TUNER_NET_GBITS")),
        paramString("BRAID_TUNER_FILE").c_str(), paramString("BRAID_TUNING_FILE").c_str());
  }
  std::string js = "[";
  bool firstJs = true;
  for (int n : nodes) {
    // GPUs per node with the same picks are printed once (the model depends on nodes only;
    // rules may also match nRanks).
    std::vector<std::pair<std::vector<int>, std::vector<Pick>>> groups;
    std::vector<std::unique_ptr<tuner::Tuner>> tuners;
    for (int g : gpusPerNode) {
      const size_t ranks = static_cast<size_t>(n) * static_cast<size_t>(g);
      auto t = tuner::Tuner::create(ranks, static_cast<size_t>(n));
      std::vector<Pick> picks = picksFor(*t, sizes);
      for (int coll = 0; coll < 5; ++coll) {
        for (size_t i = 0; i < sizes.size(); ++i) {
          const Pick& pk = picks[static_cast<size_t>(coll) * sizes.size() + i];
          js += std::string(firstJs ? "\n" : ",\n") + "{\"nodes\":" + std::to_string(n) +
                ",\"gpus_per_node\":" + std::to_string(g) + ",\"ranks\":" + std::to_string(ranks) +
                ",\"collective\":" + jsonString(tuner::collName(coll)) +
                ",\"bytes\":" + std::to_string(sizes[i]) +
                ",\"ring_us\":" + std::to_string(t->ringUs(sizes[i])) +
                ",\"tree_us\":" + std::to_string(t->treeUs(sizes[i])) + ",\"algorithm\":" +
                (pk.algo >= 0 ? jsonString(tuner::algoName(pk.algo)) : std::string("null")) +
                ",\"channels\":" + std::to_string(pk.channels) +
                ",\"source\":" + jsonString(pk.source) + "}";
          firstJs = false;
        }
      }
      bool merged = false;
      for (auto& [gs, ps] : groups) {
        if (ps == picks) {
          gs.push_back(g);
          merged = true;
          break;
        }
      }
      if (!merged) {
        groups.push_back({{g}, picks});
        tuners.push_back(std::move(t));
      }
    }
    if (out == nullptr) continue;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const auto& [gs, picks] = groups[gi];
      std::fprintf(out, "\n# %d node(s) x %s GPU(s) per node\n", n, gpuRange(gs).c_str());
      std::fprintf(out, "#%11s %12s %12s  %-14s %8s  %s\n", "bytes", "ring_us", "tree_us",
                   "allreduce", "channels", "source");
      const size_t ar = static_cast<size_t>(abi::kFuncAllReduce) * sizes.size();
      for (size_t i = 0; i < sizes.size(); ++i) {
        const Pick& pk = picks[ar + i];
        std::fprintf(out, "%12zu %12.2f %12.2f  %-14s %8d  %s\n", sizes[i],
                     tuners[gi]->ringUs(sizes[i]), tuners[gi]->treeUs(sizes[i]),
                     pk.algo >= 0 ? tuner::algoName(pk.algo) : "none", pk.channels, pk.source);
      }
      // Other collectives: only where a rule gives the tuner an opinion.
      for (int coll = 0; coll < 5; ++coll) {
        if (coll == abi::kFuncAllReduce) continue;
        for (size_t i = 0; i < sizes.size(); ++i) {
          const Pick& pk = picks[static_cast<size_t>(coll) * sizes.size() + i];
          if (pk.algo < 0) continue;
          std::fprintf(out, "#   %s %zu B: %s channels %d (%s)\n", tuner::collName(coll), sizes[i],
                       tuner::algoName(pk.algo), pk.channels, pk.source);
        }
      }
    }
  }
  if (json != nullptr) *json = js + "]";
}

}  // namespace braid::tune
