// ncclTunerPlugin_v6: what NCCL 2.30.3+ binds first (ABI doc §9.2). v5's init, getCollInfo and
// finalize, plus getChunkSize, answered from the model's pipelined tree (model.h).
#include "plugin/tuner/tuner.h"

namespace {

braid::abi::Result v6Init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                          braid::abi::Logger log, braid::abi::NvlDomainInfoV6* nvl,
                          braid::abi::TunerConstantsV6* constants) noexcept {
  (void)commId, (void)nvl, (void)constants;
  return braid::plugin::tuner::initContext(ctx, nRanks, nNodes, log);
}

braid::abi::Result v6GetCollInfo(void* ctx, braid::abi::Func collType, size_t nBytes,
                                 int numPipeOps, float** costTable, int numAlgo, int numProto,
                                 int regBuff, int* nChannels) noexcept {
  (void)numPipeOps, (void)regBuff;
  return braid::plugin::tuner::collInfo(ctx, collType, nBytes, costTable, numAlgo, numProto,
                                        nChannels);
}

braid::abi::Result v6Finalize(void* ctx) noexcept {
  return braid::plugin::tuner::finalizeContext(ctx);
}

braid::abi::Result v6GetChunkSize(void* ctx, braid::abi::Func collType, size_t nBytes, int algo,
                                  int proto, int nChannels, size_t* chunkSize) noexcept {
  return braid::plugin::tuner::chunkSize(ctx, collType, nBytes, algo, proto, nChannels, chunkSize);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const braid::abi::TunerV6 ncclTunerPlugin_v6 = {
    "braid", v6Init, v6GetCollInfo, v6Finalize, v6GetChunkSize};
