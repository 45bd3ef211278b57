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
    for (size_t n : {size_t{1}, size_t{63}, kCopyLoopMinBytes + 5, kCopyStreamMinBytes - 1,
                     kCopyStreamMinBytes, kCopyStreamMinBytes + 17, size_t{1} << 20}) {
      for (size_t skew : {size_t{0}, size_t{3}}) {
        std::vector<uint8_t> src(n + 8), dst(n + 8, 0xAB);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
        copyToShared(dst.data() + skew, src.data(), n);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[skew + i], src[i]) << n << " " << i;
        for (size_t i = skew + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB);
        std::vector<uint8_t> shared(n + 8, 0), mine(n + 8, 0);
        copyToSharedAndLocal(shared.data() + skew, mine.data() + 8 - skew, src.data(), n);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(shared[skew + i], src[i]);
          ASSERT_EQ(mine[8 - skew + i], src[i]);
        }
        for (size_t i = 0; i < skew; ++i) ASSERT_EQ(shared[i], 0);
        for (size_t i = 0; i < 8 - skew; ++i) ASSERT_EQ(mine[i], 0);
        for (size_t i = skew + n; i < shared.size(); ++i) ASSERT_EQ(shared[i], 0);
        for (size_t i = 8 - skew + n; i < mine.size(); ++i) ASSERT_EQ(mine[i], 0);
        std::vector<uint8_t> as(n, 0);
        copyToSharedAs(!stream, as.data(), src.data(), n);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(as[i], src[i]);
      }
    }
  }
  setStreamToShared(before);
}

// copyBytes takes its own loop where the two buffers lie at different offsets in a cache line
// (kCopyLoopMinBytes and up), glibc's memcpy elsewhere: both copy exactly, ends included.
TEST(CopyBytes, CopiesExactlyAtEveryAlignment) {
  for (size_t n : {size_t{0}, size_t{5}, kCopyLoopMinBytes - 1, kCopyLoopMinBytes,
                   kCopyLoopMinBytes + 33, size_t{256} << 10}) {
    for (size_t srcSkew : {size_t{0}, size_t{16}}) {
      for (size_t dstSkew : {size_t{0}, size_t{1}, size_t{16}, size_t{64}}) {
        std::vector<uint8_t> src(n + 128), dst(n + 128, 0xCD);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 5);
        copyBytes(dst.data() + dstSkew, src.data() + srcSkew, n);
        for (size_t i = 0; i < dstSkew; ++i) ASSERT_EQ(dst[i], 0xCD);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(dst[dstSkew + i], src[srcSkew + i]) << n << " " << srcSkew << " " << dstSkew;
        }
        for (size_t i = dstSkew + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xCD);
      }
    }
  }
}

}  // namespace
}  // namespace braid
