// Concurrency: one session run from 8 threads x 200 runs with different
// inputs, every output bit-equal to the serial result, on portable kernels
// and on every plugin that is built (skipped, with the reason, when one is
// not); and sessions sharing one backend registry, created and destroyed
// while others run; and model loads (whose type inference forks a child)
// while other threads allocate. Runs under ASan in `make test` and under
// ThreadSanitizer in `make test-tsan`.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "concurrency_models.h"
#include "demo_model.h"
#include "kiln/backends.h"
#include "kiln/session.h"

namespace kiln {
namespace {

constexpr int kThreads = 8;
constexpr int kRunsPerThread = 200;

Result<std::unique_ptr<Session>> load_bytes(const std::string& bytes, const SessionOptions& o) {
  return Session::load_from_bytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), o);
}

// The float32 inputs of `s` filled from `seed`; symbolic dims take `batch`.
std::vector<NamedValue> make_inputs(const Session& s, uint32_t seed, int64_t batch) {
  std::vector<NamedValue> in;
  for (const IoInfo& io : s.inputs()) {
    Shape shape;
    shape.resize(io.dims.size());
    for (size_t i = 0; i < io.dims.size(); ++i) shape[i] = io.dims[i] < 0 ? batch : io.dims[i];
    Tensor t = Tensor::allocate(DType::kFloat32, shape);
    uint32_t x = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < t.numel(); ++i) {
      x = x * 1664525u + 1013904223u;
      t.data<float>()[i] = static_cast<float>(x >> 8) / 8388608.f - 1.f;
    }
    in.emplace_back(io.name, Value(std::move(t)));
  }
  return in;
}

// "" when `a` and `b` hold the same tensors bit for bit, else what differs.
std::string difference(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return "output count " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor& x = a[i].tensor();
    const Tensor& y = b[i].tensor();
    if (x.dtype() != y.dtype() || x.shape() != y.shape()) return "output " + std::to_string(i) + " type differs";
    if (std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) != 0)
      return "output " + std::to_string(i) + " values differ";
  }
  return "";
}

std::shared_ptr<BackendRegistry> build_tree_registry() {
  return BackendRegistry::create({.paths = {KILN_BACKEND_DIR}, .use_environment = false, .use_default_dirs = false});
}

// Skips (with the reason) unless `name` is "portable" or a built, available plugin.
#define KILN_SKIP_UNLESS_AVAILABLE(registry, name)                                           \
  do {                                                                                       \
    if (std::string(name) != "portable") {                                                   \
      auto info = (registry)->find(name);                                                    \
      if (!info.is_ok()) GTEST_SKIP() << "plugin '" << (name) << "' is not built: " << info.status().message(); \
      if (!info->available)                                                                  \
        GTEST_SKIP() << "plugin '" << (name) << "' is not available: " << info->unavailable_reason; \
    }                                                                                        \
  } while (0)

SessionOptions options_for(const std::shared_ptr<BackendRegistry>& registry, const std::string& backend,
                           int threads) {
  SessionOptions o;
  o.threads = threads;
  o.backend_registry = registry;
  o.backends = {backend};
  o.cache_dir = "";
  // The plugin's cost rules decline partitions this small; the test is about
  // running one compiled partition from many threads, so claim all it can.
  if (backend == "xnnpack") o.backend_options = {{"xnnpack", "min_macs_per_byte", "0"}};
  return o;
}

struct ModelCase {
  const char* name;
  std::string (*bytes)();
  bool vary_batch;  // the model has a symbolic batch dim
};
const ModelCase kModels[] = {{"demo", &cli::demo_model_bytes, true},
                             {"conv_matmul", &testing::conv_matmul_model_bytes, false}};

int64_t batch_of(const ModelCase& m, uint32_t seed) { return m.vary_batch ? 1 + seed % 3 : 2; }

// 8 threads x 200 runs of one session; each run's outputs against the serial ones.
void one_session_many_threads(const std::string& backend) {
  auto registry = build_tree_registry();
  KILN_SKIP_UNLESS_AVAILABLE(registry, backend);
  int exercised = 0;
  for (const ModelCase& m : kModels) {
    SCOPED_TRACE(std::string("model ") + m.name + " on " + backend);
    // Portable: two intra-op threads, so parallel_for runs from several runs
    // at once. Plugins: one, so their pools (which spin) stay out of the way
    // of eight runs at once through one compiled partition; the registry
    // test below runs them with two.
    auto s = load_bytes(m.bytes(), options_for(registry, backend, backend == "portable" ? 2 : 1));
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    const Session& session = **s;
    if (backend != "portable") {
      size_t claimed = 0;
      for (const PartitionInfo& p : session.placement().partitions) claimed += p.nodes.size();
      if (claimed == 0) {
        std::printf("note: %s claims no node of model %s; that model is skipped for it\n", backend.c_str(), m.name);
        continue;
      }
    }
    ++exercised;
    const int total = kThreads * kRunsPerThread;
    std::vector<std::vector<NamedValue>> inputs(total);
    std::vector<std::vector<Value>> serial(total);
    for (int k = 0; k < total; ++k) {
      const auto seed = static_cast<uint32_t>(k);
      inputs[k] = make_inputs(session, seed, batch_of(m, seed));
      auto out = session.run(inputs[k]);
      ASSERT_TRUE(out.is_ok()) << out.status().to_string();
      serial[k] = std::move(out).value();
    }
    std::atomic<int> failures{0};
    std::mutex mu;
    std::string first;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int r = 0; r < kRunsPerThread; ++r) {
          const int k = t * kRunsPerThread + r;
          auto out = session.run(inputs[k]);
          std::string why = out.is_ok() ? difference(*out, serial[k]) : out.status().to_string();
          if (why.empty()) continue;
          if (failures++ == 0) {
            std::lock_guard<std::mutex> lock(mu);
            first = "thread " + std::to_string(t) + " run " + std::to_string(r) + ": " + why;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0) << "first: " << first;
  }
  EXPECT_GT(exercised, 0) << backend << " claimed no node of any model: the test would not exercise it";
}

