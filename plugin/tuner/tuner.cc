#include "plugin/tuner/tuner.h"

#include <exception>

#include "core/params.h"
#include "plugin/plugin_log.h"
#include "plugin/tuner/model.h"

namespace braid::plugin::tuner {

abi::Result initContext(void** ctx, size_t nRanks, size_t nNodes, abi::Logger log) noexcept {
  if (ctx == nullptr) return abi::kSuccess;
  *ctx = nullptr;
  try {
    setNcclLogger(log);
    if (paramString("BRAID_TUNER") == "off") {
      BRAID_PLUGIN_INFO(abi::kSubsysTuning, "TUNER/braid: BRAID_TUNER=off; NCCL tunes");
      return abi::kSuccess;  // a null ctx: no opinion on anything
    }
    *ctx = Tuner::create(nRanks, nNodes).release();
  } catch (const std::exception& e) {
    BRAID_PLUGIN_WARN(abi::kSubsysTuning, "TUNER/braid: init failed (%s); NCCL tunes", e.what());
  } catch (...) {
    BRAID_PLUGIN_WARN(abi::kSubsysTuning, "TUNER/braid: init failed; NCCL tunes");
  }
  return abi::kSuccess;
}

abi::Result collInfo(void* ctx, int collType, size_t nBytes, float** costTable, int numAlgo,
                     int numProto, int* nChannels) noexcept {
  if (ctx == nullptr || costTable == nullptr) return abi::kSuccess;
  try {
    // NCCL passes the address of a contiguous float[7][3] cast to float**: rows of floats.
    float* table = reinterpret_cast<float*>(costTable);
    static_cast<Tuner*>(ctx)->getCollInfo(collType, nBytes, table, numAlgo, numProto, nChannels);
  } catch (...) {
    // Nothing half-done matters: the table only ever gets entries lowered to 0.
  }
  return abi::kSuccess;
}

abi::Result chunkSize(void* ctx, int collType, size_t nBytes, int algo, int proto, int nChannels,
                      size_t* chunkSize) noexcept {
  if (chunkSize == nullptr) {
    BRAID_PLUGIN_WARN(abi::kSubsysTuning, "TUNER/braid: getChunkSize with a null chunkSize");
    return abi::kInvalidArgument;
  }
  if (ctx == nullptr || algo < 0 || algo >= abi::kNumAlgorithms || proto < 0 ||
      proto >= abi::kNumProtocols || nBytes == 0 || nChannels < 1) {
    return abi::kSuccess;  // NCCL's chunk stays
  }
  try {
    *chunkSize =
        static_cast<Tuner*>(ctx)->chunkSize(collType, nBytes, algo, proto, nChannels, *chunkSize);
  } catch (...) {
    // Tuner::chunkSize does not allocate; nothing was written.
  }
  return abi::kSuccess;
}

abi::Result finalizeContext(void* ctx) noexcept {
  delete static_cast<Tuner*>(ctx);
  return abi::kSuccess;
}

}  // namespace braid::plugin::tuner
