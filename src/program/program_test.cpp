// The .kiln writer and loader: a round trip keeps every field; truncated and
// corrupted bytes are errors, never crashes (run under ASan in make test).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "program/program_file.h"

namespace kiln::program {
namespace {

ir::Graph sample_graph() {
  ir::Graph g;
  g.name = "main";
  g.opsets[""] = 13;
  const ir::ValueId x = g.add_value("x", ir::ValueType::tensor(DType::kFloat32, {{1, ""}, {-1, "N"}}));
  const ir::ValueId w = g.add_value("w", ir::ValueType::tensor(DType::kFloat32, {{3, ""}}));
  const ir::ValueId s = g.add_value("labels", ir::ValueType::tensor(DType::kString, {{2, ""}}));
  const ir::ValueId y = g.add_value("y");
  g.inputs = {x};
  g.outputs = {y};
  g.initializers.emplace(w, Tensor::from_vector<float>({1.f, 2.f, 3.f}));
  Tensor labels = Tensor::allocate(DType::kString, Shape{2});
  labels.data<std::string>()[0] = "cat";
  labels.data<std::string>()[1] = std::string("d\0g", 3);
  g.initializers.emplace(s, std::move(labels));
  ir::Node n;
  n.name = "add";
  n.op_type = "Add";
  n.opset = 13;
  n.inputs = {x, w};
  n.outputs = {y};
  ir::Attribute a;
  a.name = "alpha";
  a.type = ir::AttrType::kFloats;
  a.floats = {0.5f, -1.f};
  n.attributes.push_back(a);
  ir::Attribute b;
  b.name = "body";
  b.type = ir::AttrType::kGraph;
  b.g = std::make_shared<ir::Graph>();
  b.g->name = "sub";
  b.g->outer_refs = {b.g->add_value("x")};
  n.attributes.push_back(b);
  g.nodes.push_back(n);
  return g;
}

// Packed weights and a memory plan over sample_graph's four values.
void add_plan_and_packing(ProgramContents& c) {
  c.plan.present = true;
  c.plan.arena_bytes = 256;
  c.plan.offsets = {-1, -1, -1, 128};
  c.plan.sizes = {0, 0, 0, 128};
  static const std::vector<uint8_t> packed(64, 7);
  c.packed.push_back(PackedRecord{3, "W0/sgemm-a/test", packed});
}

std::vector<uint8_t> sample_bytes() {
  const std::string path = ::testing::TempDir() + "/sample.kiln";
  ProgramContents c;
  add_plan_and_packing(c);
  c.backends = {"template", "portable"};
  c.options = {{"template.max_group_size", "4"}};
  const uint8_t blob[5] = {1, 2, 3, 4, 5};
  c.partitions.push_back(PartitionRecord{"template:abc", "k1", "template", "1.0.0", "compat", blob});
  EXPECT_TRUE(write_program(sample_graph(), c, path).is_ok());
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST(Program, RoundTripKeepsEveryField) {
  const std::string path = ::testing::TempDir() + "/sample.kiln";
  const std::vector<uint8_t> bytes = sample_bytes();
  ASSERT_TRUE(is_program_file(path));
  auto p = load_program_file(path);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const ir::Graph& g = p->graph;
  ASSERT_EQ(g.values.size(), 4u);
  EXPECT_EQ(g.value(0).type.to_string(), "float32[1, N]");
  EXPECT_EQ(g.opsets.at(""), 13);
  const Tensor& w = g.initializers.at(1);
  EXPECT_EQ(w.data<float>()[2], 3.f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.raw_data()) % kSegmentAlign, 0u);  // in place, aligned
  EXPECT_EQ(g.initializers.at(2).data<std::string>()[1], std::string("d\0g", 3));
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(*g.nodes[0].attr_floats("alpha"), (std::vector<float>{0.5f, -1.f}));
  ASSERT_NE(*g.nodes[0].attr_graph("body"), nullptr);
  EXPECT_EQ((*g.nodes[0].attr_graph("body"))->outer_refs.size(), 1u);
  ASSERT_EQ(p->contents.partitions.size(), 1u);
  EXPECT_EQ(p->contents.partitions[0].blob.size(), 5u);
  EXPECT_EQ(p->contents.partitions[0].blob[4], 5);
  EXPECT_EQ(p->contents.options[0].second, "4");
  EXPECT_EQ(p->contents.backends[0], "template");
  const StoredPlan& plan = p->contents.plan;
  ASSERT_TRUE(plan.present);
  EXPECT_EQ(plan.arena_bytes, 256u);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{-1, -1, -1, 128}));
  EXPECT_EQ(plan.sizes, (std::vector<uint64_t>{0, 0, 0, 128}));
  ASSERT_EQ(p->contents.packed.size(), 1u);
  EXPECT_EQ(p->contents.packed[0].value, 3);
  EXPECT_EQ(p->contents.packed[0].key, "W0/sgemm-a/test");
  ASSERT_EQ(p->contents.packed[0].bytes.size(), 64u);
  EXPECT_EQ(p->contents.packed[0].bytes[63], 7);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p->contents.packed[0].bytes.data()) % kSegmentAlign, 0u);
  auto again = load_program_bytes(bytes);
  ASSERT_TRUE(again.is_ok()) << again.status().message();
}

