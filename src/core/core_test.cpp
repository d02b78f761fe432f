#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "core/thread_pool.h"
#include "kiln/result.h"
#include "kiln/shape.h"
#include "kiln/tensor.h"

namespace kiln {
namespace {

TEST(StatusTest, OkIsCheapAndErrorCarriesMessage) {
  Status ok;
  EXPECT_TRUE(ok.is_ok());
  EXPECT_EQ(ok.to_string(), "ok");
  Status e = invalid_argument("input '", "x", "' has rank ", 3);
  EXPECT_FALSE(e.is_ok());
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.message(), "input 'x' has rank 3");
  Status c = std::move(e).with_context("node Conv 'c1'");
  EXPECT_EQ(c.message(), "node Conv 'c1': input 'x' has rank 3");
}

Result<int> half(int x) {
  if (x % 2) return invalid_argument(x, " is odd");
  return x / 2;
}
Result<int> quarter(int x) {
  KILN_ASSIGN_OR_RETURN(int h, half(x));
  return half(h);
}

TEST(ResultTest, PropagatesErrors) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

TEST(ShapeTest, InlineAndHeapRanks) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.to_string(), "[2, 3, 4]");
  Shape big;
  for (int i = 0; i < 12; ++i) big.push_back(2);
  EXPECT_EQ(big.rank(), 12u);
  EXPECT_EQ(big.numel(), 4096);
  Shape copy = big;
  copy.resize(3);
  EXPECT_EQ(copy, (Shape{2, 2, 2}));
  EXPECT_EQ(Shape{}.numel(), 1);
}

TEST(Float16Test, RoundTripsAndRoundsToNearestEven) {
  EXPECT_EQ(Float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(Float16(-2.0f).bits, 0xc000);
  EXPECT_EQ(Float16(65504.f).bits, 0x7bff);
  EXPECT_EQ(Float16(65520.f).bits, 0x7c00);  // ties to even overflow to inf
  EXPECT_EQ(Float16(1.0f + 1.0f / 2048).bits, 0x3c00);  // exact tie -> even
  EXPECT_EQ(Float16(1.0f + 3.0f / 2048).bits, 0x3c02);
  EXPECT_EQ(Float16(5.960464477539063e-08f).bits, 0x0001);  // smallest subnormal
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t b = 0; b < 0x7c00; ++b) {  // every finite half survives the round trip
    auto h = Float16::from_bits(static_cast<uint16_t>(b));
    ASSERT_EQ(Float16(static_cast<float>(h)).bits, b);
  }
}

TEST(BFloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(BFloat16(3.140625f)), 3.140625f);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(TensorTest, StringsAreConstructedAndCloned) {
  Tensor t = Tensor::allocate(DType::kString, Shape{3});
  t.data<std::string>()[1] = "kiln";
  Tensor c = t.clone();
  t.data<std::string>()[1] = "changed";
  EXPECT_EQ(c.data<std::string>()[1], "kiln");
  EXPECT_EQ(c.data<std::string>()[0], "");
}

TEST(ThreadPoolTest, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(10007);
  pool.parallel_for(10007, 7, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPoolTest, ConcurrentCallersAndNestedCalls) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 100; ++r) {
        pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
          // Nested parallel_for runs inline instead of deadlocking.
          pool.parallel_for(e - b, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
        });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 100 * 64);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(TensorBytesTest, RejectsNegativeOverflowAndLimit) {
  EXPECT_EQ(*checked_tensor_bytes(DType::kFloat32, Shape{2, 3}), 24u);
  EXPECT_EQ(*checked_tensor_bytes(DType::kFloat32, Shape{int64_t{1} << 62, 0}), 0u);
  EXPECT_FALSE(checked_tensor_bytes(DType::kFloat32, Shape{-1, 3}).ok());
  EXPECT_FALSE(checked_tensor_bytes(DType::kInt64, Shape{int64_t{1} << 31, int64_t{1} << 31}).ok());
  size_t old = tensor_byte_limit();
  set_tensor_byte_limit(1000);
  auto r = checked_tensor_bytes(DType::kFloat32, Shape{251});
  set_tensor_byte_limit(old);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("1000-byte tensor limit"), std::string::npos);
}

}  // namespace
}  // namespace kiln
