// Unit tests of kiln bench's statistics, profile summaries and trace writer,
// over synthetic profiles (no timing).
#include "bench_report.h"

#include <gtest/gtest.h>

#include <limits>
#include <sstream>

namespace kiln::cli {
namespace {

NodeEvent event(const std::string& name, const std::string& op, int64_t start_ns, int64_t duration_ns,
                uint64_t tid = 1) {
  return NodeEvent{name, op, "", start_ns, duration_ns, tid};
}

TEST(BenchReportTest, NearestRankQuantiles) {
  std::vector<double> sorted;
  for (int i = 1; i <= 100; ++i) sorted.push_back(i);
  EXPECT_EQ(nearest_rank(sorted, 0.5), 50);
  EXPECT_EQ(nearest_rank(sorted, 0.9), 90);  // not 91: 0.9 * 100 rounds up in binary
  EXPECT_EQ(nearest_rank(sorted, 0.99), 99);
  EXPECT_EQ(nearest_rank(sorted, 0.0), 1);
  EXPECT_EQ(nearest_rank(sorted, 1.0), 100);
  EXPECT_EQ(nearest_rank({1, 2, 3, 4}, 0.5), 2);
  EXPECT_EQ(nearest_rank({7}, 0.9), 7);
  EXPECT_EQ(nearest_rank({}, 0.5), 0);
}

TEST(BenchReportTest, LatencyStatsSortsAndAverages) {
  const LatencyStats s = latency_stats({5, 1, 4, 2, 3});
  EXPECT_EQ(s.runs, 5u);
  EXPECT_EQ(s.p50_ms, 3);
  EXPECT_EQ(s.p90_ms, 5);
  EXPECT_EQ(s.min_ms, 1);
  EXPECT_EQ(s.max_ms, 5);
  EXPECT_DOUBLE_EQ(s.mean_ms, 3);
  EXPECT_EQ(latency_stats({}).runs, 0u);
}

TEST(BenchReportTest, SummaryAddsNodesAndOpTypesPerRun) {
  RunProfile a;
  a.total_ns = 10'000'000;
  a.events = {event("conv1", "Conv", 0, 6'000'000), event("relu1", "Relu", 6'000'000, 1'000'000),
              event("conv2", "Conv", 7'000'000, 2'000'000)};
  RunProfile b = a;
  b.total_ns = 14'000'000;
  b.events[0].duration_ns = 10'000'000;
  const ProfileSummary s = summarize_profiles({a, b});
  EXPECT_EQ(s.runs, 2u);
  EXPECT_EQ(s.events_per_run, 3u);
  EXPECT_DOUBLE_EQ(s.mean_run_ms, 12);
  EXPECT_DOUBLE_EQ(s.mean_nodes_ms, 11);  // (9 + 13) / 2
  EXPECT_DOUBLE_EQ(s.between_nodes_ms(), 1);
  ASSERT_EQ(s.nodes.size(), 3u);
  EXPECT_EQ(s.nodes[0].name, "conv1");  // largest first
  EXPECT_DOUBLE_EQ(s.nodes[0].mean_ms, 8);
  EXPECT_DOUBLE_EQ(s.nodes[0].share, 8.0 / 12.0);
  ASSERT_EQ(s.op_types.size(), 2u);
  EXPECT_EQ(s.op_types[0].op_type, "Conv");
  EXPECT_EQ(s.op_types[0].count, 2);  // two Conv nodes
  EXPECT_DOUBLE_EQ(s.op_types[0].mean_ms, 10);
  EXPECT_EQ(s.op_types[1].op_type, "Relu");
  EXPECT_EQ(s.op_types[1].count, 1);
}

TEST(BenchReportTest, SummaryCountsRepeatedNodesOnce) {
  RunProfile r;
  r.total_ns = 3000;
  r.events = {event("body", "Add", 0, 1000), event("body", "Add", 1000, 1000)};
  const ProfileSummary s = summarize_profiles({r});
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].count, 2);
  EXPECT_EQ(s.op_types[0].count, 1);
  EXPECT_DOUBLE_EQ(s.nodes[0].mean_ms, 0.002);
}

