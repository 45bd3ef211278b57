#include "topology/model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace braid::topo {

namespace {

struct KindName {
  NicKind kind;
  const char* name;
};
constexpr KindName kNicKinds[] = {
    {NicKind::kUnknown, "unknown"},   {NicKind::kLoopback, "loopback"},
    {NicKind::kEthernet, "ethernet"}, {NicKind::kInfiniband, "infiniband"},
    {NicKind::kVeth, "veth"},         {NicKind::kBridge, "bridge"},
    {NicKind::kVirtual, "virtual"},
};

// The chain of PCI addresses from `address` up to its root (inclusive of `address`).
std::vector<std::string> pciChain(const Host& host, const std::string& address) {
  std::vector<std::string> chain;
  std::string cur = address;
  while (!cur.empty() && chain.size() < 64) {
    const PciDevice* d = host.findPci(cur);
    if (d == nullptr) break;
    chain.push_back(cur);
    cur = d->parent;
  }
  return chain;
}

std::string domainBus(const std::string& address) {
  // "0000:3b:00.0" -> "0000:3b"
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

std::string fmtSpeed(int64_t mbps) {
  if (mbps < 0) return "speed ?";
  char buf[32];
  if (mbps >= 1000 && mbps % 1000 == 0) {
    snprintf(buf, sizeof(buf), "%lld Gbit/s", static_cast<long long>(mbps / 1000));
  } else {
    snprintf(buf, sizeof(buf), "%lld Mbit/s", static_cast<long long>(mbps));
  }
  return buf;
}

std::string fmtLink(const Link& l) {
  char buf[96];
  std::string bw = l.bandwidthGbps < 0 ? "? Gbit/s" : "";
  if (l.bandwidthGbps >= 0) {
    snprintf(buf, sizeof(buf), "%g Gbit/s", l.bandwidthGbps);
    bw = buf;
  }
  std::string lat = "? us";
  if (l.latencyUs >= 0) {
    snprintf(buf, sizeof(buf), "%g us", l.latencyUs);
    lat = buf;
  }
  return l.from + " <-> " + l.to + " (" + (l.kind.empty() ? "link" : l.kind) + ", " + bw + ", " +
         lat + ")";
}

}  // namespace

const char* nicKindName(NicKind kind) {
  for (const KindName& k : kNicKinds) {
    if (k.kind == kind) return k.name;
  }
  return "unknown";
}

bool parseNicKind(const std::string& name, NicKind* out) {
  for (const KindName& k : kNicKinds) {
    if (name == k.name) {
      *out = k.kind;
      return true;
    }
  }
  return false;
}

int Host::numCpus() const {
  int n = 0;
  for (const Core& c : cores) n += static_cast<int>(c.cpus.size());
  if (n == 0) {
    for (const NumaNode& node : numaNodes) n += static_cast<int>(node.cpus.size());
  }
  return n;
}

const Nic* Host::findNic(const std::string& nicName) const {
  for (const Nic& n : nics) {
    if (n.name == nicName) return &n;
  }
  return nullptr;
}

const PciDevice* Host::findPci(const std::string& address) const {
  for (const PciDevice& d : pci) {
    if (d.address == address) return &d;
  }
  return nullptr;
}

const Host* Topology::findHost(const std::string& hostName) const {
  for (const Host& h : hosts) {
    if (h.name == hostName) return &h;
  }
  return nullptr;
}

int pciDistance(const Host& host, const std::string& a, const std::string& b) {
  if (host.findPci(a) == nullptr || host.findPci(b) == nullptr) return -1;
  if (a == b) return 0;
  const std::vector<std::string> ca = pciChain(host, a);
  const std::vector<std::string> cb = pciChain(host, b);
  // Nearest common upstream bridge; the number of bridges crossed decides PIX vs PXB.
  for (size_t i = 0; i < ca.size(); ++i) {
    auto it = std::find(cb.begin(), cb.end(), ca[i]);
    if (it != cb.end()) {
      const size_t hops = i + static_cast<size_t>(it - cb.begin());
      return hops <= 2 ? 1 : 2;
    }
  }
  // No common bridge: both hang below a host bridge. Same root bus = same root complex (PHB);
  // else compare NUMA nodes.
  if (domainBus(ca.back()) == domainBus(cb.back())) return 3;
  const PciDevice* da = host.findPci(a);
  const PciDevice* db = host.findPci(b);
  if (da->numa >= 0 && da->numa == db->numa) return 3;
  return 4;
}

bool parseCpuList(const std::string& text, std::vector<int>* out) {
  out->clear();
  if (text.empty()) return true;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    const std::string part =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (part.empty()) return false;
    const char* p = part.c_str();
    char* end = nullptr;
    // CPU numbers fit an int (and strtol's LONG_MAX on overflow does not).
    constexpr long kMaxCpu = 1 << 24;
    const long lo = std::strtol(p, &end, 10);
    if (end == p || lo < 0 || lo > kMaxCpu) return false;
    long hi = lo;
    if (*end == '-') {
      const char* q = end + 1;
      hi = std::strtol(q, &end, 10);
      if (end == q || hi < lo || hi > kMaxCpu) return false;
    }
    if (*end != '\0' || hi - lo > 1 << 20) return false;
    for (long c = lo; c <= hi; ++c) out->push_back(static_cast<int>(c));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  return true;
}

std::string describe(const Topology& t) {
  std::string s;
  char buf[256];
  s += "topology from " + (t.source.empty() ? std::string("?") : t.source) + ": " +
       std::to_string(t.hosts.size()) + " host(s)\n";
  for (const Host& h : t.hosts) {
    s += "host " + h.name + (h.id.empty() ? "" : " (id " + h.id + ")") + "\n";
    snprintf(buf, sizeof(buf), "  %zu socket(s), %zu NUMA node(s), %zu core(s), %d CPU(s)\n",
             h.sockets.size(), h.numaNodes.size(), h.cores.size(), h.numCpus());
    s += buf;
    for (const Socket& so : h.sockets) {
      s += "  socket " + std::to_string(so.id) + ": " + (so.model.empty() ? "?" : so.model) + "\n";
    }
    for (const NumaNode& n : h.numaNodes) {
      s += "  numa " + std::to_string(n.id) + ": cpus " + formatCpuList(n.cpus);
      if (n.memoryBytes >= 0) {
        snprintf(buf, sizeof(buf), ", %.1f GiB", static_cast<double>(n.memoryBytes) / (1 << 30));
        s += buf;
      }
      s += "\n";
    }
    for (const Nic& n : h.nics) {
      s += "  nic " + n.name + ": " + nicKindName(n.kind) + ", " + (n.up ? "up" : "down") + ", " +
           fmtSpeed(n.speedMbps);
      if (n.mtu > 0) s += ", mtu " + std::to_string(n.mtu);
      if (!n.driver.empty()) s += ", driver " + n.driver;
      if (!n.pciPath.empty()) s += ", pci " + n.pciPath;
      if (n.numa >= 0) s += ", numa " + std::to_string(n.numa);
      for (const std::string& a : n.addresses) s += ", " + a;
      s += "\n";
    }
    for (const Gpu& g : h.gpus) {
      s += "  gpu " + std::to_string(g.index) + ": " + (g.name.empty() ? "?" : g.name) + ", pci " +
           g.pciPath;
      if (g.numa >= 0) s += ", numa " + std::to_string(g.numa);
      s += "\n";
    }
    snprintf(buf, sizeof(buf), "  %zu PCI function(s)\n", h.pci.size());
    s += buf;
    for (const PciDevice& d : h.pci) {
      snprintf(buf, sizeof(buf), "    pci %s class 0x%06x %04x:%04x%s%s\n", d.address.c_str(),
               d.classCode, d.vendor, d.device, d.parent.empty() ? "" : " below ",
               d.parent.c_str());
      s += buf;
    }
    for (const Link& l : h.links) s += "  link " + fmtLink(l) + "\n";
  }
  for (const Link& l : t.links) s += "link " + fmtLink(l) + "\n";
  return s;
}

}  // namespace braid::topo
