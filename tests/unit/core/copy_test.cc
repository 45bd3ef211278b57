#include "core/copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace braid {
namespace {

// Every size class (below the streaming threshold, at it, odd sizes and misaligned ends), both
// kinds of stores, and the process-wide switch: the bytes arrive, nothing past them is touched.
TEST(CopyToShared, BothKindsOfStoresCopyExactly) {
  const bool before = streamToShared();
  for (bool stream : {true, false}) {
    setStreamToShared(stream);
    EXPECT_EQ(streamToShared(), stream);
    for (size_t n : {size_t{1}, size_t{63}, kCopyStreamMinBytes - 1, kCopyStreamMinBytes,
                     kCopyStreamMinBytes + 17, size_t{1} << 20}) {
      for (size_t skew : {size_t{0}, size_t{3}}) {
        std::vector<uint8_t> src(n + 8), dst(n + 8, 0xAB);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
        copyToShared(dst.data() + skew, src.data(), n);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[skew + i], src[i]) << n << " " << i;
        for (size_t i = skew + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB);
        std::vector<uint8_t> shared(n + 8, 0), mine(n + 8, 0);
        copyToSharedAndLocal(shared.data() + skew, mine.data(), src.data(), n);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(shared[skew + i], src[i]);
          ASSERT_EQ(mine[i], src[i]);
        }
        std::vector<uint8_t> as(n, 0);
        copyToSharedAs(!stream, as.data(), src.data(), n);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(as[i], src[i]);
      }
    }
  }
  setStreamToShared(before);
}

}  // namespace
}  // namespace braid
