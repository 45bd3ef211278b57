// Slurm's compressed lists, as srun exports them: hostlists (SLURM_JOB_NODELIST,
// SLURM_STEP_NODELIST) and tasks-per-node counts (SLURM_STEP_TASKS_PER_NODE), and the store port
// braid derives from SLURM_JOB_ID. Declared in launchers.h.
//
// Hostlist grammar: list = element ("," element)*; element = (literal | "[" items "]")+;
// items = item ("," item)*; item = number | number "-" number. A range keeps the width of its
// first number ("[08-10]" = 08 09 10, "[8-10]" = 8 9 10); several groups in one element expand
// to their cartesian product, the first group outermost.
#include <algorithm>
#include <string>
#include <vector>

#include "transport/bootstrap/launchers.h"

namespace braid {
namespace {

// More hosts than any cluster has; a guard against a typo such as node[1-999999999].
constexpr size_t kMaxHosts = size_t{1} << 20;
constexpr size_t kMaxDigits = 9;  // fits an int64_t with room for hi - lo + 1

bool allDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string padded(int64_t value, size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

class HostlistParser {
 public:
  HostlistParser(const std::string& text, const std::string& variable)
      : text_(text), variable_(variable) {}

  Result<std::vector<std::string>> run() {
    if (text_.empty()) return bad("it is empty");
    std::vector<std::string> hosts;
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= text_.size(); ++i) {
      const char c = i < text_.size() ? text_[i] : ',';
      if (c == '[') {
        if (depth > 0) return bad("'[' at offset " + std::to_string(i) + " is nested");
        depth = 1;
        open_ = i;
      } else if (c == ']') {
        if (depth == 0) return bad("']' at offset " + std::to_string(i) + " has no '['");
        depth = 0;
      } else if (c == ' ' || c == '\t' || c == '\n') {
        return bad("whitespace at offset " + std::to_string(i));
      } else if (c == ',' && depth == 0) {
        if (i == start) return bad("empty host name at offset " + std::to_string(i));
        BRAID_RETURN_IF_ERROR(expandElement(start, i, &hosts));
        start = i + 1;
      }
    }
    if (depth != 0) return bad("'[' at offset " + std::to_string(open_) + " is never closed");
    return hosts;
  }

 private:
  Status bad(const std::string& why) const {
    return invalidArgument(variable_ + "='" + text_ + "' is not a Slurm hostlist: " + why +
                           " (expected e.g. node[01-04,07],login1); set MASTER_ADDR to rank 0's "
                           "host to bypass the list");
  }

  // Expands text_[begin, end) (one element, brackets balanced) onto *hosts.
  Status expandElement(size_t begin, size_t end, std::vector<std::string>* hosts) {
    std::vector<std::string> partial = {""};
    size_t i = begin;
    while (i < end) {
      if (text_[i] != '[') {
        const size_t next = std::min(end, text_.find('[', i));
        for (std::string& p : partial) p += text_.substr(i, next - i);
        i = next;
        continue;
      }
      const size_t close = text_.find(']', i);  // balanced: exists and is before `end`
      std::vector<std::string> values;
      BRAID_RETURN_IF_ERROR(expandGroup(text_.substr(i + 1, close - i - 1), i, &values));
      if (partial.size() * values.size() + hosts->size() > kMaxHosts) {
        return bad("it expands to more than " + std::to_string(kMaxHosts) + " hosts");
      }
      std::vector<std::string> next;
      next.reserve(partial.size() * values.size());
      for (const std::string& p : partial) {
        for (const std::string& v : values) next.push_back(p + v);
      }
      partial = std::move(next);
      i = close + 1;
    }
    if (partial.size() + hosts->size() > kMaxHosts) {
      return bad("it expands to more than " + std::to_string(kMaxHosts) + " hosts");
    }
    hosts->insert(hosts->end(), partial.begin(), partial.end());
    return Status::ok();
  }

  // The numbers of one bracket group's contents (`at`: the offset of its '[', for messages).
  Status expandGroup(const std::string& group, size_t at, std::vector<std::string>* values) {
    const std::string where = "'[" + group + "]' at offset " + std::to_string(at);
    if (group.empty()) return bad("empty brackets " + where);
    size_t start = 0;
    for (size_t i = 0; i <= group.size(); ++i) {
      if (i < group.size() && group[i] != ',') continue;
      const std::string item = group.substr(start, i - start);
      start = i + 1;
      if (item.empty()) return bad("an empty item in " + where);
      const size_t dash = item.find('-');
      const std::string lo = item.substr(0, dash);
      const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
      if (!allDigits(lo) || !allDigits(hi)) {
        return bad("'" + item + "' in " + where + " is not a number or a range a-b of numbers");
      }
      if (lo.size() > kMaxDigits || hi.size() > kMaxDigits) {
        return bad("'" + item + "' in " + where + " has more than " + std::to_string(kMaxDigits) +
                   " digits");
      }
      const int64_t from = std::stoll(lo);
      const int64_t to = std::stoll(hi);
      if (to < from) return bad("the range '" + item + "' in " + where + " descends");
      if (static_cast<size_t>(to - from) + 1 + values->size() > kMaxHosts) {
        return bad("'" + item + "' expands to more than " + std::to_string(kMaxHosts) + " hosts");
      }
      for (int64_t v = from; v <= to; ++v) values->push_back(padded(v, lo.size()));
    }
    return Status::ok();
  }

  const std::string& text_;
  const std::string& variable_;
  size_t open_ = 0;
};

}  // namespace

Result<std::vector<std::string>> expandSlurmHostlist(const std::string& text,
                                                     const std::string& variable) {
  return HostlistParser(text, variable).run();
}

Result<std::vector<int>> expandSlurmTaskCounts(const std::string& text,
                                               const std::string& variable) {
  // "4", "2(x3),1": a count, optionally repeated (xM) for M consecutive nodes.
  auto bad = [&](const std::string& why) {
    return invalidArgument(variable + "='" + text + "' is not a Slurm tasks-per-node list: " + why +
                           " (expected e.g. 4 or 2(x3),1)");
  };
  std::vector<int> counts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != ',') continue;
    const std::string item = text.substr(start, i - start);
    start = i + 1;
    std::string count = item;
    std::string repeat = "1";
    const size_t paren = item.find('(');
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') {
        return bad("'" + item + "' is not N or N(xM)");
      }
      count = item.substr(0, paren);
      repeat = item.substr(paren + 2, item.size() - paren - 3);
    }
    if (!allDigits(count) || !allDigits(repeat) || count.size() > kMaxDigits ||
        repeat.size() > kMaxDigits) {
      return bad("'" + item + "' is not N or N(xM)");
    }
    const int64_t n = std::stoll(count);
    const int64_t m = std::stoll(repeat);
    if (n > (int64_t{1} << 24) || m < 1 || counts.size() + static_cast<size_t>(m) > kMaxHosts) {
      return bad("'" + item + "' is out of range");
    }
    counts.insert(counts.end(), static_cast<size_t>(m), static_cast<int>(n));
  }
  return counts;
}

Result<int> slurmDerivedPort(const std::string& jobIdText) {
  if (!allDigits(jobIdText) || jobIdText.size() > 18) {
    return invalidArgument("SLURM_JOB_ID='" + jobIdText +
                           "' is not a job number; set MASTER_PORT or BRAID_STORE_PORT");
  }
  return kSlurmPortBase + static_cast<int>(std::stoll(jobIdText) % kSlurmPortSpan);
}

}  // namespace braid
