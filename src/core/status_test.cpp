#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/status.h"

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

// make_status prints what `std::ostream <<` would, without <sstream>.
TEST(StatusTest, MessagesPrintArgumentsAsAStreamWould) {
  const char* null_text = nullptr;
  std::string_view view = "view";
  EXPECT_EQ(invalid_argument("a", 'b', std::string("c"), view, null_text).message(), "abcview");
  EXPECT_EQ(invalid_argument(-3, " ", 42u, " ", int64_t{-9000000000}, " ", true, false).message(),
            "-3 42 -9000000000 10");
  EXPECT_EQ(invalid_argument(0.5, " ", 1e-7f, " ", 123456789.0, " ", 2.0).message(), "0.5 1e-07 1.23457e+08 2");
  EXPECT_EQ(invalid_argument(static_cast<int8_t>('x'), StatusCode::kInternal).message(),
            "x" + std::to_string(static_cast<int>(StatusCode::kInternal)));
}

}  // namespace
}  // namespace kiln
