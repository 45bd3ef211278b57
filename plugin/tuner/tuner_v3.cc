// ncclTunerPlugin_v3: as v4 without regBuff.
#include "plugin/tuner/tuner.h"

namespace {

braid::abi::Result v3Init(size_t nRanks, size_t nNodes, braid::abi::Logger log,
                          void** ctx) noexcept {
  return braid::plugin::tuner::initContext(ctx, nRanks, nNodes, log);
}

braid::abi::Result v3GetCollInfo(void* ctx, braid::abi::Func collType, size_t nBytes,
                                 int numPipeOps, float** costTable, int numAlgo, int numProto,
                                 int* nChannels) noexcept {
  (void)numPipeOps;
  return braid::plugin::tuner::collInfo(ctx, collType, nBytes, costTable, numAlgo, numProto,
                                        nChannels);
}

braid::abi::Result v3Destroy(void* ctx) noexcept {
  return braid::plugin::tuner::finalizeContext(ctx);
}

}  // namespace

extern "C" __attribute__((visibility("default")))
const braid::abi::TunerV3 ncclTunerPlugin_v3 = {"braid", v3Init, v3GetCollInfo, v3Destroy};
