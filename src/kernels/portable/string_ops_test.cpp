#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using namespace kiln::testing;

const std::vector<std::string> kDays = {"monday", "tuesday", "wednesday", "thursday"};

TEST(StringNormalizerTest, CaseSensitiveStopwordsAndLower) {
  Tensor y = run_ok("StringNormalizer", {strs(kDays, {4})},
                    {attr("case_change_action", "LOWER"), attr("is_case_sensitive", 1),
                     attr("stopwords", std::vector<std::string>{"monday"})},
                    10);
  EXPECT_EQ(y.shape(), (Shape{3}));
  EXPECT_EQ(vals<std::string>(y), (std::vector<std::string>{"tuesday", "wednesday", "thursday"}));
}

TEST(StringNormalizerTest, UpperTwoDimsCaseInsensitive) {
  Tensor y = run_ok("StringNormalizer",
                    {strs({"Monday", "tuesday", "wednesday", "MONDAY", "tuesday"}, {1, 5})},
                    {attr("case_change_action", "UPPER"), attr("stopwords", std::vector<std::string>{"monday"})}, 10);
  EXPECT_EQ(y.shape(), (Shape{1, 3}));
  EXPECT_EQ(vals<std::string>(y), (std::vector<std::string>{"TUESDAY", "WEDNESDAY", "TUESDAY"}));
}

TEST(StringNormalizerTest, CaseSensitiveKeepsOtherCases) {
  Tensor y = run_ok("StringNormalizer", {strs({"Monday", "monday"}, {2})},
                    {attr("is_case_sensitive", 1), attr("stopwords", std::vector<std::string>{"monday"})}, 10);
  EXPECT_EQ(vals<std::string>(y), (std::vector<std::string>{"Monday"}));
}

TEST(StringNormalizerTest, AllDroppedGivesOneEmptyString) {
  Tensor a = run_ok("StringNormalizer", {strs({"monday", "monday"}, {2})},
                    {attr("case_change_action", "UPPER"), attr("stopwords", std::vector<std::string>{"monday"})}, 10);
  EXPECT_EQ(a.shape(), (Shape{1}));
  EXPECT_EQ(vals<std::string>(a), (std::vector<std::string>{""}));
  Tensor b = run_ok("StringNormalizer", {strs({"monday"}, {1, 1})},
                    {attr("stopwords", std::vector<std::string>{"monday"})}, 10);
  EXPECT_EQ(b.shape(), (Shape{1, 1}));
}

TEST(StringNormalizerTest, NoStopwordsNoChange) {
  Tensor y = run_ok("StringNormalizer", {strs({"Mon", "tue"}, {2})}, {attr("is_case_sensitive", 1)}, 10);
  EXPECT_EQ(vals<std::string>(y), (std::vector<std::string>{"Mon", "tue"}));
}

TEST(StringNormalizerTest, NonAsciiCaseMapping) {
  Tensor up = run_ok("StringNormalizer", {strs({"straße café", "ελλάδα", "привет", "ÿ"}, {4})},
                     {attr("case_change_action", "UPPER")}, 10);
  EXPECT_EQ(vals<std::string>(up), (std::vector<std::string>{"STRAßE CAFÉ", "ΕΛΛΆΔΑ", "ПРИВЕТ", "Ÿ"}));
  Tensor low = run_ok("StringNormalizer", {strs({"ÀÉÎÕÜ", "ŁÓDŹ", "ΣΟΦΊΑ", "\xff\xfe" "AB"}, {4})},
                      {attr("case_change_action", "LOWER")}, 10);
  EXPECT_EQ(vals<std::string>(low), (std::vector<std::string>{"àéîõü", "łódź", "σοφία", "\xff\xfe" "ab"}));
}

TEST(StringNormalizerTest, CaseInsensitiveStopwordsMatchNonAscii) {
  Tensor y = run_ok("StringNormalizer", {strs({"École", "ecole", "ÉCOLE"}, {3})},
                    {attr("stopwords", std::vector<std::string>{"école"})}, 10);
  EXPECT_EQ(vals<std::string>(y), (std::vector<std::string>{"ecole"}));
}

TEST(StringNormalizerTest, Errors) {
  run_error("StringNormalizer", {strs({"a", "b", "c", "d"}, {2, 2})}, {}, 10);
  run_error("StringNormalizer", {f32({1})}, {}, 10);
  run_error("StringNormalizer", {strs({"a"}, {1})}, {attr("case_change_action", "TITLE")}, 10);
}

}  // namespace
}  // namespace kiln
