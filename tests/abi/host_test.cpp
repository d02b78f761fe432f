// The host side of the ABI: statuses, the tracking allocator, logging, the
// execute context (allocate_output checks, parallel_for).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <type_traits>

#include "core/thread_pool.h"
#include "runtime/backends/host.h"

namespace kiln::runtime {
namespace {

const kiln_host_api_t& api() { return *host_api(); }

TEST(HostApiTest, TableDeclaresItsSizeAndVersion) {
  EXPECT_EQ(api().header.struct_size, sizeof(kiln_host_api_t));
  EXPECT_EQ(api().header.abi_major, KILN_BACKEND_ABI_MAJOR);
  EXPECT_EQ(api().header.abi_minor, KILN_BACKEND_ABI_MINOR);
  // Every entry is set, except the ones listed here: value_constant_info
  // comes with the shared-weights work (graph_view.cpp) and may still be
  // NULL until it lands. Nothing else may be.
  const size_t allowed_null[] = {offsetof(kiln_host_api_t, value_constant_info)};
  const char* base = reinterpret_cast<const char*>(&api());
  for (size_t off = sizeof(kiln_abi_header_t); off < sizeof(kiln_host_api_t); off += sizeof(void*)) {
    const void* entry = *reinterpret_cast<const void* const*>(base + off);
    if (std::find(std::begin(allowed_null), std::end(allowed_null), off) != std::end(allowed_null)) continue;
    EXPECT_NE(entry, nullptr) << "entry at offset " << off;
  }
  EXPECT_NE(api().fence_signal, nullptr);
  EXPECT_NE(api().exec_workspace, nullptr);
  EXPECT_NE(api().trace_now_ns, nullptr);
}

TEST(HostApiTest, StatusesCarryCodeAndMessage) {
  kiln_status_t* s = api().status_create(KILN_STATUS_INVALID_ARGUMENT, "bad shape");
  EXPECT_EQ(api().status_code(s), KILN_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(api().status_message(s), "bad shape");
  Status st = take_status(s, "backend 'x'");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "backend 'x': bad shape");
  EXPECT_TRUE(take_status(nullptr).is_ok());
  EXPECT_EQ(api().status_code(nullptr), KILN_STATUS_OK);
  EXPECT_STREQ(api().status_message(nullptr), "");
  api().status_release(nullptr);
  // An OK code is not an error: it becomes internal.
  kiln_status_t* ok = api().status_create(KILN_STATUS_OK, nullptr);
  EXPECT_EQ(api().status_code(ok), KILN_STATUS_INTERNAL);
  api().status_release(ok);
}

// Enum values cross as int32_t: a code or level the host does not know is a
// plugin bug reported with its value, never undefined behaviour.
TEST(HostApiTest, UnknownEnumValuesAreReportedNotTrusted) {
  static_assert(std::is_same_v<decltype(kiln_host_api_t::status_create), kiln_status_t* (*)(int32_t, const char*)>);
  static_assert(std::is_same_v<decltype(kiln_host_api_t::log), void (*)(kiln_host_t*, int32_t, const char*)>);
  static_assert(std::is_same_v<decltype(kiln_host_api_t::log_enabled), bool (*)(kiln_host_t*, int32_t)>);
  for (int32_t code : {-1, 99, INT32_MAX}) {
    Status st = take_status(api().status_create(code, "boom"));
    EXPECT_EQ(st.code(), StatusCode::kInternal);
    EXPECT_EQ(st.message(), "status_create got code " + std::to_string(code) + ", which is not an error code; message: boom");
  }
  kiln_host host;
  host.name = "p";
  host.log_level = KILN_LOG_ERROR;
  std::vector<kiln_log_level_t> levels;
  host.sink = [&](kiln_log_level_t l, const std::string&, const std::string&) { levels.push_back(l); };
  EXPECT_TRUE(api().log_enabled(&host, 77));
  api().log(&host, 77, "odd level");
  api().log(&host, -5, "odd level");
  EXPECT_EQ(levels, (std::vector<kiln_log_level_t>{KILN_LOG_ERROR, KILN_LOG_ERROR}));
}

TEST(HostApiTest, GarbageStatusIsReportedNotFreed) {
  alignas(64) char garbage[64];
  std::memset(garbage, 0x5a, sizeof(garbage));
  Status st = take_status(reinterpret_cast<kiln_status_t*>(garbage), "backend 'x'");
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("status_create did not make"), std::string::npos);
}

TEST(HostApiTest, AllocatorAlignsAndTracks) {
  kiln_host host;
  for (size_t align : {0, 1, 16, 64, 128, 4096}) {
    void* p = api().alloc(&host, 100, align);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (align < 64 ? 64 : align), 0u) << align;
    EXPECT_EQ(host_block_size(&host, p), 100u);
    api().free(&host, p);
  }
  EXPECT_EQ(api().alloc(&host, 0, 0), nullptr);
  EXPECT_EQ(api().alloc(&host, 8, 3), nullptr);     // not a power of two
  EXPECT_EQ(api().alloc(&host, 8, 8192), nullptr);  // too large
  EXPECT_EQ(api().alloc(&host, SIZE_MAX, 0), nullptr);
  EXPECT_EQ(api().alloc(nullptr, 8, 0), nullptr);  // no host context
  void* a = api().alloc(&host, 10, 0);
  void* b = api().alloc(&host, 20, 0);
  EXPECT_EQ(host.stats().live_blocks, 2);
  EXPECT_EQ(host.stats().live_bytes, 30);
  api().free(&host, a);
  api().free(&host, b);
  api().free(&host, nullptr);
  EXPECT_EQ(host.stats().live_blocks, 0);
  EXPECT_EQ(host.stats().total_blocks, 8);
}

