// The tuner's C-boundary functions shared by the version adapters: they never throw and succeed
// (an error would fail NCCL's communicator creation or the collective, ABI doc §3, §9.2) except
// where NCCL handed nothing to answer into; anything unexpected is logged and becomes "no
// opinion".
#pragma once

#include <cstddef>

#include "plugin/nccl_abi.h"

namespace braid::plugin::tuner {

abi::Result initContext(void** ctx, size_t nRanks, size_t nNodes, abi::Logger log) noexcept;
/// costTable: NCCL's contiguous float[numAlgo][numProto] passed as float** (a cast, not rows).
abi::Result collInfo(void* ctx, int collType, size_t nBytes, float** costTable, int numAlgo,
                     int numProto, int* nChannels) noexcept;
abi::Result finalizeContext(void* ctx) noexcept;
/// Tuner v6's getChunkSize: *chunkSize holds NCCL's chunk and is lowered only where the model has
/// a better one (Tuner::chunkSize). kInvalidArgument for a null chunkSize (there is nothing to
/// answer into); a null ctx (BRAID_TUNER=off), an algorithm or protocol outside NCCL's tables, or
/// nBytes/nChannels of 0 leave NCCL's value and succeed.
abi::Result chunkSize(void* ctx, int collType, size_t nBytes, int algo, int proto, int nChannels,
                      size_t* chunkSize) noexcept;

}  // namespace braid::plugin::tuner
