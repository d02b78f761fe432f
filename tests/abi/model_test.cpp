// Sessions over real ONNX models with the template plugin, compared with
// portable kernels: an MLP (a non-convex group split), symbolic batch dims,
// the custom op, and resnet18 (when torch can export it). The models come
// from models/make_models.py, run once into the build tree.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "abi_test_util.h"
#include "kiln/session.h"

namespace kiln::abi_test {
namespace {

namespace fs = std::filesystem;

class ModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = KILN_ABI_TEST_DATA;
    if (fs::exists(dir + "/mlp.onnx") && fs::exists(dir + "/resnet18.onnx")) return;
    const std::string cmd = "/usr/bin/python3 " + std::string(KILN_ABI_TEST_SOURCE) + "/models/make_models.py " + dir +
                            " --resnet18 > " + dir + ".log 2>&1";
    fs::create_directories(dir);
    int rc = std::system(cmd.c_str());
    if (rc != 0) std::fprintf(stderr, "make_models.py exited with %d (see %s.log)\n", rc, dir.c_str());
  }
  static std::string model(const std::string& name) { return std::string(KILN_ABI_TEST_DATA) + "/" + name; }
  static SessionOptions options(std::vector<std::string> backends) {
    SessionOptions o;
    o.backends = std::move(backends);
    o.backend_paths = {template_plugin()};
    return o;
  }
  static std::vector<Value> run(const Session& s, std::vector<NamedValue> in) {
    auto out = s.run(in);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? std::move(out).value() : std::vector<Value>{};
  }
};

TEST_F(ModelTest, MlpMatchesPortableWithANonConvexGroupSplit) {
  if (!fs::exists(model("mlp.onnx"))) GTEST_SKIP() << "make_models.py did not run (python3-onnx missing?)";
  auto t = Session::load(model("mlp.onnx"), options({"template"}));
  auto p = Session::load(model("mlp.onnx"), options({"portable"}));
  ASSERT_TRUE(t.ok() && p.ok()) << (t.ok() ? p.status() : t.status()).to_string();
  const PlacementReport& rep = (*t)->placement();
  ASSERT_EQ(rep.partitions.size(), 2u);
  EXPECT_EQ(rep.partitions[0].nodes,
            (std::vector<std::string>{"MatMul 'fc1'", "Add 'bias1'", "Relu 'relu1'"}));
  EXPECT_EQ(rep.partitions[1].nodes, (std::vector<std::string>{"Mul 'gated'", "MatMul 'fc2'"}));
  EXPECT_EQ(rep.partitions[1].inputs, (std::vector<std::string>{"r", "s"}));
  EXPECT_EQ(rep.num_fallback(), 1u);
  Tensor x = random_tensor({4, 16}, 2);
  expect_close(run(**t, {{"x", x}})[0].tensor(), run(**p, {{"x", x}})[0].tensor());
}

TEST_F(ModelTest, SymbolicBatchDimsRunAtEverySize) {
  if (!fs::exists(model("dynamic.onnx"))) GTEST_SKIP() << "make_models.py did not run";
  auto t = Session::load(model("dynamic.onnx"), options({"template"}));
  auto p = Session::load(model("dynamic.onnx"), options({"portable"}));
  ASSERT_TRUE(t.ok() && p.ok());
  EXPECT_EQ((*t)->placement().partitions.at(0).boundary_bytes, -1);
  for (int64_t n : {1, 3, 7, 2}) {
    Tensor x = random_tensor({n, 4}, static_cast<uint32_t>(n));
    expect_close(run(**t, {{"x", x}})[0].tensor(), run(**p, {{"x", x}})[0].tensor());
  }
}

TEST_F(ModelTest, CustomOpModelNeedsItsPlugin) {
  if (!fs::exists(model("custom_op.onnx"))) GTEST_SKIP() << "make_models.py did not run";
  auto t = Session::load(model("custom_op.onnx"), options({"template"}));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  Tensor a = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, Shape{2, 3});
  Tensor b = Tensor::from_vector<float>({2, 2, 2, 2, 2, 2}, Shape{2, 3});
  Tensor c = Tensor::from_vector<float>({1, 1, 1});
  auto y = run(**t, {{"a", a}, {"b", b}, {"c", c}});
  ASSERT_EQ(y.size(), 1u);
  const float want[] = {3, 0, 7, 0, 11, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[0].tensor().data<float>()[i], want[i]);
  auto without = Session::load(model("custom_op.onnx"), options({"portable"}));
  ASSERT_FALSE(without.ok());
  EXPECT_NE(without.status().message().find("kiln.template.MulAdd is a custom op of backend 'template', which is not selected"),
            std::string::npos)
      << without.status().message();
}

TEST_F(ModelTest, Resnet18MatchesPortableExactly) {
  if (!fs::exists(model("resnet18.onnx"))) GTEST_SKIP() << "resnet18 needs torch and torchvision";
  auto t = Session::load(model("resnet18.onnx"), options({"template"}));
  auto p = Session::load(model("resnet18.onnx"), options({"portable"}));
  ASSERT_TRUE(t.ok() && p.ok()) << (t.ok() ? p.status() : t.status()).to_string();
  const PlacementReport& rep = (*t)->placement();
  size_t relu = 0, add = 0;
  for (const PartitionInfo& part : rep.partitions)
    for (const auto& [op, n] : part.op_histogram) (op == "Relu" ? relu : add) += static_cast<size_t>(n);
  EXPECT_EQ(relu, 17u);
  EXPECT_EQ(add, 8u);
  EXPECT_EQ(rep.num_fallback(), 24u);  // 20 Conv, MaxPool, GlobalAveragePool, Flatten, Gemm
  Tensor x = random_tensor({1, 3, 224, 224}, 5);
  Tensor a = run(**t, {{"input", x}})[0].tensor();
  Tensor b = run(**p, {{"input", x}})[0].tensor();
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << i;  // Add and Relu are exact
}

TEST_F(ModelTest, Resnet18RequireNamesTheNodesTheTemplateCannotRun) {
  if (!fs::exists(model("resnet18.onnx"))) GTEST_SKIP() << "resnet18 needs torch and torchvision";
  SessionOptions o = options({"template"});
  o.fallback = FallbackPolicy::kRequire;
  auto t = Session::load(model("resnet18.onnx"), o);
  ASSERT_FALSE(t.ok());
  const std::string& m = t.status().message();
  EXPECT_NE(m.find("24 of 49 nodes would fall back"), std::string::npos) << m;
  EXPECT_NE(m.find("Conv '/conv1/Conv' (template: op Conv is not one of Add, Mul, Relu, MatMul)"), std::string::npos);
  EXPECT_NE(m.find("Gemm '/fc/Gemm'"), std::string::npos);
  EXPECT_EQ(m.find("Relu '"), std::string::npos);  // the template runs every Relu
}

TEST_F(ModelTest, BackendOptionsFlowThroughSessionOptions) {
  if (!fs::exists(model("mlp.onnx"))) GTEST_SKIP() << "make_models.py did not run";
  SessionOptions o = options({"template"});
  o.backend_options = {{"template", "fuse", "false"}};
  auto t = Session::load(model("mlp.onnx"), o);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)->placement().partitions.size(), 5u);
  o.backend_options = {{"template", "no_such_key", "1"}};
  auto bad = Session::load(model("mlp.onnx"), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown option 'no_such_key' for backend 'template'"), std::string::npos);
}

}  // namespace
}  // namespace kiln::abi_test
