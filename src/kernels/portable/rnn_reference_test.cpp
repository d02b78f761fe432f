// RNN/GRU/LSTM against a naive double-precision transcription of the ONNX
// equations over random attribute combinations: direction, batch (the GEMV
// path up to 3, the GEMM path above), hidden sizes below and above one
// vector, sequence_lens, initial states, clip, peepholes, input_forget,
// linear_before_reset and activation lists with and without SIMD loops; with
// runtime and constant (packed at load) weights, on one, two and three threads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/testing/kernel_runner.h"
#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::OpCall;
using testing::run_op;

struct Act {
  std::string name;
  float alpha = 0.f, beta = 0.f;
  double operator()(double x) const {
    if (name == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
    if (name == "Tanh") return std::tanh(x);
    if (name == "Relu") return x > 0 ? x : 0.0;
    if (name == "HardSigmoid") return std::min(1.0, std::max(0.0, alpha * x + beta));
    if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
    return x / (1.0 + std::fabs(x));  // Softsign
  }
};

struct Case {
  std::string op;  // RNN, GRU, LSTM
  int64_t seq = 1, batch = 1, in = 1, hs = 1, nd = 1;
  bool reverse = false, lbr = false, input_forget = false, peep = false, bias = false, lens = false, init = false;
  float clip = 0.f;
  std::vector<Act> acts;  // per direction, in ONNX order
};

int gates(const std::string& op) { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }

struct Inputs {
  std::vector<float> x, w, r, b, h0, c0, p;
  std::vector<int32_t> lens;
};

// Y [seq][nd][batch][hs] by the ONNX equations, per batch entry and step.
std::vector<float> reference(const Case& c, const Inputs& in) {
  const int64_t g = gates(c.op), hs = c.hs, gh = g * hs, na = c.acts.size() / c.nd;
  std::vector<float> y(static_cast<size_t>(c.seq * c.nd * c.batch * hs), 0.f);
  auto at = [](const std::vector<float>& v, int64_t i) { return static_cast<double>(v[static_cast<size_t>(i)]); };
  auto clip = [&](double v) { return c.clip > 0 ? std::min<double>(std::max<double>(v, -c.clip), c.clip) : v; };
  for (int64_t d = 0; d < c.nd; ++d) {
    const Act* a = c.acts.data() + d * na;
    for (int64_t bb = 0; bb < c.batch; ++bb) {
      std::vector<double> h(static_cast<size_t>(hs), 0.0), cs(static_cast<size_t>(hs), 0.0);
      if (c.init)
        for (int64_t k = 0; k < hs; ++k) {
          h[static_cast<size_t>(k)] = at(in.h0, (d * c.batch + bb) * hs + k);
          if (c.op == "LSTM") cs[static_cast<size_t>(k)] = at(in.c0, (d * c.batch + bb) * hs + k);
        }
      const int64_t len = c.lens ? in.lens[static_cast<size_t>(bb)] : c.seq;
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = (d == 1 || c.reverse) ? len - 1 - step : step;
        // xw[j] = X W^T + Wb, hr[j] = H R^T + Rb for every gate row j.
        std::vector<double> xw(static_cast<size_t>(gh)), hr(static_cast<size_t>(gh));
        for (int64_t j = 0; j < gh; ++j) {
          double sx = c.bias ? at(in.b, d * 2 * gh + j) : 0.0, sh = c.bias ? at(in.b, d * 2 * gh + gh + j) : 0.0;
          for (int64_t k = 0; k < c.in; ++k)
            sx += at(in.x, (t * c.batch + bb) * c.in + k) * at(in.w, (d * gh + j) * c.in + k);
          for (int64_t k = 0; k < hs; ++k) sh += h[static_cast<size_t>(k)] * at(in.r, (d * gh + j) * hs + k);
          xw[static_cast<size_t>(j)] = sx;
          hr[static_cast<size_t>(j)] = sh;
        }
        std::vector<double> hn(static_cast<size_t>(hs)), reset(static_cast<size_t>(hs));
        if (c.op == "GRU")
          for (int64_t k = 0; k < hs; ++k) {
            const size_t rk = static_cast<size_t>(hs + k);
            reset[static_cast<size_t>(k)] = a[0](clip(xw[rk] + hr[rk]));
          }
        for (int64_t k = 0; k < hs; ++k) {
          auto X = [&](int64_t gate) { return xw[static_cast<size_t>(gate * hs + k)]; };
          auto H = [&](int64_t gate) { return hr[static_cast<size_t>(gate * hs + k)]; };
          const double hp = h[static_cast<size_t>(k)];
          if (c.op == "RNN") {
            hn[static_cast<size_t>(k)] = a[0](clip(X(0) + H(0)));
          } else if (c.op == "GRU") {
            const double z = a[0](clip(X(0) + H(0))), r = reset[static_cast<size_t>(k)];
            double ht;
            if (c.lbr) {
              ht = a[1](clip(X(2) + r * H(2)));
            } else {  // (r (.) H) Rh^T + Rbh
              double s = c.bias ? at(in.b, d * 2 * gh + gh + 2 * hs + k) : 0.0;
              for (int64_t q = 0; q < hs; ++q)
                s += at(in.r, (d * gh + 2 * hs + k) * hs + q) * reset[static_cast<size_t>(q)] *
                     h[static_cast<size_t>(q)];
              ht = a[1](clip(X(2) + s));
            }
            hn[static_cast<size_t>(k)] = (1 - z) * ht + z * hp;
          } else {
            const double cp = cs[static_cast<size_t>(k)];
            auto P = [&](int64_t i) { return c.peep ? at(in.p, d * 3 * hs + i * hs + k) : 0.0; };
            const double i = a[0](clip(X(0) + H(0) + P(0) * cp));
            const double f = c.input_forget ? 1 - i : a[0](clip(X(2) + H(2) + P(2) * cp));
            const double ct = f * cp + i * a[1](clip(X(3) + H(3)));
            const double o = a[0](clip(X(1) + H(1) + P(1) * ct));
            cs[static_cast<size_t>(k)] = ct;
            hn[static_cast<size_t>(k)] = o * a[2](ct);
          }
        }
        h = hn;
        for (int64_t k = 0; k < hs; ++k)
          y[static_cast<size_t>(((t * c.nd + d) * c.batch + bb) * hs + k)] =
              static_cast<float>(h[static_cast<size_t>(k)]);
      }
    }
  }
  return y;
}