TEST(ConcurrencyTest, OneSessionEightThreadsPortable) { one_session_many_threads("portable"); }
TEST(ConcurrencyTest, OneSessionEightThreadsTemplate) { one_session_many_threads("template"); }
TEST(ConcurrencyTest, OneSessionEightThreadsXnnpack) { one_session_many_threads("xnnpack"); }
TEST(ConcurrencyTest, OneSessionEightThreadsOnednn) { one_session_many_threads("onednn"); }

// Sessions over every available backend share one registry; workers create a
// session, run it, check it, destroy it, again and again, while one
// long-lived session runs alongside. Outputs must match the serial ones.
TEST(ConcurrencyTest, SessionsShareRegistryWhileCreatedAndDestroyed) {
  auto registry = build_tree_registry();
  std::vector<std::string> backends = {"portable"};
  for (const BackendInfo& b : registry->backends())
    if (b.available) backends.push_back(b.name);
  const std::string model = testing::conv_matmul_model_bytes();
  constexpr int kInputs = 8;
  std::vector<std::vector<NamedValue>> inputs;
  // Each backend's own serial answers (plugins may round differently from portable).
  std::vector<std::vector<std::vector<Value>>> per_backend(backends.size());
  for (size_t b = 0; b < backends.size(); ++b) {
    auto s = load_bytes(model, options_for(registry, backends[b], 2));
    ASSERT_TRUE(s.is_ok()) << backends[b] << ": " << s.status().to_string();
    for (int k = 0; k < kInputs; ++k) {
      if (b == 0) inputs.push_back(make_inputs(**s, static_cast<uint32_t>(k), 2));
      auto out = (*s)->run(inputs[k]);
      ASSERT_TRUE(out.is_ok()) << out.status().to_string();
      per_backend[b].push_back(std::move(out).value());
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::mutex mu;
  std::string first;
  auto fail = [&](const std::string& why) {
    if (failures++ == 0) {
      std::lock_guard<std::mutex> lock(mu);
      first = why;
    }
  };
  auto long_lived = load_bytes(model, options_for(registry, backends.back(), 2));
  ASSERT_TRUE(long_lived.is_ok()) << long_lived.status().to_string();
  std::thread steady([&] {
    for (int r = 0; !stop.load() || r < kInputs; ++r) {
      auto out = (*long_lived)->run(inputs[r % kInputs]);
      std::string why = out.is_ok() ? difference(*out, per_backend.back()[r % kInputs]) : out.status().to_string();
      if (!why.empty()) fail("long-lived session: " + why);
    }
  });
  constexpr int kWorkers = 4, kSessionsPerWorker = 6, kRunsPerSession = 10;
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int i = 0; i < kSessionsPerWorker; ++i) {
        const size_t b = static_cast<size_t>(w + i) % backends.size();
        auto s = load_bytes(model, options_for(registry, backends[b], 2));
        if (!s.is_ok()) {
          fail(backends[b] + " load: " + s.status().to_string());
          continue;
        }
        for (int r = 0; r < kRunsPerSession; ++r) {
          const int k = (w + r) % kInputs;
          auto out = (*s)->run(inputs[k]);
          std::string why = out.is_ok() ? difference(*out, per_backend[b][k]) : out.status().to_string();
          if (!why.empty()) fail(backends[b] + " worker " + std::to_string(w) + ": " + why);
        }
      }  // the session is destroyed here while the others run
    });
  }
  for (auto& th : workers) th.join();
  stop = true;
  steady.join();
  EXPECT_EQ(failures.load(), 0) << "first: " << first;
}

// Loads fork the ONNX type-inference child. Other threads allocating at that
// moment once hung the child under ASan (clang-14's allocator has no fork
// handlers: a child forked while another thread held its lock waited for it
// forever, until the load's 120 s bound). Every load here must finish with
// its model intact while two threads allocate and free in a loop; under ASan
// inference then runs in-process (fork_is_safe()).
TEST(ConcurrencyTest, LoadsWhileOtherThreadsAllocate) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  for (int t = 0; t < 2; ++t) {
    churn.emplace_back([&stop] {
      // Batches larger than a thread's allocator cache, so the thread keeps
      // taking the allocator's shared locks (refill and drain).
      std::vector<std::unique_ptr<char[]>> batch(4096);
      for (size_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const size_t bytes = 16 << (i % 8);
        for (auto& p : batch) p.reset(new char[bytes]);
        for (auto& p : batch) p.reset();
      }
    });
  }
  const std::string model = cli::demo_model_bytes();
  SessionOptions o;
  o.backends = {"portable"};
  o.cache_dir = "";
  int loaded = 0;
  for (int i = 0; i < 40; ++i) {
    auto s = load_bytes(model, o);
    if (!s.is_ok()) {
      ADD_FAILURE() << "load " << i << ": " << s.status().to_string();
      break;
    }
    auto out = (*s)->run(make_inputs(**s, static_cast<uint32_t>(i), 2));
    if (!out.is_ok()) {
      ADD_FAILURE() << "run " << i << ": " << out.status().to_string();
      break;
    }
    ++loaded;
  }
  stop = true;
  for (auto& th : churn) th.join();
  EXPECT_EQ(loaded, 40);
}

}  // namespace
}  // namespace kiln