TEST(HostApiTest, ForeignAndDoubleFreesAreCountedAndIgnored) {
  kiln_host host;
  std::vector<std::string> logs;
  host.sink = [&](kiln_log_level_t, const std::string&, const std::string& m) { logs.push_back(m); };
  void* p = api().alloc(&host, 32, 0);
  api().free(&host, p);
  api().free(&host, p);  // twice
  EXPECT_EQ(host.stats().double_frees, 1);
  auto* foreign = static_cast<char*>(std::malloc(128));
  std::memset(foreign, 0, 128);
  api().free(&host, foreign + 64);
  EXPECT_EQ(host.stats().foreign_frees, 1);
  EXPECT_EQ(host_block_size(&host, foreign + 64), 0u);
  std::free(foreign);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_NE(logs[1].find("not allocated with the host allocator"), std::string::npos);
}

TEST(HostApiTest, LogHonoursLevel) {
  kiln_host host;
  host.name = "p";
  host.log_level = KILN_LOG_INFO;
  std::vector<std::string> got;
  host.sink = [&](kiln_log_level_t, const std::string& plugin, const std::string& m) { got.push_back(plugin + ":" + m); };
  EXPECT_FALSE(api().log_enabled(&host, KILN_LOG_DEBUG));
  EXPECT_TRUE(api().log_enabled(&host, KILN_LOG_WARNING));
  api().log(&host, KILN_LOG_DEBUG, "hidden");
  api().log(&host, KILN_LOG_ERROR, "shown");
  api().log(&host, KILN_LOG_INFO, nullptr);
  EXPECT_EQ(got, (std::vector<std::string>{"p:shown", "p:"}));
}

class Outputs final : public ExecOutputs {
 public:
  size_t num_outputs() const override { return 2; }
  Result<Tensor*> allocate(size_t i, DType dt, const Shape& s) override {
    t[i] = Tensor::allocate(dt, s);
    return &t[i];
  }
  Tensor t[2];
};

TEST(HostApiTest, AllocateOutputChecksEverything) {
  Outputs outs;
  kiln_exec_context ctx;
  ctx.outputs = &outs;
  kiln_tensor_t view{};
  view.struct_size = sizeof(view);
  const int64_t dims[] = {2, 3};
  ASSERT_EQ(api().exec_allocate_output(&ctx, 1, KILN_DTYPE_FLOAT32, dims, 2, &view), nullptr);
  EXPECT_EQ(view.struct_size, sizeof(view));
  EXPECT_EQ(view.rank, 2u);
  EXPECT_EQ(view.nbytes, 24u);
  EXPECT_EQ(view.data, outs.t[1].raw_data());
  EXPECT_EQ(outs.t[1].shape(), (Shape{2, 3}));

  auto error = [&](kiln_status_t* s) {
    Status st = take_status(s);
    EXPECT_FALSE(st.is_ok());
    return st.message();
  };
  EXPECT_NE(error(api().exec_allocate_output(&ctx, 2, KILN_DTYPE_FLOAT32, dims, 2, &view)).find("has 2 outputs"),
            std::string::npos);
  EXPECT_NE(error(api().exec_allocate_output(&ctx, 0, KILN_DTYPE_STRING, dims, 2, &view)).find("cannot cross"),
            std::string::npos);
  EXPECT_NE(error(api().exec_allocate_output(&ctx, 0, 99, dims, 2, &view)).find("dtype"),
            std::string::npos);
  const int64_t negative[] = {2, -1};
  EXPECT_NE(error(api().exec_allocate_output(&ctx, 0, KILN_DTYPE_FLOAT32, negative, 2, &view)).find("dim 1 is -1"),
            std::string::npos);
  const int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_NE(error(api().exec_allocate_output(&ctx, 0, KILN_DTYPE_FLOAT32, huge, 2, &view)).find("too large"),
            std::string::npos);
  EXPECT_NE(error(api().exec_allocate_output(&ctx, 0, KILN_DTYPE_FLOAT32, nullptr, 2, &view)).find("NULL"),
            std::string::npos);
  EXPECT_NE(error(api().exec_allocate_output(nullptr, 0, KILN_DTYPE_FLOAT32, dims, 2, &view)).find("outside"),
            std::string::npos);
  kiln_tensor_t small{};
  small.struct_size = 8;
  EXPECT_NE(error(api().exec_allocate_output(&ctx, 0, KILN_DTYPE_FLOAT32, dims, 2, &small)).find("struct_size"),
            std::string::npos);
  // A scalar: rank 0, no dims needed.
  EXPECT_EQ(api().exec_allocate_output(&ctx, 0, KILN_DTYPE_INT64, nullptr, 0, &view), nullptr);
  EXPECT_EQ(view.nbytes, 8u);
}

TEST(HostApiTest, ParallelForCoversTheRangeOnThePool) {
  ThreadPool pool(3);
  kiln_exec_context ctx;
  ctx.pool = &pool;
  EXPECT_EQ(api().exec_num_threads(&ctx), 3);
  EXPECT_EQ(api().exec_num_threads(nullptr), 1);
  std::vector<std::atomic<int>> hits(1000);
  auto fn = [](void* user, int64_t b, int64_t e) {
    auto* h = static_cast<std::vector<std::atomic<int>>*>(user);
    for (int64_t i = b; i < e; ++i) (*h)[static_cast<size_t>(i)]++;
  };
  api().parallel_for(&ctx, 1000, 10, fn, &hits);
  api().parallel_for(nullptr, 1000, 0, fn, &hits);  // inline
  api().parallel_for(&ctx, 0, 10, fn, &hits);       // nothing
  api().parallel_for(&ctx, 10, 10, nullptr, &hits);
  for (auto& h : hits) EXPECT_EQ(h.load(), 2);
}

}  // namespace
}  // namespace kiln::runtime