std::vector<float> uniform(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = u(rng);
  return v;
}

void check(const Case& c, std::mt19937& rng, const std::string& what) {
  const int64_t gh = gates(c.op) * c.hs;
  const float scale = 1.f / std::sqrt(static_cast<float>(c.hs));
  Inputs in;
  in.x = uniform(rng, c.seq * c.batch * c.in, -1, 1);
  in.w = uniform(rng, c.nd * gh * c.in, -scale, scale);
  in.r = uniform(rng, c.nd * gh * c.hs, -scale, scale);
  in.b = uniform(rng, c.nd * 2 * gh, -0.5f, 0.5f);
  in.h0 = uniform(rng, c.nd * c.batch * c.hs, -1, 1);
  in.c0 = uniform(rng, c.nd * c.batch * c.hs, -1, 1);
  in.p = uniform(rng, c.nd * 3 * c.hs, -0.5f, 0.5f);
  for (int64_t bb = 0; bb < c.batch; ++bb)
    in.lens.push_back(static_cast<int32_t>(bb % 2 ? 1 + rng() % c.seq : c.seq));
  const std::vector<float> want = reference(c, in);

  std::vector<Value> inputs = {Tensor::from_vector(in.x, Shape{c.seq, c.batch, c.in}),
                               Tensor::from_vector(in.w, Shape{c.nd, gh, c.in}),
                               Tensor::from_vector(in.r, Shape{c.nd, gh, c.hs})};
  auto opt = [&](bool present, Value v) { inputs.push_back(present ? std::move(v) : Value::none()); };
  opt(c.bias, Tensor::from_vector(in.b, Shape{c.nd, 2 * gh}));
  opt(c.lens, Tensor::from_vector(in.lens, Shape{c.batch}));
  opt(c.init, Tensor::from_vector(in.h0, Shape{c.nd, c.batch, c.hs}));
  if (c.op == "LSTM") {
    opt(c.init, Tensor::from_vector(in.c0, Shape{c.nd, c.batch, c.hs}));
    opt(c.peep, Tensor::from_vector(in.p, Shape{c.nd, 3 * c.hs}));
  }
  std::vector<ir::Attribute> attrs = {attr("hidden_size", c.hs)};
  attrs.push_back(attr("direction", c.nd == 2 ? "bidirectional" : c.reverse ? "reverse" : "forward"));
  if (c.clip > 0) attrs.push_back(attr("clip", c.clip));
  if (c.op == "GRU") attrs.push_back(attr("linear_before_reset", int64_t{c.lbr}));
  if (c.op == "LSTM" && c.input_forget) attrs.push_back(attr("input_forget", int64_t{1}));
  std::vector<std::string> names;
  std::vector<float> alphas, betas;
  for (const Act& a : c.acts) {
    names.push_back(a.name);
    if (a.name == "HardSigmoid" || a.name == "LeakyRelu") alphas.push_back(a.alpha);
    if (a.name == "HardSigmoid") betas.push_back(a.beta);
  }
  attrs.push_back(attr("activations", names));
  if (!alphas.empty()) attrs.push_back(attr("activation_alpha", alphas));
  if (!betas.empty()) attrs.push_back(attr("activation_beta", betas));

  for (int variant = 0; variant < 6; ++variant) {
    OpCall call;
    call.op_type = c.op;
    call.inputs = inputs;
    call.attrs = attrs;
    call.opset = 14;
    call.num_outputs = 1;
    call.inputs_are_constant = variant % 2 == 1;
    call.threads = 1 + variant / 2;
    auto out = run_op(call);
    ASSERT_TRUE(out.ok()) << what << ": " << out.status().to_string();
    const Tensor& y = (*out)[0].tensor();
    ASSERT_EQ(y.shape(), (Shape{c.seq, c.nd, c.batch, c.hs})) << what;
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_NEAR(y.data<float>()[i], want[static_cast<size_t>(i)], 2e-5)
          << what << " variant " << variant << " at " << i;
  }
}