TEST(Program, EveryTruncationIsAnError) {
  const std::vector<uint8_t> bytes = sample_bytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto p = load_program_bytes({bytes.data(), n});
    EXPECT_FALSE(p.is_ok()) << "prefix of " << n << " bytes loaded";
  }
}

TEST(Program, BitFlipsNeverCrash) {
  std::vector<uint8_t> bytes = sample_bytes();
  size_t errors = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      bytes[i] ^= mask;
      auto p = load_program_bytes(bytes);
      errors += p.is_ok() ? 0 : 1;
      bytes[i] ^= mask;
    }
  }
  EXPECT_GT(errors, bytes.size() / 4);  // the header and tables are checked
  EXPECT_TRUE(load_program_bytes(bytes).is_ok());
}

// A plan or packing that points outside its arena, the graph or the file is
// an error at load, before anything could write through it.
TEST(Program, HostilePlansAndPackingsAreErrors) {
  const std::string path = ::testing::TempDir() + "/hostile.kiln";
  auto load_with = [&](auto edit) {
    ProgramContents c;
    add_plan_and_packing(c);
    edit(c);
    EXPECT_TRUE(write_program(sample_graph(), c, path).is_ok());
    auto p = load_program_file(path);
    return p.is_ok() ? std::string() : p.status().message();
  };
  EXPECT_EQ(load_with([](ProgramContents&) {}), "");
  EXPECT_NE(load_with([](ProgramContents& c) { c.plan.offsets[3] = 192; }).find("outside the arena"),
            std::string::npos);
  EXPECT_NE(load_with([](ProgramContents& c) { c.plan.offsets[3] = 96; }).find("misaligned"), std::string::npos);
  EXPECT_NE(load_with([](ProgramContents& c) { c.plan.offsets[3] = INT64_MAX - 63; }).find("memory plan"),
            std::string::npos);
  EXPECT_NE(load_with([](ProgramContents& c) { c.plan.sizes[3] = UINT64_MAX; }).find("memory plan"),
            std::string::npos);
  EXPECT_NE(load_with([](ProgramContents& c) { c.plan.offsets[0] = -2; }).find("memory plan"), std::string::npos);
  EXPECT_NE(load_with([](ProgramContents& c) { c.plan.offsets.pop_back(); }).find("3 offsets"), std::string::npos);
  EXPECT_NE(load_with([](ProgramContents& c) { c.plan.arena_bytes = UINT64_MAX; }).find("size limit"),
            std::string::npos);
  EXPECT_NE(load_with([](ProgramContents& c) { c.packed[0].value = 4; }).find("packed weight names value 4"),
            std::string::npos);
  EXPECT_NE(load_with([](ProgramContents& c) { c.packed[0].key.clear(); }).find("without a key"), std::string::npos);
}

TEST(Program, ErrorsNameTheProblem) {
  std::vector<uint8_t> bytes = sample_bytes();
  EXPECT_NE(load_program_bytes({bytes.data(), 40}).status().message().find("truncated"), std::string::npos);
  bytes[8] = 99;
  EXPECT_NE(load_program_bytes(bytes).status().message().find("format version 99"), std::string::npos);
  EXPECT_FALSE(load_program_file(::testing::TempDir() + "/missing.kiln").is_ok());
}

}  // namespace
}  // namespace kiln::program
