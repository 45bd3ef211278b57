// braid-tune simulate: what braid would choose on a described fabric, without running it.
//
// The fabric (a topology file, a calibration file and/or flags) becomes a FabricModel and a
// Placement exactly as the communicator builds them at creation (hosts × ranks per host,
// host-major; a shared segment when ranks share a host and the transport is not tcp; the
// pipelining chunk and segment size from BRAID_CHUNK_BYTES and BRAID_SHM_SEGMENT_BYTES), and the
// communicator's own Selector, with its CostModel, decides every collective at every size. Nothing
// of the model is copied here: a change to an algorithm's cost or to the selector shows up in the
// simulation as it does in a job.
//
// simulate_nccl.cc prints what the NCCL tuner plugin (plugin/tuner/) would pick for NCCL-style
// inputs, through the plugin's own Tuner.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives/selector/cost_model.h"

namespace braid::tune {

/// The described fabric.
struct SimFabric {
  detail::FabricModel model;
  int hosts = 0;
  int ranksPerHost = 1;
  bool tcpOnly = false;  ///< BRAID_TRANSPORT=tcp: no intra-host segment
  size_t chunkBytes = 1u << 20;
  size_t segmentHalfBytes = 4u << 20;
  std::string origin;  ///< where the numbers came from, for the header
};

/// The placement of `hosts` hosts of the fabric's ranks per host, as the communicator builds it.
detail::Placement placementOf(const SimFabric& fabric, int hosts);

/// `braid-tune simulate ...` (argv[0] is "simulate"); returns the exit code (2: usage error).
int simulateMain(int argc, char** argv);

/// What the NCCL tuner plugin picks, for every node count and GPUs per node of the lists and
/// every size: printed as tables on `out`, and as a JSON array (the text of "nccl_tuner") in
/// *json when json is not null. The tuner is created as NCCL creates it (Tuner::create reads
/// BRAID_TUNER_* and BRAID_TUNING_FILE from the environment).
void ncclTunerTables(const std::vector<int>& nodes, const std::vector<int>& gpusPerNode,
                     const std::vector<size_t>& sizes, FILE* out, std::string* json);

/// A JSON string literal of s.
std::string jsonString(const std::string& s);

}  // namespace braid::tune
