// RNN/GRU/LSTM tests. The *Defaults values come from the ONNX backend test
// data (test_simple_rnn_defaults, test_gru_defaults, test_lstm_defaults,
// test_lstm_with_peepholes); the bidirectional cases from an independent
// numpy implementation of the ONNX equations (per batch entry, per step).
#include <gtest/gtest.h>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::OpCall;
using testing::run_op;

Tensor filled(Shape s, float v) {
  std::vector<float> d(static_cast<size_t>(s.numel()), v);
  return Tensor::from_vector(d, s);
}

void expect_values(const Value& v, const Shape& shape, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_TRUE(v.is_tensor());
  const Tensor& t = v.tensor();
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(static_cast<size_t>(t.numel()), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.data<float>()[i], want[i], tol) << "at " << i;
}

Result<std::vector<Value>> run_rnn(const std::string& op, std::vector<Value> inputs, std::vector<ir::Attribute> attrs,
                                   size_t outputs = 2, int opset = 14) {
  OpCall call;
  call.op_type = op;
  call.inputs = std::move(inputs);
  call.attrs = std::move(attrs);
  call.opset = opset;
  call.num_outputs = outputs;
  return run_op(call);
}

Tensor x_1to6() { return Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{1, 3, 2}); }

TEST(RnnTest, SimpleRnnDefaults) {
  auto r = run_rnn("RNN", {x_1to6(), filled({1, 4, 2}, 0.1f), filled({1, 4, 4}, 0.1f)}, {attr("hidden_size", 4)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_values((*r)[1], Shape{1, 3, 4},
                {0.29131263f, 0.29131263f, 0.29131263f, 0.29131263f, 0.6043678f, 0.6043678f, 0.6043678f, 0.6043678f,
                 0.800499f, 0.800499f, 0.800499f, 0.800499f});
}

TEST(RnnTest, HiddenSizeDefaultsToRsLastDimension) {
  auto r = run_rnn("RNN", {x_1to6(), filled({1, 4, 2}, 0.1f), filled({1, 4, 4}, 0.1f)}, {});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ((*r)[1].tensor().shape(), (Shape{1, 3, 4}));
  EXPECT_NEAR((*r)[1].tensor().data<float>()[4], 0.6043678f, 1e-5f);
}

TEST(RnnTest, GruDefaults) {
  auto r = run_rnn("GRU", {x_1to6(), filled({1, 15, 2}, 0.1f), filled({1, 15, 5}, 0.1f)}, {attr("hidden_size", 5)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& yh = (*r)[1].tensor();
  ASSERT_EQ(yh.shape(), (Shape{1, 3, 5}));
  EXPECT_NEAR(yh.data<float>()[0], 0.12397026f, 1e-5f);
  EXPECT_NEAR(yh.data<float>()[5], 0.20053662f, 1e-5f);
  EXPECT_NEAR(yh.data<float>()[10], 0.19991654f, 1e-5f);
}

TEST(RnnTest, LstmDefaults) {
  auto r = run_rnn("LSTM", {x_1to6(), filled({1, 12, 2}, 0.1f), filled({1, 12, 3}, 0.1f)}, {attr("hidden_size", 3)}, 3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_values((*r)[1], Shape{1, 3, 3},
                {0.0952412f, 0.0952412f, 0.0952412f, 0.25606447f, 0.25606447f, 0.25606447f, 0.40323776f, 0.40323776f,
                 0.40323776f});
  EXPECT_EQ((*r)[2].tensor().shape(), (Shape{1, 3, 3}));
}

TEST(RnnTest, LstmPeepholes) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, Shape{1, 2, 4});
  Tensor lens = Tensor::from_vector<int32_t>({1, 1});
  auto r = run_rnn("LSTM",
                   {x, filled({1, 12, 4}, 0.1f), filled({1, 12, 3}, 0.1f), filled({1, 24}, 0.f), lens,
                    filled({1, 2, 3}, 0.f), filled({1, 2, 3}, 0.f), filled({1, 9}, 0.1f)},
                   {attr("hidden_size", 3)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_values((*r)[1], Shape{1, 2, 3}, {0.37506911f, 0.37506911f, 0.37506911f, 0.6801309f, 0.6801309f, 0.6801309f});
}

// Shared by the bidirectional cases: seq 3, batch 2, input 2, hidden 2.
const std::vector<float> kX = {0.1f, 0.43f, 0.21f, 0.09f, -0.15f, 0.29f, -0.12f, 0.78f, 0.93f, -0.23f, 0.58f, 0.06f};

TEST(RnnTest, GruBidirectionalLinearBeforeResetWithSequenceLens) {
  Tensor x = Tensor::from_vector<float>(kX, Shape{3, 2, 2});
  Tensor w = Tensor::from_vector<float>({0.14f, 0.85f, -0.86f, -0.83f, -0.96f, 0.67f, 0.56f, 0.74f, 0.96f, 0.6f, -0.08f,
                                         0.56f, -0.76f, 0.28f, -0.71f, 0.89f, 0.04f, -0.17f, -0.47f, 0.55f, -0.09f,
                                         0.14f, -0.96f, 0.24f},
                                        Shape{2, 6, 2});
  Tensor r = Tensor::from_vector<float>({0.22f, 0.23f, 0.89f, 0.36f, -0.28f, -0.13f, 0.4f, -0.88f, 0.33f, 0.34f,
                                         -0.58f, -0.74f, -0.37f, -0.27f, 0.14f, -0.12f, 0.98f, -0.8f, -0.58f, -0.68f,
                                         0.31f, -0.49f, -0.07f, -0.51f},
                                        Shape{2, 6, 2});
  Tensor b = Tensor::from_vector<float>({-0.68f, -0.78f, 0.31f, -0.72f, -0.61f, -0.26f, 0.64f, -0.81f, 0.68f, -0.81f,
                                         0.95f, -0.06f, 0.95f, 0.21f, 0.48f, -0.92f, -0.43f, -0.76f, -0.41f, -0.76f,
                                         -0.36f, -0.17f, -0.87f, 0.38f},
                                        Shape{2, 12});
  Tensor lens = Tensor::from_vector<int32_t>({3, 2});
  Tensor h0 = Tensor::from_vector<float>({0.13f, -0.47f, 0.05f, -0.81f, 0.15f, 0.86f, -0.36f, 0.33f}, Shape{2, 2, 2});
  auto res = run_rnn("GRU", {x, w, r, b, lens, h0},
                     {attr("hidden_size", 2), attr("direction", "bidirectional"), attr("linear_before_reset", 1)});
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  expect_values((*res)[0], Shape{3, 2, 2, 2},
                {0.2332988f, -0.01301563f, 0.09830888f, -0.130827f, -0.5349234f, -0.432302f, -0.5281641f,
                 -0.4457486f, 0.2247997f, -0.1044517f, 0.2344298f, 0.1445512f, -0.4881895f, -0.3958502f,
                 -0.4320935f, 0.009874153f, 0.3918938f, -0.4164142f, 0, 0, -0.4370667f, -0.6085569f, 0, 0});
  expect_values((*res)[1], Shape{2, 2, 2},
                {0.3918938f, -0.4164142f, 0.2344298f, 0.1445512f, -0.5349234f, -0.432302f, -0.5281641f, -0.4457486f});
}

std::vector<Value> lstm_bidirectional_inputs() {
  Tensor x = Tensor::from_vector<float>(kX, Shape{3, 2, 2});
  Tensor w = Tensor::from_vector<float>(
      {0.4f, -0.41f, 0.63f, -0.21f, 0.76f, 0.16f, 0.76f, 0.39f, 0.45f, 0.f, 0.91f, 0.29f, -0.15f, 0.21f, -0.96f, -0.4f,
       0.32f, -0.42f, 0.24f, -0.14f, -0.73f, -0.4f, 0.14f, 0.18f, 0.15f, 0.31f, 0.3f, -0.14f, 0.79f, -0.26f, -0.13f, 0.78f},
      Shape{2, 8, 2});
  Tensor r = Tensor::from_vector<float>(
      {0.61f, 0.41f, -0.8f, 0.84f, 0.43f, 1.f, -0.7f, 0.74f, -0.68f, 0.23f, -0.75f, 0.7f, 0.61f, 0.14f, -0.19f, -0.86f,
       0.39f, -0.09f, 0.44f, 0.73f, 0.95f, 0.71f, -0.98f, -0.28f, 0.46f, -0.66f, 0.04f, -0.89f, -0.6f, -0.96f, 0.59f,
       -0.55f},
      Shape{2, 8, 2});
  Tensor b = Tensor::from_vector<float>(
      {-0.31f, 0.86f, 0.41f, -0.94f, -0.67f, 0.24f, 0.15f, -0.52f, 0.87f, 0.23f, 0.07f, 0.18f, 0.46f, -0.38f, -0.2f,
       -0.58f, -0.63f, 0.89f, 0.48f, -0.02f, -0.55f, -0.49f, -0.88f, -0.13f, -0.38f, 0.39f, -0.24f, -0.64f, -0.95f,
       -0.87f, 0.36f, -0.09f},
      Shape{2, 16});
  Tensor lens = Tensor::from_vector<int32_t>({3, 2});
  Tensor h0 = Tensor::from_vector<float>({0.07f, 0.79f, 0.98f, -0.57f, 0.33f, -0.47f, -0.96f, 0.52f}, Shape{2, 2, 2});
  Tensor c0 = Tensor::from_vector<float>({-0.36f, -0.23f, 0.18f, 0.66f, 0.26f, 0.75f, -0.45f, 0.6f}, Shape{2, 2, 2});
  Tensor p = Tensor::from_vector<float>({-0.63f, 0.91f, 0.37f, -0.57f, 0.89f, 0.46f, -0.49f, -0.57f, 0.04f, -0.95f,
                                         -0.59f, -0.15f},
                                        Shape{2, 6});
  return {x, w, r, b, lens, h0, c0, p};
}

const std::vector<float> kLstmY = {-0.01639279f, -0.3412387f, 0.2241071f, -0.0684751f, -0.08523828f, 0.02122757f,
                                   -0.07590497f, -0.07385956f, -0.01187947f, -0.1672149f, 0.1914023f, -0.1878468f,
                                   -0.07292867f, 0.0287748f, -0.1113315f, -0.06637384f, -0.1395528f, -0.3735043f,
                                   0, 0, 0.1006716f, 0.05602167f, 0, 0};
const std::vector<float> kLstmYc = {-0.1988718f, -0.8220538f, 0.2997498f, -0.5276328f,
                                    -0.1776808f, 0.05848446f, -0.1619237f, -0.1772372f};

TEST(RnnTest, LstmBidirectionalPeepholesClipSequenceLens) {
  auto res = run_rnn("LSTM", lstm_bidirectional_inputs(),
                     {attr("hidden_size", 2), attr("direction", "bidirectional"), attr("clip", 0.9f)}, 3);
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  expect_values((*res)[0], Shape{3, 2, 2, 2}, kLstmY);
  expect_values((*res)[2], Shape{2, 2, 2}, kLstmYc);
}

TEST(RnnTest, ConstantWeightsPackedAtLoadGiveTheSameResults) {
  // With W and R known at load the kernel packs them once; results must not
  // change. GRU without linear_before_reset packs R in two parts.
  std::vector<Value> in = lstm_bidirectional_inputs();
  for (const char* op : {"GRU", "LSTM"}) {
    for (int lbr = 0; lbr < 2; ++lbr) {
      std::vector<Value> inputs = in;
      const int64_t gates = std::string(op) == "GRU" ? 3 : 4;
      // Trim W, R, B of the LSTM case to the GRU's gate count.
      auto trim = [&](const Tensor& t, int64_t rows_per_dir, int64_t keep) {
        std::vector<float> v;
        const int64_t inner = t.numel() / (2 * rows_per_dir);
        for (int64_t d = 0; d < 2; ++d)
          for (int64_t r = 0; r < keep; ++r)
            for (int64_t k = 0; k < inner; ++k) v.push_back(t.data<float>()[(d * rows_per_dir + r) * inner + k]);
        Shape s = t.shape();
        if (s.rank() == 3) s[1] = keep; else s[1] = keep * inner;
        return Tensor::from_vector(v, s);
      };
      inputs[1] = trim(in[1].tensor(), 8, gates * 2);
      inputs[2] = trim(in[2].tensor(), 8, gates * 2);
      inputs[3] = trim(in[3].tensor(), 16, gates * 4);
      if (gates == 3) inputs.resize(6);
      std::vector<ir::Attribute> attrs = {attr("hidden_size", 2), attr("direction", "bidirectional"),
                                          attr("linear_before_reset", lbr)};
      auto plain = run_rnn(op, inputs, attrs);
      OpCall call;
      call.op_type = op;
      call.inputs = inputs;
      call.attrs = attrs;
      call.opset = 14;
      call.num_outputs = 2;
      call.inputs_are_constant = true;
      auto packed = run_op(call);
      ASSERT_TRUE(plain.ok() && packed.ok()) << op;
      const Tensor& a = (*plain)[0].tensor();
      const Tensor& b = (*packed)[0].tensor();
      ASSERT_EQ(a.shape(), b.shape());
      for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-6f) << op << " " << i;
    }
  }
  OpCall lstm;
  lstm.op_type = "LSTM";
  lstm.inputs = in;
  lstm.attrs = {attr("hidden_size", 2), attr("direction", "bidirectional"), attr("clip", 0.9f)};
  lstm.opset = 14;
  lstm.num_outputs = 3;
  lstm.inputs_are_constant = true;
  auto res = run_op(lstm);
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  expect_values((*res)[0], Shape{3, 2, 2, 2}, kLstmY);
}

TEST(RnnTest, LayoutOneTransposesInputsAndOutputs) {
  // The same LSTM with batch-first tensors: X [batch, seq, in], states
  // [batch, dir, hidden], Y [batch, seq, dir, hidden].
  std::vector<Value> in = lstm_bidirectional_inputs();
  auto transpose3 = [](const Tensor& t) {  // swap dims 0 and 1
    Tensor o = Tensor::allocate(t.dtype(), Shape{t.dim(1), t.dim(0), t.dim(2)});
    for (int64_t i = 0; i < t.dim(0); ++i)
      for (int64_t j = 0; j < t.dim(1); ++j)
        for (int64_t k = 0; k < t.dim(2); ++k)
          o.data<float>()[(j * t.dim(0) + i) * t.dim(2) + k] = t.data<float>()[(i * t.dim(1) + j) * t.dim(2) + k];
    return o;
  };
  in[0] = transpose3(in[0].tensor());
  in[5] = transpose3(in[5].tensor());
  in[6] = transpose3(in[6].tensor());
  // Runtime weights (the general path) and constant ones (packed at load:
  // the sliced path, which converts X and Y of layout 1 as well).
  for (bool constant : {false, true}) {
    OpCall call;
    call.op_type = "LSTM";
    call.inputs = in;
    call.attrs = {attr("hidden_size", 2), attr("direction", "bidirectional"), attr("clip", 0.9f), attr("layout", 1)};
    call.opset = 14;
    call.num_outputs = 3;
    call.inputs_are_constant = constant;
    auto res = run_op(call);
    ASSERT_TRUE(res.ok()) << res.status().to_string();
    const Tensor& y = (*res)[0].tensor();
    ASSERT_EQ(y.shape(), (Shape{2, 3, 2, 2}));
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t d = 0; d < 2; ++d)
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t k = 0; k < 2; ++k)
            EXPECT_NEAR(y.data<float>()[((b * 3 + t) * 2 + d) * 2 + k],
                        kLstmY[static_cast<size_t>(((t * 2 + d) * 2 + b) * 2 + k)], 1e-5f)
                << (constant ? "constant weights" : "runtime weights");
    const Tensor& yc = (*res)[2].tensor();
    ASSERT_EQ(yc.shape(), (Shape{2, 2, 2}));
    EXPECT_NEAR(yc.data<float>()[2], kLstmYc[4], 1e-5f);  // batch 0, reverse direction
  }
}

TEST(RnnTest, ReverseEqualsForwardOnReversedInput) {
  std::vector<float> xs = {1, -2, 0.5f, 3, -1, 2};
  std::vector<float> xr = {-1, 2, 0.5f, 3, 1, -2};  // the 3 steps (of 2 values) reversed
  Tensor w = Tensor::from_vector<float>({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, Shape{1, 3, 2});
  Tensor r = Tensor::from_vector<float>({0.2f, 0.1f, -0.3f, 0.3f, 0.2f, 0.1f, -0.1f, 0.2f, 0.4f}, Shape{1, 3, 3});
  auto fwd = run_rnn("RNN", {Tensor::from_vector(xr, Shape{3, 1, 2}), w, r}, {attr("hidden_size", 3)});
  auto rev = run_rnn("RNN", {Tensor::from_vector(xs, Shape{3, 1, 2}), w, r},
                     {attr("hidden_size", 3), attr("direction", "reverse"), attr("activations", std::vector<std::string>{"Tanh"})});
  ASSERT_TRUE(fwd.ok() && rev.ok());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR((*fwd)[1].tensor().data<float>()[i], (*rev)[1].tensor().data<float>()[i], 1e-6f);
}

TEST(RnnTest, ActivationAlphaIsUsed) {
  // Affine(alpha=2, beta=1) on a zero recurrence: H = 2 * (x W^T) + 1.
  Tensor x = Tensor::from_vector<float>({1, 2}, Shape{1, 1, 2});
  Tensor w = Tensor::from_vector<float>({1, 1}, Shape{1, 1, 2});
  Tensor r = Tensor::from_vector<float>({0}, Shape{1, 1, 1});
  auto res = run_rnn("RNN", {x, w, r},
                     {attr("hidden_size", 1), attr("activations", std::vector<std::string>{"Affine"}),
                      attr("activation_alpha", std::vector<float>{2.f}), attr("activation_beta", std::vector<float>{1.f})});
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  EXPECT_FLOAT_EQ((*res)[1].tensor().data<float>()[0], 7.f);
}

TEST(RnnTest, RejectsBadShapesAndAttributes) {
  auto bad_w = run_rnn("GRU", {x_1to6(), filled({1, 12, 2}, 0.1f), filled({1, 15, 5}, 0.1f)}, {attr("hidden_size", 5)});
  ASSERT_FALSE(bad_w.ok());
  EXPECT_NE(bad_w.status().message().find("input 1 (W) has shape [1, 12, 2], expected [1, 15, 2]"), std::string::npos)
      << bad_w.status().message();
  auto zero_hidden = run_rnn("RNN", {x_1to6(), filled({1, 4, 2}, 0.1f), filled({1, 4, 4}, 0.1f)}, {attr("hidden_size", 0)});
  ASSERT_FALSE(zero_hidden.ok());
  EXPECT_NE(zero_hidden.status().message().find("hidden_size"), std::string::npos);
  auto bad_act = run_rnn("RNN", {x_1to6(), filled({1, 4, 2}, 0.1f), filled({1, 4, 4}, 0.1f)},
                         {attr("hidden_size", 4), attr("activations", std::vector<std::string>{"Swish"})});
  ASSERT_FALSE(bad_act.ok());
  EXPECT_NE(bad_act.status().message().find("'Swish'"), std::string::npos);
  auto bad_lens = run_rnn("RNN", {x_1to6(), filled({1, 4, 2}, 0.1f), filled({1, 4, 4}, 0.1f), Value::none(),
                                  Tensor::from_vector<int32_t>({1, 5, 1})},
                          {attr("hidden_size", 4)});
  ASSERT_FALSE(bad_lens.ok());
  EXPECT_NE(bad_lens.status().message().find("sequence_lens"), std::string::npos);
}

}  // namespace
}  // namespace kiln
