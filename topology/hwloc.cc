#include "topology/hwloc.h"

#if BRAID_WITH_HWLOC
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#endif

namespace braid::topo {

#if BRAID_WITH_HWLOC
namespace {

// In C++ the attribute structs are nested in the union.
using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;

std::string pciAddress(const PciAttr& a) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
  return buf;
}

std::vector<int> cpusOf(hwloc_const_cpuset_t set) {
  std::vector<int> cpus;
  int i;
  hwloc_bitmap_foreach_begin(i, set) { cpus.push_back(i); }
  hwloc_bitmap_foreach_end();
  return cpus;
}

// The NUMA node of an I/O object: its first non-I/O ancestor's node when there is exactly one.
int numaOfIo(hwloc_topology_t t, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, obj);
  if (anc == nullptr || anc->nodeset == nullptr || hwloc_bitmap_weight(anc->nodeset) != 1) {
    return -1;
  }
  return hwloc_bitmap_first(anc->nodeset);
}

// The PCI address of the nearest PCI-to-PCI bridge above `obj` ("" below a host bridge).
std::string pciParent(hwloc_obj_t obj) {
  for (hwloc_obj_t p = obj->parent; p != nullptr; p = p->parent) {
    if (p->type == HWLOC_OBJ_BRIDGE) {
      if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
        return pciAddress(p->attr->bridge.upstream.pci);
      }
      return "";
    }
    if (p->type == HWLOC_OBJ_PCI_DEVICE) return pciAddress(p->attr->pcidev);
    if (!hwloc_obj_type_is_io(p->type)) return "";
  }
  return "";
}

// The PCI function an OS device hangs from ("" when none).
std::string pciOfOsdev(hwloc_obj_t obj) {
  for (hwloc_obj_t p = obj->parent; p != nullptr; p = p->parent) {
    if (p->type == HWLOC_OBJ_PCI_DEVICE) return pciAddress(p->attr->pcidev);
    if (!hwloc_obj_type_is_io(p->type)) break;
  }
  return "";
}

PciDevice pciDevice(hwloc_topology_t t, hwloc_obj_t obj, const PciAttr& a) {
  PciDevice d;
  d.address = pciAddress(a);
  d.parent = pciParent(obj);
  d.classCode = static_cast<uint32_t>(a.class_id) << 8;  // hwloc drops the programming interface
  d.vendor = a.vendor_id;
  d.device = a.device_id;
  d.numa = numaOfIo(t, obj);
  return d;
}

}  // namespace

bool hwlocAvailable() { return true; }

Result<Host> detectHwloc() {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) return systemError("hwloc_topology_init failed");
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return systemError("hwloc_topology_load failed");
  }
  Host host;
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof(name) - 1);
  host.name = name;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, o));) {
    Socket s;
    s.id = static_cast<int>(o->os_index);
    const char* model = hwloc_obj_get_info_by_name(o, "CPUModel");
    if (model != nullptr) s.model = model;
    host.sockets.push_back(s);
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o));) {
    NumaNode n;
    n.id = static_cast<int>(o->os_index);
    n.cpus = cpusOf(o->cpuset);
    n.memoryBytes = static_cast<int64_t>(o->attr->numanode.local_memory);
    host.numaNodes.push_back(n);
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_CORE, o));) {
    Core c;
    c.id = static_cast<int>(o->os_index);
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, o);
    c.socket = pkg ? static_cast<int>(pkg->os_index) : 0;
    c.cpus = cpusOf(o->cpuset);
    for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n));) {
      if (hwloc_bitmap_isincluded(o->cpuset, n->cpuset)) c.numa = static_cast<int>(n->os_index);
    }
    host.cores.push_back(c);
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_bridge(t, o));) {
    if (o->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) continue;  // host bridges
    host.pci.push_back(pciDevice(t, o, o->attr->bridge.upstream.pci));
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(t, o));) {
    host.pci.push_back(pciDevice(t, o, o->attr->pcidev));
  }
  std::sort(host.pci.begin(), host.pci.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t, o));) {
    const auto type = o->attr->osdev.type;
    if (type == HWLOC_OBJ_OSDEV_NETWORK || type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      Nic nic;
      nic.name = o->name ? o->name : "";
      nic.kind = type == HWLOC_OBJ_OSDEV_OPENFABRICS ? NicKind::kInfiniband : NicKind::kEthernet;
      nic.pciPath = pciOfOsdev(o);
      nic.numa = numaOfIo(t, o);
      const char* mac = hwloc_obj_get_info_by_name(o, "Address");
      if (mac != nullptr && type == HWLOC_OBJ_OSDEV_NETWORK) nic.mac = mac;
      host.nics.push_back(nic);
    }
  }
  for (const PciDevice& d : host.pci) {
    if ((d.classCode >> 16) != 0x03 || (d.vendor != 0x10de && d.vendor != 0x1002)) continue;
    Gpu g;
    g.index = static_cast<int>(host.gpus.size());
    g.pciPath = d.address;
    g.numa = d.numa;
    host.gpus.push_back(g);
  }
  hwloc_topology_destroy(t);
  return host;
}

#else  // !BRAID_WITH_HWLOC

bool hwlocAvailable() { return false; }

Result<Host> detectHwloc() {
  return invalidUsage(
      "this braid was built without hwloc (BRAID_WITH_HWLOC=OFF or libhwloc-dev "
      "not found); use the sysfs detector");
}

#endif

}  // namespace braid::topo
