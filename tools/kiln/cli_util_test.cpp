#include "cli_util.h"

#include <gtest/gtest.h>

namespace kiln::cli {
namespace {

TEST(CliUtilTest, OneLineFoldsNewlinesAndScrubsBytes) {
  EXPECT_EQ(one_line("a\nb\r\n\nc\n"), "a; b; c");
  EXPECT_EQ(one_line("tab\there"), "tab here");
  EXPECT_EQ(one_line("bell\x07 esc\x1b[0m"), "bell? esc?[0m");
  EXPECT_EQ(one_line("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // valid UTF-8 stays
  EXPECT_EQ(one_line("bad \xd7 \xff\xfe end \xe2\x82"), "bad ? ?? end ??");
}

TEST(CliUtilTest, ParsesFlagsBothWaysAndPositionals) {
  const FlagSpec specs[] = {{"--threads", true, false}, {"--input", true, true}, {"--quiet", false, false}};
  const std::vector<std::string> argv = {"m.onnx", "--threads", "4", "--input=a=x.npy", "--input", "b=y.npy",
                                         "--quiet", "--", "--not-a-flag"};
  Result<Args> args = Args::parse(argv, specs, "run");
  ASSERT_TRUE(args.is_ok()) << args.status().to_string();
  EXPECT_EQ(args->positionals(), (std::vector<std::string>{"m.onnx", "--not-a-flag"}));
  EXPECT_EQ(args->value("--threads"), "4");
  EXPECT_EQ(args->values("--input"), (std::vector<std::string>{"a=x.npy", "b=y.npy"}));
  EXPECT_TRUE(args->has("--quiet"));
  EXPECT_FALSE(args->value("--missing").has_value());
}

TEST(CliUtilTest, RejectsBadFlags) {
  const FlagSpec specs[] = {{"--threads", true, false}, {"--quiet", false, false}};
  auto error = [&](std::vector<std::string> argv) {
    Result<Args> a = Args::parse(argv, specs, "run");
    return a.is_ok() ? std::string("(ok)") : a.status().message();
  };
  EXPECT_EQ(error({"--fast"}), "unknown flag '--fast' for 'kiln run' (see kiln run --help)");
  EXPECT_EQ(error({"--threads"}), "flag --threads needs a value");
  EXPECT_EQ(error({"--quiet=yes"}), "flag --quiet takes no value");
  EXPECT_EQ(error({"--threads", "1", "--threads", "2"}), "flag --threads is given more than once");
}

TEST(CliUtilTest, ParsesIntegerFlags) {
  EXPECT_EQ(*parse_int_flag("--n", "12", 0, 100), 12);
  EXPECT_FALSE(parse_int_flag("--n", "12x", 0, 100).is_ok());
  EXPECT_FALSE(parse_int_flag("--n", "", 0, 100).is_ok());
  Result<int64_t> r = parse_int_flag("--n", "101", 0, 100);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "--n expects an integer in [0, 100], got '101'");
}

TEST(CliUtilTest, DescribesAndPreviewsValues) {
  Value t(Tensor::from_vector<float>({1.5f, -2, 3, 4, 5, 6, 7}, Shape{7}));
  EXPECT_EQ(describe_type(t), "float32[7]");
  EXPECT_EQ(preview_values(t, 3), "1.5, -2, 3, ...");
  Value s = Value::sequence({Tensor::from_vector<int64_t>({1, 2}), Tensor::from_vector<int64_t>({3})});
  EXPECT_EQ(describe_type(s), "seq(2 x int64[2], ...)");
  EXPECT_EQ(describe_type(Value::none()), "none");
  EXPECT_EQ(preview_values(Value(Tensor::from_vector<bool>({true, false}))), "true, false");
  EXPECT_EQ(multi_index(Shape{2, 3, 4}, 23), "[1, 2, 3]");
}

}  // namespace
}  // namespace kiln::cli
