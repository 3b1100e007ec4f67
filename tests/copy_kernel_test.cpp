// The data paths' copy kernels (src/kernels/copy_kernel.hpp) byte by byte: every size class
// (memcpy below 2 KiB, the vector loop above it, its unaligned first line and overlapping last
// 32 bytes) at source and destination offsets across a cache line, with the bytes around the
// destination left untouched.
#include "kernels/copy_kernel.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace strata;

TEST(CopyKernels, EverySizeAndAlignmentCopiesExactlyTheBytes) {
  constexpr size_t kGuard = 64;
  for (const size_t n :
       {size_t(0), size_t(1), size_t(31), size_t(64), size_t(2047), size_t(2048), size_t(2049),
        size_t(4095), size_t(4096), size_t(4097), size_t(100003), size_t(262147)}) {
    for (const size_t so : {0, 1, 16, 33, 63}) {
      for (const size_t dof : {0, 1, 16, 32, 63}) {
        for (const bool streaming : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "n " << n << " src +" << so << " dst +" << dof
                                            << (streaming ? " streaming" : ""));
          std::vector<uint8_t> src(n + 64), dst(n + 64 + 2 * kGuard, 0xA5);
          for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
          uint8_t* d = dst.data() + kGuard + dof;
          (streaming ? kernels::copy_streaming : kernels::copy)(d, src.data() + so, n);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], src[so + i]) << "byte " << i;
          for (uint8_t* p = dst.data(); p < d; ++p) ASSERT_EQ(*p, 0xA5) << "before, " << d - p;
          for (uint8_t* p = d + n; p < dst.data() + dst.size(); ++p) {
            ASSERT_EQ(*p, 0xA5) << "after, " << p - (d + n);
          }
        }
      }
    }
  }
}
