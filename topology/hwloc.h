// The hwloc detector (built when BRAID_WITH_HWLOC): sockets, NUMA nodes, cores and the PCI tree
// from hwloc, with NICs and GPUs from hwloc's OS devices. hwloc knows neither link speeds nor
// addresses; detect.cc completes its NICs from the sysfs detector.
#pragma once

#include "braid/status.h"
#include "topology/model.h"

namespace braid::topo {

/// True when this build has the hwloc detector.
bool hwlocAvailable();

/// Detects this host with hwloc; kInvalidUsage when built without it.
Result<Host> detectHwloc();

}  // namespace braid::topo
