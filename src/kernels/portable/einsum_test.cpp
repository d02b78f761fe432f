// Einsum against a brute-force evaluator (every assignment of label values).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

// Brute-force einsum for letter-only equations with an explicit output;
// a dim of size 1 broadcasts against the label's size elsewhere.
std::vector<double> brute_einsum(const std::string& eq, const std::vector<Tensor>& ops, Shape* out_shape) {
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string cur;
  for (char ch : eq.substr(0, arrow)) {
    if (ch == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  terms.push_back(cur);
  const std::string out = eq.substr(arrow + 2);
  std::map<char, int64_t> size;
  for (size_t t = 0; t < terms.size(); ++t)
    for (size_t i = 0; i < terms[t].size(); ++i) size[terms[t][i]] = std::max(size[terms[t][i]], ops[t].dim(i));
  std::vector<char> labels;
  for (auto& [l, s] : size) labels.push_back(l);
  *out_shape = Shape{};
  for (char l : out) out_shape->push_back(size[l]);
  std::vector<double> result(static_cast<size_t>(out_shape->numel()), 0.0);
  std::map<char, int64_t> v;
  for (char l : labels) v[l] = 0;
  for (;;) {
    double prod = 1;
    for (size_t t = 0; t < terms.size(); ++t) {
      int64_t off = 0;
      for (size_t i = 0; i < terms[t].size(); ++i) off = off * ops[t].dim(i) + (ops[t].dim(i) == 1 ? 0 : v[terms[t][i]]);
      prod *= ops[t].data<float>()[off];
    }
    int64_t o = 0;
    for (char l : out) o = o * size[l] + v[l];
    result[static_cast<size_t>(o)] += prod;
    size_t k = labels.size();
    while (k > 0) {
      --k;
      if (++v[labels[k]] < size[labels[k]]) break;
      v[labels[k]] = 0;
      if (k == 0) return result;
    }
    if (labels.empty()) return result;
  }
}

void check(const std::string& eq, const std::string& brute_eq, const std::vector<Shape>& shapes, std::mt19937& rng) {
  std::vector<Tensor> ops;
  std::vector<Value> inputs;
  for (const Shape& s : shapes) {
    ops.push_back(random_tensor(s, rng));
    inputs.push_back(ops.back());
  }
  Shape want_shape;
  const std::vector<double> want = brute_einsum(brute_eq, ops, &want_shape);
  auto y = run_op1("Einsum", inputs, {attr("equation", eq)}, 12);
  ASSERT_TRUE(y.ok()) << eq << ": " << y.status().to_string();
  ASSERT_EQ(y->shape(), want_shape) << eq;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y->data<float>()[i], want[i], 1e-4) << eq << " at " << i;
}

TEST(EinsumTest, MatchesBruteForce) {
  std::mt19937 rng(61);
  check("ij,jk->ik", "ij,jk->ik", {{3, 4}, {4, 5}}, rng);
  check("bij,bjk->bik", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, rng);
  check("ij->ji", "ij->ji", {{3, 5}}, rng);
  check("ij->i", "ij->i", {{3, 5}}, rng);
  check("ii->i", "ii->i", {{4, 4}}, rng);
  check("ii", "ii->", {{4, 4}}, rng);                 // trace, implicit scalar output
  check("i,i", "i,i->", {{6}, {6}}, rng);              // inner product
  check("i,j->ij", "i,j->ij", {{3}, {4}}, rng);        // outer product
  check("ij,jk", "ij,jk->ik", {{2, 3}, {3, 4}}, rng);  // implicit: letters used once, sorted
  check("ba,ac", "ba,ac->bc", {{2, 3}, {3, 4}}, rng);
  check("ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}, rng);
  check("bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}, rng);  // attention scores
  check("iij->ij", "iij->ij", {{3, 3, 2}}, rng);
  check("bii->bi", "bii->bi", {{2, 3, 3}}, rng);
  check("ijk,ikl->", "ijk,ikl->", {{2, 3, 4}, {2, 4, 3}}, rng);
  check("...ii->...i", "abii->abi", {{2, 3, 4, 4}}, rng);
  check("...ij,...jk->...ik", "abij,abjk->abik", {{2, 1, 3, 4}, {1, 5, 4, 2}}, rng);  // broadcast batch
  check("...ij,jk", "abij,jk->abik", {{2, 3, 3, 4}, {4, 5}}, rng);                  // implicit with ellipsis
  check(" ij , jk -> ik ", "ij,jk->ik", {{2, 2}, {2, 2}}, rng);                     // spaces
}

TEST(EinsumTest, IntegerAndDouble) {
  auto y = run_op1("Einsum", {Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2}), Tensor::from_vector<int64_t>({5, 6}, {2})},
                   {attr("equation", "ij,j->i")}, 12);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(std::vector<int64_t>(y->data<int64_t>(), y->data<int64_t>() + 2), (std::vector<int64_t>{17, 39}));
  auto d = run_op1("Einsum", {Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2})}, {attr("equation", "ii->")}, 12);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->shape(), Shape{});
  EXPECT_EQ(d->data<double>()[0], 5.0);
}

TEST(EinsumTest, RejectsBadEquations) {
  Tensor a = Tensor::zeros(DType::kFloat32, {2, 3});
  auto expect_error = [](const Result<Tensor>& r, const std::string& needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(run_op1("Einsum", {a}, {attr("equation", "ijk->i")}, 12), "does not match input 0");
  expect_error(run_op1("Einsum", {a, a}, {attr("equation", "ij->i")}, 12), "input terms");
  expect_error(run_op1("Einsum", {a, a}, {attr("equation", "ij,jk->ik")}, 12), "has size");
  expect_error(run_op1("Einsum", {a}, {attr("equation", "ij->iz")}, 12), "output label");
  expect_error(run_op1("Einsum", {a}, {attr("equation", "i1->i")}, 12), "invalid character");
  expect_error(run_op1("Einsum", {a}, {}, 12), "equation");
}

}  // namespace
}  // namespace kiln
