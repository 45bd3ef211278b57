// Choosing where the local topology comes from: BRAID_TOPO_FILE when set (an injected topology),
// else hwloc (when built with it) completed by sysfs, else sysfs alone.
#pragma once

#include <string>

#include "braid/status.h"
#include "topology/model.h"

namespace braid::topo {

/// Where detectTopology looks: "auto" (the order above), "sysfs", "hwloc" or "file" (reads
/// BRAID_TOPO_FILE, an error when unset).
Result<Topology> detectTopology(const std::string& method = "auto");

/// The host of `topology` that is this machine: the one named like this host, else the only one;
/// null when neither applies.
const Host* localHost(const Topology& topology);

}  // namespace braid::topo
