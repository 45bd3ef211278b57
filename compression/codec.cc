// createCodec and parseCodecSpec: codecs are chosen by name from an explicit table.
#include "compression/codec.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "compression/codec_registry.h"

namespace braid {
namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Codec> (*create)(const CodecOptions&);
};

constexpr Entry kCodecs[] = {
    {"none", detail::createNoneCodec},         {"fp16", detail::createFp16Codec},
    {"bf16", detail::createBf16Codec},         {"powersgd", detail::createPowerSgdCodec},
    {"topk", detail::createTopKCodec},         {"int8", detail::createInt8Codec},
    {"sign", detail::createSignCodec},
};

std::string codecNames() {
  std::string s;
  for (const Entry& e : kCodecs) {
    if (!s.empty()) s += ", ";
    s += e.name;
  }
  return s;
}

Status checkOptions(const CodecOptions& o) {
  if (o.powerSgdRank < 1 || o.powerSgdRank > 1024) {
    return invalidArgument("codec option rank=" + std::to_string(o.powerSgdRank) +
                           ": PowerSGD's rank must be in [1, 1024]");
  }
  if (!(o.minCompressionRate >= 0.0) || !std::isfinite(o.minCompressionRate)) {
    return invalidArgument("codec option min_rate must be a finite number >= 0");
  }
  if (!(o.topkRatio > 0.0 && o.topkRatio <= 1.0)) {
    return invalidArgument("codec option ratio=" + std::to_string(o.topkRatio) +
                           ": top-k's ratio must be in (0, 1]");
  }
  if (!(o.topkSampleRatio > 0.0 && o.topkSampleRatio <= 1.0)) {
    return invalidArgument("codec option sample must be in (0, 1]");
  }
  if (o.chunkSize == 0 || o.chunkSize > (size_t{1} << 30)) {
    return invalidArgument("codec option chunk must be in [1, 2^30] elements");
  }
  if (!(o.orthogonalizationEpsilon >= 0.0f)) {
    return invalidArgument("codec option eps must be >= 0");
  }
  return Status::ok();
}

Result<double> parseNumber(const std::string& key, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || errno != 0 || end != value.c_str() + value.size()) {
    return invalidArgument("codec option " + key + "=" + value + ": not a number");
  }
  return v;
}

/// v for an integer option: whole and in [lo, hi] (a conversion outside the type's range would be
/// undefined).
Result<double> wholeNumber(const std::string& key, double v, double lo, double hi) {
  if (!(v >= lo && v <= hi) || v != std::floor(v)) {
    return invalidArgument("codec option " + key + "=" + std::to_string(v) +
                           ": not a whole number in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
  }
  return v;
}

}  // namespace

Result<std::unique_ptr<Codec>> createCodec(const std::string& name, const CodecOptions& options) {
  BRAID_RETURN_IF_ERROR(checkOptions(options));
  for (const Entry& e : kCodecs) {
    if (name == e.name) return e.create(options);
  }
  return invalidArgument("unknown codec '" + name + "'; known codecs: " + codecNames());
}

Status parseCodecSpec(const std::string& spec, std::string* name, CodecOptions* options) {
  const size_t colon = spec.find(':');
  *name = spec.substr(0, colon);
  if (colon == std::string::npos) return Status::ok();
  std::string rest = spec.substr(colon + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    if (comma == std::string::npos) comma = rest.size();
    const std::string item = rest.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return invalidArgument("codec spec '" + spec + "': '" + item + "' is not key=value");
    }
    const std::string key = item.substr(0, eq);
    BRAID_ASSIGN_OR_RETURN(const double v, parseNumber(key, item.substr(eq + 1)));
    CodecOptions& o = *options;
    if (key == "average") {
      o.average = v != 0;
    } else if (key == "ef") {
      o.errorFeedback = v != 0;
    } else if (key == "seed") {
      BRAID_ASSIGN_OR_RETURN(const double w, wholeNumber(key, v, 0, 1e19));
      o.seed = static_cast<uint64_t>(w);
    } else if (key == "dynamic") {
      o.dynamicScale = v != 0;
    } else if (key == "rank") {
      BRAID_ASSIGN_OR_RETURN(const double w, wholeNumber(key, v, -2147483648.0, 2147483647.0));
      o.powerSgdRank = static_cast<int>(w);
    } else if (key == "start") {
      BRAID_ASSIGN_OR_RETURN(const double w, wholeNumber(key, v, 0, 1e19));
      o.startStep = static_cast<uint64_t>(w);
    } else if (key == "min_rate") {
      o.minCompressionRate = v;
    } else if (key == "warm") {
      o.warmStart = v != 0;
    } else if (key == "eps") {
      o.orthogonalizationEpsilon = static_cast<float>(v);
    } else if (key == "ratio") {
      o.topkRatio = v;
    } else if (key == "sample") {
      o.topkSampleRatio = v;
    } else if (key == "chunk") {
      BRAID_ASSIGN_OR_RETURN(const double w, wholeNumber(key, v, 0, 1e18));
      o.chunkSize = static_cast<size_t>(w);
    } else {
      return invalidArgument("codec spec '" + spec + "': unknown key '" + key +
                             "' (keys: average, ef, seed, dynamic, rank, start, min_rate, warm, "
                             "eps, ratio, sample, chunk)");
    }
  }
  return checkOptions(*options);
}

}  // namespace braid
