// The parameter table: every BRAID_* environment variable, with its type, default and help.
// Values are read from the environment once, on first use, and cached. Tools print the table
// (braid-info params); tests may override values with setParamForTesting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace braid {

enum class ParamType { kInt, kBool, kString, kEnum };

struct ParamDef {
  const char* name;          ///< e.g. "BRAID_TIMEOUT_MS"
  ParamType type;
  const char* defaultValue;  ///< as text, as a user would write it
  const char* choices;       ///< for kEnum: "a|b|c"; else ""
  const char* help;
};

/// Every parameter braid reads, in a stable order.
const std::vector<ParamDef>& paramTable();

/// Typed accessors. The name must be in the table (an unknown name aborts in debug builds and
/// returns the type's zero value otherwise). A malformed environment value logs one warning and
/// falls back to the default.
int64_t paramInt(const char* name);
bool paramBool(const char* name);
std::string paramString(const char* name);

/// The value in effect as text and where it came from ("env" or "default").
std::string paramValueText(const char* name, const char** source = nullptr);

/// The deadline of every blocking wait, in milliseconds: BRAID_TIMEOUT_MS when it is > 0, else
/// (0, negative, malformed) the default kDefaultTimeoutMs, with one warning: braid has no wait
/// without a deadline. Read by the objects that own a timeout (communicator, store, NCCL plugin
/// instance) and handed to everything below them as a value.
inline constexpr int64_t kDefaultTimeoutMs = 300000;
int64_t timeoutMsFromEnvironment();

/// Replaces a cached value (tests only); "" restores the environment/default.
void setParamForTesting(const char* name, const std::string& value);

}  // namespace braid
