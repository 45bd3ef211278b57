#include "topology/detect.h"

#include <limits.h>
#include <unistd.h>

#include "core/log.h"
#include "core/params.h"
#include "topology/hwloc.h"
#include "topology/sysfs.h"
#include "topology/topology_file.h"

namespace braid::topo {
namespace {

Result<Topology> fromFile() {
  const std::string path = paramString("BRAID_TOPO_FILE");
  if (path.empty()) {
    return invalidArgument("topology source 'file' needs BRAID_TOPO_FILE=<path>");
  }
  Result<Topology> t = readTopologyFile(path);
  if (!t.isOk()) return t.status().withContext("BRAID_TOPO_FILE");
  return t;
}

Topology single(Host host, const char* source) {
  Topology t;
  t.hosts.push_back(std::move(host));
  t.source = source;
  return t;
}

// hwloc's CPU, NUMA and PCI view, sysfs's NICs (speeds, addresses, drivers) and GPUs; NICs that
// sysfs does not place on PCI take hwloc's placement.
Host merge(Host sysfs, const Host& hw) {
  if (!hw.sockets.empty()) sysfs.sockets = hw.sockets;
  if (!hw.numaNodes.empty()) sysfs.numaNodes = hw.numaNodes;
  if (!hw.cores.empty()) sysfs.cores = hw.cores;
  if (!hw.pci.empty()) sysfs.pci = hw.pci;
  for (Nic& n : sysfs.nics) {
    const Nic* h = hw.findNic(n.name);
    if (h == nullptr) continue;
    if (n.pciPath.empty()) n.pciPath = h->pciPath;
    if (n.numa < 0) n.numa = h->numa;
  }
  for (Gpu& g : sysfs.gpus) {
    const PciDevice* d = sysfs.findPci(g.pciPath);
    if (g.numa < 0 && d != nullptr) g.numa = d->numa;
  }
  return sysfs;
}

}  // namespace

Result<Topology> detectTopology(const std::string& method) {
  if (method == "file") return fromFile();
  if (method == "auto" && !paramString("BRAID_TOPO_FILE").empty()) {
    BRAID_INFO("topology injected from BRAID_TOPO_FILE=%s", paramString("BRAID_TOPO_FILE").c_str());
    return fromFile();
  }
  if (method == "hwloc") {
    BRAID_ASSIGN_OR_RETURN(Host h, detectHwloc());
    return single(std::move(h), "hwloc");
  }
  if (method != "auto" && method != "sysfs") {
    return invalidArgument("unknown topology source '" + method +
                           "' (expected auto, sysfs, hwloc or file)");
  }
  BRAID_ASSIGN_OR_RETURN(Host sys, detectSysfs());
  if (method == "sysfs" || !hwlocAvailable()) return single(std::move(sys), "sysfs");
  Result<Host> hw = detectHwloc();
  if (!hw.isOk()) {
    BRAID_WARN("hwloc topology detection failed (%s); using sysfs alone",
               hw.status().toString().c_str());
    return single(std::move(sys), "sysfs");
  }
  return single(merge(std::move(sys), hw.value()), "hwloc+sysfs");
}

const Host* localHost(const Topology& topology) {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof(name) - 1);
  if (const Host* h = topology.findHost(name)) return h;
  return topology.hosts.size() == 1 ? &topology.hosts[0] : nullptr;
}

}  // namespace braid::topo
