// The sliced LSTM's two forms of R (the engine's packing and the small-batch
// panels) against each other, each over every batch size (so the form not
// chosen for a batch at load is run too), hidden sizes with one, several and
// partial slices, sequence lengths, peepholes, clip, both directions and
// 1-3 threads. rnn_reference_test.cpp checks the op against the ONNX
// equations; this checks the forms agree where the op test cannot reach.
#include "kernels/portable/rnn_lstm_sliced.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

std::vector<float> uniform(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = u(rng);
  return v;
}

struct Result {
  std::vector<float> y, h, c;
};

Result run(const LstmSlicedWeights& wts, const LstmCellOptions& opt, int64_t seq, int64_t batch, bool reverse,
           const std::vector<float>& x, const std::vector<int64_t>& lens, const std::vector<float>& b,
           const std::vector<float>& h0, const std::vector<float>& c0, ThreadPool* pool) {
  const int64_t hs = wts.hidden;
  Result r{std::vector<float>(static_cast<size_t>(seq * batch * hs), -7.f), h0, c0};
  LstmSequence s;
  s.seq = seq;
  s.batch = batch;
  s.reverse = reverse;
  s.x = x.data();
  s.lens = lens.data();
  s.wb = b.data();
  s.rb = b.data() + 4 * hs;
  s.h = r.h.data();
  s.c = r.c.data();
  s.y = r.y.data();
  s.y_step = batch * hs;
  run_lstm_sliced(wts, opt, s, pool);
  return r;
}

TEST(LstmSlicedTest, EngineAndPanelFormsAgreeOverBatchesAndThreads) {
  std::mt19937 rng(5);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int t = 0;
  for (int64_t hs : {7, 32, 45, 100}) {
    const int64_t in = 3 + hs % 5, seq = 3;
    const float scale = 1.f / std::sqrt(static_cast<float>(hs));
    const std::vector<float> w = uniform(rng, 4 * hs * in, -scale, scale);
    const std::vector<float> r = uniform(rng, 4 * hs * hs, -scale, scale);
    const std::vector<float> b = uniform(rng, 8 * hs, -0.5f, 0.5f);
    const std::vector<float> peep = uniform(rng, 3 * hs, -0.5f, 0.5f);
    const LstmSlicedWeights engine = pack_lstm_sliced(hs, in, w.data(), r.data(), false);
    const LstmSlicedWeights panels = pack_lstm_sliced(hs, in, w.data(), r.data(), true);
    ASSERT_FALSE(engine.r.empty());
    ASSERT_TRUE(engine.r_panels.empty());
    ASSERT_FALSE(panels.r_panels.empty());
    ASSERT_TRUE(panels.r.empty());
    for (int64_t batch = 1; batch <= 7; ++batch, ++t) {
      LstmCellOptions opt;
      opt.peepholes = t % 2 ? peep.data() : nullptr;
      opt.clip = t % 3 == 1 ? 0.8f : 0.f;
      const bool reverse = t % 4 == 2;
      const std::vector<float> x = uniform(rng, seq * batch * in, -1, 1);
      const std::vector<float> h0 = uniform(rng, batch * hs, -1, 1);
      const std::vector<float> c0 = uniform(rng, batch * hs, -1, 1);
      std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
      if (batch > 1) lens[1] = 1 + t % seq;
      ThreadPool* pool = pools[t % 3];
      const Result a = run(engine, opt, seq, batch, reverse, x, lens, b, h0, c0, pool);
      const Result p = run(panels, opt, seq, batch, reverse, x, lens, b, h0, c0, pool);
      const std::string what = "hs " + std::to_string(hs) + " batch " + std::to_string(batch) + " threads " +
                               std::to_string(t % 3 + 1);
      for (size_t i = 0; i < a.y.size(); ++i) {
        ASSERT_NE(a.y[i], -7.f) << what << ": Y element " << i << " not written";
        ASSERT_NEAR(a.y[i], p.y[i], 1e-5f) << what << " Y at " << i;
      }
      for (size_t i = 0; i < a.h.size(); ++i) {
        ASSERT_NEAR(a.h[i], p.h[i], 1e-5f) << what << " Y_h at " << i;
        ASSERT_NEAR(a.c[i], p.c[i], 1e-5f) << what << " Y_c at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::kernels
