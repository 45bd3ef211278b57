// Topology file reader and writer. One record per line:
//
//   braid-topology 1                      (header, first record; the format version)
//   <record> key=value key="quoted value" ...
//
// Records: host, socket, numa, core, pci, nic, gpu and link belong to the last `host`; a
// `fabric-link` belongs to the whole topology. '#' starts a comment outside quotes. See
// docs/topology-file.md for every key.
#include "topology/topology_file.h"

#include <errno.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace braid::topo {
namespace {

constexpr int kVersion = 1;

// ---------------------------------------------------------------------------------------------
// Writing

bool needsQuotes(const std::string& v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '\t' || c == '"' || c == '#' || c == '=' || c == '\\' ||
        static_cast<unsigned char>(c) < 0x20) {
      return true;
    }
  }
  return false;
}

std::string quote(const std::string& v) {
  if (!needsQuotes(v)) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Shortest text that reads back as exactly `v`.
std::string fmtDouble(double v) {
  char buf[40];
  for (int prec = 6; prec <= 17; ++prec) {
    snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string hex(uint32_t v, int digits) {
  char buf[16];
  snprintf(buf, sizeof(buf), "0x%0*x", digits, v);
  return buf;
}

// A line under construction: "record k=v k=v".
class LineWriter {
 public:
  explicit LineWriter(const char* record) : line_(record) {}
  LineWriter& kv(const char* key, const std::string& value) {
    line_ += ' ';
    line_ += key;
    line_ += '=';
    line_ += quote(value);
    return *this;
  }
  LineWriter& kvIf(const char* key, const std::string& value) {
    return value.empty() ? *this : kv(key, value);
  }
  LineWriter& kvInt(const char* key, int64_t value) { return kv(key, std::to_string(value)); }
  // -1 means unknown and is left out.
  LineWriter& kvKnown(const char* key, int64_t value) {
    return value < 0 ? *this : kvInt(key, value);
  }
  LineWriter& kvKnownDouble(const char* key, double value) {
    return value < 0 ? *this : kv(key, fmtDouble(value));
  }
  std::string str() const { return line_ + "\n"; }

 private:
  std::string line_;
};

void writeLink(std::string& out, const char* record, const Link& l) {
  out += LineWriter(record)
             .kv("from", l.from)
             .kv("to", l.to)
             .kvIf("kind", l.kind)
             .kvKnownDouble("gbps", l.bandwidthGbps)
             .kvKnownDouble("latency_us", l.latencyUs)
             .str();
}

// ---------------------------------------------------------------------------------------------
// Reading

struct Field {
  std::string key;
  std::string value;
};

struct ParsedLine {
  std::string record;
  std::vector<Field> fields;
};

class Parser {
 public:
  Parser(std::string fileName) : fileName_(std::move(fileName)) {}

  Status error(int line, const std::string& what) const {
    return invalidArgument(fileName_ + ":" + std::to_string(line) + ": " + what);
  }

  // Splits one line into a record word and key=value fields; an error names the line when it is
  // malformed. An empty or comment-only line gives record "".
  Status tokenize(const std::string& text, int line, ParsedLine* out) const {
    out->record.clear();
    out->fields.clear();
    size_t i = 0;
    const size_t n = text.size();
    auto skipBlanks = [&] {
      while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) ++i;
    };
    skipBlanks();
    if (i == n || text[i] == '#') return Status::ok();
    while (i < n && text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '#') {
      out->record += text[i++];
    }
    while (true) {
      skipBlanks();
      if (i == n || text[i] == '#') break;
      Field f;
      while (i < n && text[i] != '=' && text[i] != ' ' && text[i] != '\t' && text[i] != '#') {
        f.key += text[i++];
      }
      if (i == n || text[i] != '=') {
        return error(line, "'" + f.key + "' is not of the form key=value");
      }
      ++i;  // '='
      if (f.key.empty()) return error(line, "'=' without a key");
      if (i < n && text[i] == '"') {
        ++i;
        bool closed = false;
        while (i < n) {
          char c = text[i++];
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\\') {
            if (i == n) break;
            char e = text[i++];
            f.value += e == 'n' ? '\n' : e == 't' ? '\t' : e;
          } else {
            f.value += c;
          }
        }
        if (!closed) return error(line, "unterminated quoted value of '" + f.key + "'");
        if (i < n && text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '#') {
          return error(line, "text right after the quoted value of '" + f.key + "'");
        }
      } else {
        while (i < n && text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '#') {
          if (text[i] == '"') return error(line, "stray '\"' in the value of '" + f.key + "'");
          f.value += text[i++];
        }
      }
      out->fields.push_back(std::move(f));
    }
    return Status::ok();
  }

  Result<Topology> parse(const std::string& text) {
    Topology topo;
    topo.source = "file:" + fileName_;
    std::istringstream in(text);
    std::string lineText;
    int line = 0;
    bool sawHeader = false;
    Host* host = nullptr;
    while (std::getline(in, lineText)) {
      ++line;
      if (!sawHeader) {
        // "braid-topology <version>": bare words, not key=value.
        const std::string noComment = lineText.substr(0, lineText.find('#'));
        std::istringstream words(noComment);
        std::string word, version, extra;
        words >> word >> version >> extra;
        if (word.empty()) continue;
        if (word != "braid-topology") {
          return error(line, "expected the header 'braid-topology " + std::to_string(kVersion) +
                                 "', found '" + word + "'");
        }
        if (version != std::to_string(kVersion) || !extra.empty()) {
          return error(line, "unsupported topology file version '" + version +
                                 "' (this braid reads " + std::to_string(kVersion) + ")");
        }
        sawHeader = true;
        continue;
      }
      ParsedLine pl;
      BRAID_RETURN_IF_ERROR(tokenize(lineText, line, &pl));
      if (pl.record.empty()) continue;
      Fields f(this, line, pl);
      if (pl.record == "host") {
        topo.hosts.emplace_back();
        host = &topo.hosts.back();
        BRAID_RETURN_IF_ERROR(f.required("name", &host->name));
        BRAID_RETURN_IF_ERROR(f.optional("id", &host->id));
        BRAID_RETURN_IF_ERROR(f.done());
        for (size_t i = 0; i + 1 < topo.hosts.size(); ++i) {
          if (topo.hosts[i].name == host->name) {
            return error(line, "host '" + host->name + "' appears twice");
          }
        }
        continue;
      }
      if (pl.record == "fabric-link") {
        Link l;
        BRAID_RETURN_IF_ERROR(readLink(f, &l));
        topo.links.push_back(l);
        continue;
      }
      static const std::set<std::string> kHostRecords = {"socket", "numa", "core", "pci",
                                                         "nic",    "gpu",  "link"};
      if (kHostRecords.count(pl.record) == 0) {
        return error(line, "unknown record '" + pl.record +
                               "' (expected host, socket, numa, core, pci, nic, gpu, link or "
                               "fabric-link)");
      }
      if (host == nullptr) {
        return error(line, "'" + pl.record + "' before the first 'host' record");
      }
      if (pl.record == "socket") {
        Socket s;
        BRAID_RETURN_IF_ERROR(f.requiredInt("id", &s.id));
        BRAID_RETURN_IF_ERROR(f.optional("model", &s.model));
        BRAID_RETURN_IF_ERROR(f.done());
        host->sockets.push_back(s);
      } else if (pl.record == "numa") {
        NumaNode node;
        BRAID_RETURN_IF_ERROR(f.requiredInt("id", &node.id));
        BRAID_RETURN_IF_ERROR(f.optionalCpus("cpus", &node.cpus));
        BRAID_RETURN_IF_ERROR(f.optionalInt64("memory", &node.memoryBytes));
        BRAID_RETURN_IF_ERROR(f.done());
        host->numaNodes.push_back(node);
      } else if (pl.record == "core") {
        Core c;
        BRAID_RETURN_IF_ERROR(f.requiredInt("id", &c.id));
        BRAID_RETURN_IF_ERROR(f.requiredInt("socket", &c.socket));
        BRAID_RETURN_IF_ERROR(f.optionalInt("numa", &c.numa));
        BRAID_RETURN_IF_ERROR(f.optionalCpus("cpus", &c.cpus));
        BRAID_RETURN_IF_ERROR(f.done());
        host->cores.push_back(c);
      } else if (pl.record == "pci") {
        PciDevice d;
        int64_t cls = 0, vendor = 0, device = 0;
        BRAID_RETURN_IF_ERROR(f.required("addr", &d.address));
        BRAID_RETURN_IF_ERROR(f.optional("parent", &d.parent));
        BRAID_RETURN_IF_ERROR(f.optionalInt64("class", &cls, 0xffffff));
        BRAID_RETURN_IF_ERROR(f.optionalInt64("vendor", &vendor, 0xffff));
        BRAID_RETURN_IF_ERROR(f.optionalInt64("device", &device, 0xffff));
        BRAID_RETURN_IF_ERROR(f.optionalInt("numa", &d.numa));
        BRAID_RETURN_IF_ERROR(f.done());
        d.classCode = static_cast<uint32_t>(cls);
        d.vendor = static_cast<uint16_t>(vendor);
        d.device = static_cast<uint16_t>(device);
        host->pci.push_back(d);
      } else if (pl.record == "nic") {
        Nic nic;
        std::string kind, up;
        BRAID_RETURN_IF_ERROR(f.required("name", &nic.name));
        BRAID_RETURN_IF_ERROR(f.optional("kind", &kind));
        if (!kind.empty() && !parseNicKind(kind, &nic.kind)) {
          return error(line, "nic: unknown kind '" + kind +
                                 "' (expected unknown, loopback, ethernet, infiniband, veth, "
                                 "bridge or virtual)");
        }
        BRAID_RETURN_IF_ERROR(f.optionalInt64("speed_mbps", &nic.speedMbps));
        BRAID_RETURN_IF_ERROR(f.optional("pci", &nic.pciPath));
        BRAID_RETURN_IF_ERROR(f.repeated("addr", &nic.addresses));
        BRAID_RETURN_IF_ERROR(f.optional("mac", &nic.mac));
        BRAID_RETURN_IF_ERROR(f.optionalInt("mtu", &nic.mtu));
        BRAID_RETURN_IF_ERROR(f.optionalBool("up", &nic.up));
        BRAID_RETURN_IF_ERROR(f.optionalInt("numa", &nic.numa));
        BRAID_RETURN_IF_ERROR(f.optional("driver", &nic.driver));
        BRAID_RETURN_IF_ERROR(f.done());
        if (host->findNic(nic.name) != nullptr) {
          return error(line, "nic '" + nic.name + "' appears twice in host '" + host->name + "'");
        }
        host->nics.push_back(nic);
      } else if (pl.record == "gpu") {
        Gpu g;
        BRAID_RETURN_IF_ERROR(f.requiredInt("index", &g.index));
        BRAID_RETURN_IF_ERROR(f.optional("name", &g.name));
        BRAID_RETURN_IF_ERROR(f.optional("pci", &g.pciPath));
        BRAID_RETURN_IF_ERROR(f.optional("uuid", &g.uuid));
        BRAID_RETURN_IF_ERROR(f.optionalInt("numa", &g.numa));
        BRAID_RETURN_IF_ERROR(f.done());
        host->gpus.push_back(g);
      } else {  // link
        Link l;
        BRAID_RETURN_IF_ERROR(readLink(f, &l));
        host->links.push_back(l);
      }
    }
    if (!sawHeader) {
      return error(line == 0 ? 1 : line,
                   "empty topology file (expected the header 'braid-topology 1')");
    }
    return topo;
  }

 private:
  // The fields of one line, consumed key by key; done() rejects whatever is left.
  class Fields {
   public:
    Fields(const Parser* p, int line, const ParsedLine& pl) : p_(p), line_(line), pl_(pl) {}

    Status required(const char* key, std::string* out) {
      bool found = false;
      BRAID_RETURN_IF_ERROR(take(key, out, &found));
      if (!found) return p_->error(line_, pl_.record + ": missing required key '" + key + "'");
      if (out->empty()) return p_->error(line_, pl_.record + ": '" + key + "' is empty");
      return Status::ok();
    }
    Status optional(const char* key, std::string* out) {
      bool found = false;
      return take(key, out, &found);
    }
    Status repeated(const char* key, std::vector<std::string>* out) {
      for (size_t i = 0; i < pl_.fields.size(); ++i) {
        if (pl_.fields[i].key == key) {
          used_.insert(i);
          out->push_back(pl_.fields[i].value);
        }
      }
      return Status::ok();
    }
    Status requiredInt(const char* key, int* out) {
      std::string text;
      BRAID_RETURN_IF_ERROR(required(key, &text));
      return toInt(key, text, out);
    }
    Status optionalInt(const char* key, int* out) {
      std::string text;
      bool found = false;
      BRAID_RETURN_IF_ERROR(take(key, &text, &found));
      return found ? toInt(key, text, out) : Status::ok();
    }
    // Decimal or 0x hex, 0..max (or -1..max when max is the default: -1 means unknown).
    Status optionalInt64(const char* key, int64_t* out, int64_t max = INT64_MAX) {
      std::string text;
      bool found = false;
      BRAID_RETURN_IF_ERROR(take(key, &text, &found));
      if (!found) return Status::ok();
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(text.c_str(), &end, 0);
      const int64_t min = max == INT64_MAX ? -1 : 0;
      if (errno != 0 || end == text.c_str() || *end != '\0' || v < min || v > max) {
        return p_->error(line_,
                         pl_.record + ": '" + key + "=" + text + "' is not an integer in range");
      }
      *out = v;
      return Status::ok();
    }
    Status optionalDouble(const char* key, double* out) {
      std::string text;
      bool found = false;
      BRAID_RETURN_IF_ERROR(take(key, &text, &found));
      if (!found) return Status::ok();
      errno = 0;
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) {
        return p_->error(line_,
                         pl_.record + ": '" + key + "=" + text + "' is not a non-negative number");
      }
      *out = v;
      return Status::ok();
    }
    Status optionalBool(const char* key, bool* out) {
      std::string text;
      bool found = false;
      BRAID_RETURN_IF_ERROR(take(key, &text, &found));
      if (!found) return Status::ok();
      if (text == "1" || text == "true" || text == "yes") {
        *out = true;
      } else if (text == "0" || text == "false" || text == "no") {
        *out = false;
      } else {
        return p_->error(line_, pl_.record + ": '" + key + "=" + text + "' is not 0 or 1");
      }
      return Status::ok();
    }
    Status optionalCpus(const char* key, std::vector<int>* out) {
      std::string text;
      bool found = false;
      BRAID_RETURN_IF_ERROR(take(key, &text, &found));
      if (found && !parseCpuList(text, out)) {
        return p_->error(line_,
                         pl_.record + ": '" + key + "=" + text + "' is not a CPU list like 0-3,8");
      }
      return Status::ok();
    }
    Status done() const {
      for (size_t i = 0; i < pl_.fields.size(); ++i) {
        if (used_.count(i) == 0) {
          return p_->error(line_, pl_.record + ": unknown key '" + pl_.fields[i].key + "'");
        }
      }
      return Status::ok();
    }

   private:
    Status take(const char* key, std::string* out, bool* found) {
      *found = false;
      for (size_t i = 0; i < pl_.fields.size(); ++i) {
        if (pl_.fields[i].key != key) continue;
        if (*found) return p_->error(line_, pl_.record + ": key '" + key + "' appears twice");
        *found = true;
        *out = pl_.fields[i].value;
        used_.insert(i);
      }
      return Status::ok();
    }
    Status toInt(const char* key, const std::string& text, int* out) {
      errno = 0;
      char* end = nullptr;
      const long v = std::strtol(text.c_str(), &end, 10);
      if (errno != 0 || end == text.c_str() || *end != '\0' || v < -1 || v > INT32_MAX) {
        return p_->error(line_, pl_.record + ": '" + key + "=" + text + "' is not an integer");
      }
      *out = static_cast<int>(v);
      return Status::ok();
    }

    const Parser* p_;
    int line_;
    const ParsedLine& pl_;
    std::set<size_t> used_;
  };

  Status readLink(Fields& f, Link* l) {
    BRAID_RETURN_IF_ERROR(f.required("from", &l->from));
    BRAID_RETURN_IF_ERROR(f.required("to", &l->to));
    BRAID_RETURN_IF_ERROR(f.optional("kind", &l->kind));
    BRAID_RETURN_IF_ERROR(f.optionalDouble("gbps", &l->bandwidthGbps));
    BRAID_RETURN_IF_ERROR(f.optionalDouble("latency_us", &l->latencyUs));
    return f.done();
  }

  std::string fileName_;
};

}  // namespace

