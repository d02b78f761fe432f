// TfIdfVectorizer tests: the pool and inputs of the ONNX backend tests
// (test_tfidfvectorizer_*), plus string pools and the IDF/TFIDF modes by hand.
#include <gtest/gtest.h>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op1;

const std::vector<int32_t> kTokens = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};

std::vector<ir::Attribute> onnx_pool(int64_t min_gram, int64_t skip, const char* mode = "TF") {
  return {attr("mode", mode),
          attr("min_gram_length", min_gram),
          attr("max_gram_length", int64_t{2}),
          attr("max_skip_count", skip),
          attr("ngram_counts", std::vector<int64_t>{0, 4}),
          attr("ngram_indexes", std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}),
          attr("pool_int64s", std::vector<int64_t>{2, 3, 5, 4, 5, 6, 7, 8, 6, 7})};
}

void expect_floats(const Tensor& t, const Shape& shape, const std::vector<float>& want) {
  ASSERT_EQ(t.dtype(), DType::kFloat32);
  ASSERT_EQ(t.shape(), shape);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(t.data<float>()[i], want[i]) << "at " << i;
}

TEST(TfIdfVectorizerTest, UniAndBigramsWithSkips) {
  auto y = run_op1("TfIdfVectorizer", {Tensor::from_vector(kTokens)}, onnx_pool(1, 5), 9);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_floats(*y, Shape{7}, {0, 3, 1, 0, 1, 3, 1});
}

TEST(TfIdfVectorizerTest, BigramsPerRowOfABatch) {
  auto skip0 = run_op1("TfIdfVectorizer", {Tensor::from_vector(kTokens, Shape{2, 6})}, onnx_pool(2, 0), 9);
  ASSERT_TRUE(skip0.ok()) << skip0.status().to_string();
  expect_floats(*skip0, Shape{2, 7}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1});
  auto skip5 = run_op1("TfIdfVectorizer", {Tensor::from_vector(kTokens, Shape{2, 6})}, onnx_pool(2, 5), 9);
  ASSERT_TRUE(skip5.ok()) << skip5.status().to_string();
  expect_floats(*skip5, Shape{2, 7}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1});
}

TEST(TfIdfVectorizerTest, IdfCapsCountsAndTfIdfScales) {
  std::vector<ir::Attribute> a = onnx_pool(1, 5, "IDF");
  a.push_back(attr("weights", std::vector<float>{1, 2, 1, 1, 1, 0.5f, 1}));
  auto idf = run_op1("TfIdfVectorizer", {Tensor::from_vector(kTokens)}, a, 9);
  ASSERT_TRUE(idf.ok()) << idf.status().to_string();
  expect_floats(*idf, Shape{7}, {0, 2, 1, 0, 1, 0.5f, 1});
  a[0] = attr("mode", "TFIDF");
  auto tfidf = run_op1("TfIdfVectorizer", {Tensor::from_vector(kTokens)}, a, 9);
  ASSERT_TRUE(tfidf.ok()) << tfidf.status().to_string();
  expect_floats(*tfidf, Shape{7}, {0, 6, 1, 0, 1, 1.5f, 1});
}

TEST(TfIdfVectorizerTest, WeightsBelongToOutputColumns) {
  // Pool unigrams 7 -> column 1 and 9 -> column 0; weights are per column.
  std::vector<ir::Attribute> a = {attr("mode", "TFIDF"),
                                  attr("min_gram_length", int64_t{1}),
                                  attr("max_gram_length", int64_t{1}),
                                  attr("max_skip_count", int64_t{0}),
                                  attr("ngram_counts", std::vector<int64_t>{0}),
                                  attr("ngram_indexes", std::vector<int64_t>{1, 0}),
                                  attr("pool_int64s", std::vector<int64_t>{7, 9}),
                                  attr("weights", std::vector<float>{10, 100})};
  auto y = run_op1("TfIdfVectorizer", {Tensor::from_vector<int64_t>({7, 7, 9})}, a, 9);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_floats(*y, Shape{2}, {10, 200});
  a.back() = attr("weights", std::vector<float>{10});
  auto short_weights = run_op1("TfIdfVectorizer", {Tensor::from_vector<int64_t>({7})}, a, 9);
  ASSERT_FALSE(short_weights.ok());
  EXPECT_NE(short_weights.status().message().find("weights has 1 entries"), std::string::npos);
}

TEST(TfIdfVectorizerTest, StringPoolAndIndexMapping) {
  // Unigram "b" -> column 2, bigram ("a", "b") -> column 0.
  std::vector<ir::Attribute> a = {attr("mode", "TF"),
                                  attr("min_gram_length", int64_t{1}),
                                  attr("max_gram_length", int64_t{2}),
                                  attr("max_skip_count", int64_t{0}),
                                  attr("ngram_counts", std::vector<int64_t>{0, 1}),
                                  attr("ngram_indexes", std::vector<int64_t>{2, 0}),
                                  attr("pool_strings", std::vector<std::string>{"b", "a", "b"})};
  Tensor x = Tensor::from_vector<std::string>({"a", "b", "c", "a", "b", "b"});
  auto y = run_op1("TfIdfVectorizer", {x}, a, 9);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_floats(*y, Shape{3}, {2, 0, 3});
}

TEST(TfIdfVectorizerTest, RejectsMismatchedInputAndBadPool) {
  auto strings = run_op1("TfIdfVectorizer", {Tensor::from_vector<std::string>({"a"})}, onnx_pool(1, 0), 9);
  ASSERT_FALSE(strings.ok());
  EXPECT_NE(strings.status().message().find("pool holds integers"), std::string::npos) << strings.status().message();
  std::vector<ir::Attribute> a = onnx_pool(1, 0);
  a[4] = attr("ngram_counts", std::vector<int64_t>{0, 3});  // 7 values do not make bigrams
  auto bad = run_op1("TfIdfVectorizer", {Tensor::from_vector(kTokens)}, a, 9);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ngram_counts[1]"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace kiln
