// copyIfDistinct: disjoint buffers at any relative offset take copyBytes (glibc's memcpy is slow
// at some of them: core/copy.h), overlapping ones keep memmove's result, the same buffer is left
// alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "collectives/algorithms.h"

namespace braid::detail {
namespace {

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + 7);
  return v;
}

TEST(CopyIfDistinct, CopiesDisjointBuffersAtEveryOffset) {
  for (size_t n : {size_t{1}, size_t{2047}, size_t{2048}, size_t{4096 + 5}, size_t{256} << 10}) {
    for (size_t skew : {size_t{0}, size_t{1}, size_t{16}, size_t{48}}) {
      const std::vector<uint8_t> src = pattern(n);
      std::vector<uint8_t> dst(n + 64, 0xEE);
      copyIfDistinct(dst.data() + skew, src.data(), n);
      for (size_t i = 0; i < skew; ++i) ASSERT_EQ(dst[i], 0xEE) << n << " " << skew;
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(dst[skew + i], src[i]) << n << " " << skew << " " << i;
      for (size_t i = skew + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << n << " " << skew;
    }
  }
}

// A forward copy into a destination just past its source would repeat the first bytes; the
// result must be memmove's in both directions.
TEST(CopyIfDistinct, OverlappingBuffersGetMemmovesResult) {
  const size_t n = 64 << 10;
  for (size_t shift : {size_t{16}, size_t{4096}}) {
    const std::vector<uint8_t> orig = pattern(n + shift);
    std::vector<uint8_t> up = orig;  // dst after src
    copyIfDistinct(up.data() + shift, up.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(up[shift + i], orig[i]) << shift << " " << i;
    std::vector<uint8_t> down = orig;  // dst before src
    copyIfDistinct(down.data(), down.data() + shift, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(down[i], orig[shift + i]) << shift << " " << i;
  }
  std::vector<uint8_t> same = pattern(n);
  copyIfDistinct(same.data(), same.data(), n);
  EXPECT_EQ(same, pattern(n));
}

}  // namespace
}  // namespace braid::detail
