#include "collectives/selector/rules.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/text.h"

namespace braid::detail {
namespace {

// "4096", "64K", "1M", "2G" (powers of 1024).
bool parseCount(const std::string& text, uint64_t* out) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return false;
  uint64_t mult = 1;
  std::string suffix(end);
  if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = 1ull << 30;
  else if (!suffix.empty() && suffix != "B") return false;
  if (v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

// "*", "N", "LO-HI", "LO-*".
bool parseRange(const std::string& text, Range* r) {
  if (text == "*") {
    *r = Range();
    return true;
  }
  const size_t dash = text.find('-');
  if (dash == std::string::npos) {
    uint64_t v;
    if (!parseCount(text, &v)) return false;
    r->lo = r->hi = v;
    return true;
  }
  const std::string lo = text.substr(0, dash), hi = text.substr(dash + 1);
  if (!parseCount(lo, &r->lo)) return false;
  if (hi == "*") {
    r->hi = UINT64_MAX;
  } else if (!parseCount(hi, &r->hi)) {
    return false;
  }
  return r->lo <= r->hi;
}

std::string rangeText(const Range& r) {
  auto num = [](uint64_t v) {
    if (v != 0 && v % (1ull << 30) == 0) return std::to_string(v >> 30) + "G";
    if (v != 0 && v % (1ull << 20) == 0) return std::to_string(v >> 20) + "M";
    if (v != 0 && v % (1ull << 10) == 0) return std::to_string(v >> 10) + "K";
    return std::to_string(v);
  };
  if (r.lo == 0 && r.hi == UINT64_MAX) return "*";
  if (r.lo == r.hi) return num(r.lo);
  return num(r.lo) + "-" + (r.hi == UINT64_MAX ? std::string("*") : num(r.hi));
}

}  // namespace

Status forEachRuleLine(const std::string& text,
                       const std::function<Status(int number, const std::string& line)>& line) {
  std::istringstream in(text);
  std::string raw;
  int number = 0;
  while (std::getline(in, raw)) {
    ++number;
    const size_t hash = raw.find('#');
    if (hash != std::string::npos) raw.erase(hash);
    raw = trimBlanks(raw);
    if (raw.empty()) continue;
    BRAID_RETURN_IF_ERROR(line(number, raw));
  }
  return Status::ok();
}

Result<std::string> canonicalAlgorithm(SelCollective c, const std::string& name) {
  BRAID_ASSIGN_OR_RETURN(const Algorithm* a, lookupAlgorithm(c, name));
  return std::string(a->name);
}

Result<std::vector<TuningRule>> parseTuningRules(const std::string& text,
                                                 const std::string& name) {
  std::vector<TuningRule> rules;
  BRAID_RETURN_IF_ERROR(forEachRuleLine(text, [&](int lineNo, const std::string& line) -> Status {
    const std::string where = name + ":" + std::to_string(lineNo);
    auto bad = [&](const std::string& why) {
      return invalidArgument(where + ": " + why + " (format: COLLECTIVE [bytes=LO-HI] "
                             "[ranks=LO-HI] [hosts=LO-HI] algo=NAME [chunk=BYTES]; see "
                             "docs/tuning-file.md)");
    };
    std::istringstream words(line);
    std::string coll;
    words >> coll;
    auto c = parseSelCollective(coll);
    if (!c.isOk()) return bad(c.status().message());
    TuningRule rule;
    rule.collective = *c;
    rule.where = where;
    bool haveAlgo = false;
    std::string item;
    std::vector<std::string> seenKeys;
    while (words >> item) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
        return bad("'" + item + "' is not key=value");
      }
      const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      for (const std::string& k : seenKeys) {
        if (k == key) return bad("'" + key + "' given twice");
      }
      seenKeys.push_back(key);
      if (key == "bytes" || key == "ranks" || key == "hosts") {
        Range r;
        if (!parseRange(value, &r)) {
          return bad("bad " + key + " range '" + value + "' (N, LO-HI or LO-*; K/M/G suffixes)");
        }
        (key == "bytes" ? rule.bytes : key == "ranks" ? rule.ranks : rule.hosts) = r;
      } else if (key == "algo") {
        auto a = canonicalAlgorithm(*c, value);
        if (!a.isOk()) return bad(a.status().message());
        rule.algorithm = *a;
        haveAlgo = true;
      } else if (key == "chunk") {
        uint64_t v;
        if (!parseCount(value, &v) || v < 4096 || v > (1ull << 30)) {
          return bad("bad chunk '" + value + "' (4K..1G)");
        }
        rule.chunkBytes = static_cast<size_t>(v);
      } else {
        return bad("unknown key '" + key + "' (valid: bytes, ranks, hosts, algo, chunk)");
      }
    }
    if (!haveAlgo) return bad("missing algo=NAME");
    rules.push_back(rule);
    return Status::ok();
  }));
  return rules;
}

Result<std::vector<TuningRule>> readTuningFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return invalidArgument("cannot read tuning file " + path + " (BRAID_TUNING_FILE)");
  std::stringstream ss;
  ss << f.rdbuf();
  return parseTuningRules(ss.str(), path);
}

const TuningRule* matchRule(const std::vector<TuningRule>& rules, SelCollective c, uint64_t bytes,
                            int ranks, int hosts) {
  for (const TuningRule& r : rules) {
    if (r.collective == c && r.bytes.contains(bytes) &&
        r.ranks.contains(static_cast<uint64_t>(ranks)) &&
        r.hosts.contains(static_cast<uint64_t>(hosts))) {
      return &r;
    }
  }
  return nullptr;
}

std::string formatRule(const TuningRule& rule) {
  std::string s = selCollectiveName(rule.collective);
  s += " bytes=" + rangeText(rule.bytes) + " ranks=" + rangeText(rule.ranks) +
       " hosts=" + rangeText(rule.hosts) + " algo=" + rule.algorithm;
  if (rule.chunkBytes) s += " chunk=" + std::to_string(rule.chunkBytes);
  return s;
}

Result<AlgoOverrides> parseAlgoOverrideSpec(const std::string& spec) {
  AlgoOverrides o;
  o.spec = spec;
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(';', start);
    if (end == std::string::npos) end = spec.size();
    const std::string entry = trimBlanks(spec.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) continue;
    std::string coll = "allreduce", algo = entry;
    const size_t colon = entry.find(':');
    if (colon != std::string::npos) {
      coll = trimBlanks(entry.substr(0, colon));
      algo = trimBlanks(entry.substr(colon + 1));
    }
    auto c = parseSelCollective(coll);
    if (!c.isOk()) return c.status().withContext("BRAID_ALGO='" + spec + "'");
    if (algo == "auto" || algo.empty()) {
      o.forced[static_cast<int>(*c)] = nullptr;
      continue;
    }
    auto a = lookupAlgorithm(*c, algo);
    if (!a.isOk()) return a.status().withContext("BRAID_ALGO='" + spec + "'");
    o.forced[static_cast<int>(*c)] = *a;
  }
  return o;
}

}  // namespace braid::detail