// Batches with enough gate values that each step's gate math is split over
// the pool by row (kParallelGateValues in rnn.cpp), variable lengths and
// both directions included.
TEST(RnnReferenceTest, MatchesNaiveWithRowsSplitOverThreads) {
  std::mt19937 rng(7);
  int t = 0;
  for (const char* op : {"LSTM", "GRU", "GRU"}) {
    for (int64_t nd : {1, 2}) {
      Case c;
      c.op = op;
      c.seq = 3;
      c.batch = 7;
      c.in = 5;
      c.hs = 120;
      c.nd = nd;
      c.lbr = t % 2;
      c.peep = t % 3 == 0;
      c.bias = true;
      c.lens = true;
      c.init = t % 2 == 1;
      const int per_dir = c.op == "GRU" ? 2 : 3;
      for (int64_t d = 0; d < nd; ++d)
        for (int i = 0; i < per_dir; ++i) c.acts.push_back(Act{i == 0 ? "Sigmoid" : "Tanh", 0.f, 0.f});
      check(c, rng, "rows case " + std::to_string(t++) + " " + c.op + " nd " + std::to_string(nd));
    }
  }
}

// LSTM with the default activations and constant weights runs slice by
// slice (rnn_lstm_sliced.h): several slices of 32 units and a partial last
// one, batches the engine multiplies row by row (<= 3) and packed (> 3),
// peepholes, input_forget, clip, sequence_lens, both directions.
TEST(RnnReferenceTest, LstmSlicedPathMatchesNaive) {
  std::mt19937 rng(11);
  const int64_t hidden[] = {32, 45, 64, 100};
  const int64_t batches[] = {1, 3, 4, 6};
  for (int t = 0; t < 16; ++t) {
    Case c;
    c.op = "LSTM";
    c.seq = 2 + t % 3;
    c.batch = batches[t % 4];
    c.in = 3 + t % 5;
    c.hs = hidden[(t / 4) % 4];
    c.nd = t % 3 == 2 ? 2 : 1;
    c.reverse = c.nd == 1 && t % 5 == 1;
    c.peep = t % 2 == 1;
    c.input_forget = t % 7 == 3;
    c.clip = t % 4 == 2 ? 0.9f : 0.f;
    c.bias = t % 3 != 1;
    c.lens = t % 2 == 0;
    c.init = t % 3 != 0;
    for (int64_t d = 0; d < c.nd; ++d)
      for (int i = 0; i < 3; ++i) c.acts.push_back(Act{i == 0 ? "Sigmoid" : "Tanh", 0.f, 0.f});
    check(c, rng, "sliced case " + std::to_string(t) + " hs " + std::to_string(c.hs) + " batch " +
                      std::to_string(c.batch) + " nd " + std::to_string(c.nd));
  }
}

