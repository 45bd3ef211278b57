// The topology file: a line-oriented text form of topo::Topology, written by
// `braid-info topo --write FILE` and read back when BRAID_TOPO_FILE names it (to inject a
// topology, e.g. a cluster's on a laptop, or a test fabric's). The schema is in
// docs/topology-file.md. Reading is strict: an unknown record or key, a missing required key, a
// repeated key or a malformed number is an error naming the file and the line.
#pragma once

#include <string>

#include "braid/status.h"
#include "topology/model.h"

namespace braid::topo {

/// The text of `topology` in the file format (version 1). Parsing it gives `topology` back
/// (source aside).
std::string formatTopology(const Topology& topology);

/// Parses file text; `fileName` only labels errors ("<fileName>:<line>: ..."). The result's
/// source is "file:<fileName>".
Result<Topology> parseTopology(const std::string& text, const std::string& fileName);

/// Reads and parses a file.
Result<Topology> readTopologyFile(const std::string& path);

/// Writes formatTopology(topology) to `path` (through a temporary file and a rename, so readers
/// never see half a file).
Status writeTopologyFile(const Topology& topology, const std::string& path);

}  // namespace braid::topo
