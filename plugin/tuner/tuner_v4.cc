// ncclTunerPlugin_v4: init(nRanks, nNodes, log, ctx) and destroy; getCollInfo as v5.
#include "plugin/tuner/tuner.h"

namespace {

braid::abi::Result v4Init(size_t nRanks, size_t nNodes, braid::abi::Logger log,
                          void** ctx) noexcept {
  return braid::plugin::tuner::initContext(ctx, nRanks, nNodes, log);
}

braid::abi::Result v4GetCollInfo(void* ctx, braid::abi::Func collType, size_t nBytes,
                                 int numPipeOps, float** costTable, int numAlgo, int numProto,
                                 int regBuff, int* nChannels) noexcept {
  (void)numPipeOps, (void)regBuff;
  return braid::plugin::tuner::collInfo(ctx, collType, nBytes, costTable, numAlgo, numProto,
                                        nChannels);
}

braid::abi::Result v4Destroy(void* ctx) noexcept {
  return braid::plugin::tuner::finalizeContext(ctx);
}

}  // namespace

extern "C" __attribute__((visibility("default")))
const braid::abi::TunerV4 ncclTunerPlugin_v4 = {"braid", v4Init, v4GetCollInfo, v4Destroy};