TEST(RnnReferenceTest, MatchesNaiveOverAttributes) {
  std::mt19937 rng(31);
  const char* const ops[] = {"RNN", "GRU", "LSTM"};
  const char* const fns[] = {"Sigmoid", "Tanh", "Relu", "HardSigmoid", "LeakyRelu", "Softsign"};
  for (int t = 0; t < 90; ++t) {
    Case c;
    c.op = ops[t % 3];
    c.seq = 1 + static_cast<int64_t>(rng() % 6);
    c.batch = 1 + static_cast<int64_t>(rng() % 5);
    c.in = 1 + static_cast<int64_t>(rng() % 9);
    c.hs = (t / 3) % 2 ? 17 + static_cast<int64_t>(rng() % 24) : 1 + static_cast<int64_t>(rng() % 6);
    c.nd = rng() % 2 ? 2 : 1;
    c.reverse = c.nd == 1 && rng() % 2;
    c.lbr = rng() % 2;
    c.input_forget = rng() % 4 == 0;
    c.peep = rng() % 2;
    c.bias = rng() % 4 != 0;
    c.lens = rng() % 2;
    c.init = rng() % 2;
    c.clip = rng() % 3 == 0 ? 0.7f : 0.f;
    const int per_dir = c.op == "RNN" ? 1 : c.op == "GRU" ? 2 : 3;
    const bool defaults = rng() % 3 != 0;
    for (int64_t d = 0; d < c.nd; ++d)
      for (int i = 0; i < per_dir; ++i) {
        Act a;
        if (defaults) {
          a.name = (c.op == "RNN" || i > 0) ? "Tanh" : "Sigmoid";
        } else {
          a.name = fns[rng() % 6];
        }
        a.alpha = a.name == "HardSigmoid" ? 0.3f : 0.05f;
        a.beta = 0.45f;
        c.acts.push_back(a);
      }
    check(c, rng,
          "case " + std::to_string(t) + " " + c.op + " seq " + std::to_string(c.seq) + " batch " +
              std::to_string(c.batch) + " hs " + std::to_string(c.hs) + " nd " + std::to_string(c.nd) + " rev " +
              std::to_string(c.reverse) + " lbr " + std::to_string(c.lbr) + " peep " + std::to_string(c.peep) +
              " forget " + std::to_string(c.input_forget) + " bias " + std::to_string(c.bias) + " lens " +
              std::to_string(c.lens) + " init " + std::to_string(c.init) + " clip " + std::to_string(c.clip) +
              " acts " + c.acts[0].name);
  }
}

}  // namespace
}  // namespace kiln
