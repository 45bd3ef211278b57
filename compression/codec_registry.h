// Internal: one creator per codec file, registered explicitly by createCodec (codec.cc).
#pragma once

#include <memory>

#include "compression/codec.h"

namespace braid::detail {

std::unique_ptr<Codec> createNoneCodec(const CodecOptions& options);
std::unique_ptr<Codec> createFp16Codec(const CodecOptions& options);
std::unique_ptr<Codec> createBf16Codec(const CodecOptions& options);
std::unique_ptr<Codec> createPowerSgdCodec(const CodecOptions& options);
std::unique_ptr<Codec> createTopKCodec(const CodecOptions& options);
std::unique_ptr<Codec> createInt8Codec(const CodecOptions& options);
std::unique_ptr<Codec> createSignCodec(const CodecOptions& options);

/// Test hook (fp16.cc): static scaling's per-rank limit for p ranks, 65504/p rounded down to a
/// representable half.
float fp16StaticLimit(int p);

}  // namespace braid::detail
