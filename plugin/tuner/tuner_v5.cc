// ncclTunerPlugin_v5: what NCCL 2.28/2.29 bind (2.30 through its v5 shim, when a library has no
// v6). NCCL's constants are left as they are; the NVL domain information is not used by the
// network model.
#include "plugin/tuner/tuner.h"

namespace {

braid::abi::Result v5Init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                          braid::abi::Logger log, braid::abi::NvlDomainInfoV5* nvl,
                          braid::abi::TunerConstantsV5* constants) noexcept {
  (void)commId, (void)nvl, (void)constants;
  return braid::plugin::tuner::initContext(ctx, nRanks, nNodes, log);
}

braid::abi::Result v5GetCollInfo(void* ctx, braid::abi::Func collType, size_t nBytes,
                                 int numPipeOps, float** costTable, int numAlgo, int numProto,
                                 int regBuff, int* nChannels) noexcept {
  (void)numPipeOps, (void)regBuff;
  return braid::plugin::tuner::collInfo(ctx, collType, nBytes, costTable, numAlgo, numProto,
                                        nChannels);
}

braid::abi::Result v5Finalize(void* ctx) noexcept {
  return braid::plugin::tuner::finalizeContext(ctx);
}

}  // namespace

extern "C" __attribute__((visibility("default")))
const braid::abi::TunerV5 ncclTunerPlugin_v5 = {"braid", v5Init, v5GetCollInfo, v5Finalize};
