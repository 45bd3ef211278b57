// ncclTunerPlugin_v2: no cost table; the tuner returns one algorithm and protocol (NCCL then
// sets that entry to 0). Only tree and ring are offered to the model (NCCL did not tell us
// whether CollNet/NVLS are usable), and the protocol follows the message size since NCCL's own
// ratings are not visible: LL below 64 KiB, LL128 below 4 MiB, SIMPLE above. The outputs are
// written only when there is an opinion.
#include "plugin/tuner/tuner.h"

namespace {

braid::abi::Result v2Init(size_t nRanks, size_t nNodes, braid::abi::Logger log,
                          void** ctx) noexcept {
  return braid::plugin::tuner::initContext(ctx, nRanks, nNodes, log);
}

braid::abi::Result v2GetCollInfo(void* ctx, braid::abi::Func collType, size_t nBytes,
                                 int collNetSupport, int nvlsSupport, int numPipeOps,
                                 int* algorithm, int* protocol, int* nChannels) noexcept {
  (void)collNetSupport, (void)nvlsSupport, (void)numPipeOps;
  namespace abi = braid::abi;
  const int proto = nBytes < (64u << 10)  ? abi::kProtoLL
                    : nBytes < (4u << 20) ? abi::kProtoLL128
                                          : abi::kProtoSimple;
  float table[abi::kNumAlgorithms][abi::kNumProtocols];
  for (auto& row : table) {
    for (float& c : row) c = abi::kAlgoProtoIgnore;
  }
  table[abi::kAlgoTree][proto] = 1.0f;
  table[abi::kAlgoRing][proto] = 1.0f;
  int channels = 0;
  braid::plugin::tuner::collInfo(ctx, collType, nBytes, reinterpret_cast<float**>(table),
                                 abi::kNumAlgorithms, abi::kNumProtocols, &channels);
  for (int a = 0; a < abi::kNumAlgorithms; ++a) {
    if (table[a][proto] == 0.0f) {
      if (algorithm != nullptr) *algorithm = a;
      if (protocol != nullptr) *protocol = proto;
      if (channels > 0 && nChannels != nullptr) *nChannels = channels;
      break;
    }
  }
  return abi::kSuccess;
}

braid::abi::Result v2Destroy(void* ctx) noexcept {
  return braid::plugin::tuner::finalizeContext(ctx);
}

}  // namespace

extern "C" __attribute__((visibility("default")))
const braid::abi::TunerV2 ncclTunerPlugin_v2 = {"braid", v2Init, v2GetCollInfo, v2Destroy};