TEST(BenchReportTest, TraceNestsNodeSlicesInRunSlices) {
  RunProfile r0;
  r0.start_ns = 1'000'000'000;
  r0.total_ns = 5000;
  r0.events = {event("a \"quoted\"", "Add", 100, 2000, 3), event("b", "Mul", 2500, 1500, 3)};
  RunProfile r1 = r0;
  r1.start_ns += 10'000;
  std::ostringstream out;
  write_chrome_trace(out, {r0, r1}, "kiln test", {{"model", "m.onnx"}});
  const std::string json = out.str();
  EXPECT_NE(json.find("\"displayTimeUnit\":\"ms\""), std::string::npos);
  // Run 1 starts 10 us after run 0; its first node 0.1 us after that.
  EXPECT_NE(json.find("{\"name\":\"run 0\",\"cat\":\"run\",\"ph\":\"X\",\"ts\":0.000,\"dur\":5.000,\"pid\":1,\"tid\":3"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"name\":\"run 1\",\"cat\":\"run\",\"ph\":\"X\",\"ts\":10.000,\"dur\":5.000"), std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"name\":\"a \\\"quoted\\\"\",\"cat\":\"Add\",\"ph\":\"X\",\"ts\":10.100,\"dur\":2.000"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":3"), std::string::npos) << json;
  EXPECT_NE(json.find("\"otherData\":{\"model\":\"m.onnx\"}"), std::string::npos) << json;
}

TEST(BenchReportTest, TracePutsWorkerChunksOnTheirOwnTracks) {
  RunProfile r;
  r.start_ns = 1'000'000'000;
  r.total_ns = 5000;
  r.events = {event("conv", "Conv", 100, 2000, 1)};
  r.worker_chunks = {event("conv", "Conv", 150, 900, 7), event("conv", "Conv", 1100, 800, 7)};
  std::ostringstream out;
  write_chrome_trace(out, {r}, "kiln test", {});
  const std::string json = out.str();
  EXPECT_NE(json.find("\"tid\":7,\"args\":{\"name\":\"kiln pool worker 7\"}"), std::string::npos) << json;
  EXPECT_NE(json.find("{\"name\":\"conv\",\"cat\":\"chunk\",\"ph\":\"X\",\"ts\":0.150,\"dur\":0.900,\"pid\":1,\"tid\":7"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"ts\":1.100,\"dur\":0.800,\"pid\":1,\"tid\":7"), std::string::npos) << json;
}

TEST(BenchReportTest, TracePutsPluginSlicesOnTheirOwnTracks) {
  RunProfile r;
  r.start_ns = 1'000'000'000;
  r.total_ns = 5000;
  r.events = {event("p", "Partition", 100, 2000, 1)};
  NodeEvent copy = event("h2d", "simdev / 1", 120, 300, 0);
  copy.domain = "simdev";
  NodeEvent compute = event("matmul", "simdev / 0", 400, 900, 0);
  compute.domain = "simdev";
  r.plugin_events = {copy, compute};
  std::ostringstream out;
  write_chrome_trace(out, {r}, "kiln test", {});
  const std::string json = out.str();
  EXPECT_NE(json.find("\"tid\":1000000,\"args\":{\"name\":\"simdev / 0\"}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"tid\":1000001,\"args\":{\"name\":\"simdev / 1\"}"), std::string::npos) << json;
  EXPECT_NE(json.find("{\"name\":\"h2d\",\"cat\":\"plugin\",\"ph\":\"X\",\"ts\":0.120,\"dur\":0.300,\"pid\":1,"
                      "\"tid\":1000001,\"args\":{\"plugin\":\"simdev\""),
            std::string::npos)
      << json;
}

TEST(BenchReportTest, JsonStringEscapes) {
  EXPECT_EQ(json_string("a\"b\\c\nd\te"), "\"a\\\"b\\\\c\\nd\\te\"");
  EXPECT_EQ(json_string(std::string("\x01", 1)), "\"\\u0001\"");
  EXPECT_EQ(json_number(1.5), "1.5");
  EXPECT_EQ(json_number(std::numeric_limits<double>::infinity()), "null");
}

TEST(BenchReportTest, MillisecondText) {
  EXPECT_EQ(ms_text(123.45), "123.5");
  EXPECT_EQ(ms_text(12.346), "12.35");
  EXPECT_EQ(ms_text(1.2345), "1.234");
  EXPECT_EQ(ms_text(0.04931), "0.0493");
  EXPECT_EQ(ms_text(0.000421), "0.000421");
  EXPECT_EQ(ms_text(0), "0");
}

}  // namespace
}  // namespace kiln::cli