std::string formatTopology(const Topology& t) {
  std::string out;
  out += "# braid topology file (docs/topology-file.md)\n";
  out += "braid-topology " + std::to_string(kVersion) + "\n";
  for (const Host& h : t.hosts) {
    out += LineWriter("host").kv("name", h.name).kvIf("id", h.id).str();
    for (const Socket& s : h.sockets) {
      out += LineWriter("socket").kvInt("id", s.id).kvIf("model", s.model).str();
    }
    for (const NumaNode& n : h.numaNodes) {
      LineWriter w("numa");
      w.kvInt("id", n.id);
      if (!n.cpus.empty()) w.kv("cpus", formatCpuList(n.cpus));
      out += w.kvKnown("memory", n.memoryBytes).str();
    }
    for (const Core& c : h.cores) {
      LineWriter w("core");
      w.kvInt("id", c.id).kvInt("socket", c.socket).kvKnown("numa", c.numa);
      if (!c.cpus.empty()) w.kv("cpus", formatCpuList(c.cpus));
      out += w.str();
    }
    for (const PciDevice& d : h.pci) {
      out += LineWriter("pci")
                 .kv("addr", d.address)
                 .kvIf("parent", d.parent)
                 .kv("class", hex(d.classCode, 6))
                 .kv("vendor", hex(d.vendor, 4))
                 .kv("device", hex(d.device, 4))
                 .kvKnown("numa", d.numa)
                 .str();
    }
    for (const Nic& n : h.nics) {
      LineWriter w("nic");
      w.kv("name", n.name).kv("kind", nicKindName(n.kind)).kvKnown("speed_mbps", n.speedMbps);
      w.kvIf("pci", n.pciPath);
      for (const std::string& a : n.addresses) w.kv("addr", a);
      w.kvIf("mac", n.mac).kvKnown("mtu", n.mtu).kvInt("up", n.up ? 1 : 0);
      w.kvKnown("numa", n.numa).kvIf("driver", n.driver);
      out += w.str();
    }
    for (const Gpu& g : h.gpus) {
      out += LineWriter("gpu")
                 .kvInt("index", g.index)
                 .kvIf("name", g.name)
                 .kvIf("pci", g.pciPath)
                 .kvIf("uuid", g.uuid)
                 .kvKnown("numa", g.numa)
                 .str();
    }
    for (const Link& l : h.links) writeLink(out, "link", l);
  }
  for (const Link& l : t.links) writeLink(out, "fabric-link", l);
  return out;
}

Result<Topology> parseTopology(const std::string& text, const std::string& fileName) {
  Parser parser(fileName);
  return parser.parse(text);
}

Result<Topology> readTopologyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errnoError("cannot open topology file " + path, errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return errnoError("cannot read topology file " + path, errno);
  return parseTopology(ss.str(), path);
}

Status writeTopologyFile(const Topology& topology, const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return errnoError("cannot create " + tmp, errno);
    out << formatTopology(topology);
    out.flush();
    if (!out) {
      const int err = errno;
      std::remove(tmp.c_str());
      return errnoError("cannot write " + tmp, err);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return errnoError("cannot rename " + tmp + " to " + path, err);
  }
  return Status::ok();
}

}  // namespace braid::topo
