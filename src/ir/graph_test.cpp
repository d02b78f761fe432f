#include "ir/graph.h"

#include <gtest/gtest.h>

namespace kiln::ir {
namespace {

Attribute int_attr(std::string name, int64_t v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttrType::kInt;
  a.i = v;
  return a;
}

Attribute string_attr(std::string name, std::string v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttrType::kString;
  a.s = std::move(v);
  return a;
}

TEST(NodeAttributes, AbsentGivesTheDefault) {
  Node n;
  EXPECT_EQ(*n.attr_int("axis", 3), 3);
  EXPECT_EQ(*n.attr_float("alpha", 0.5f), 0.5f);
  EXPECT_EQ(*n.attr_string("mode", "constant"), "constant");
  EXPECT_TRUE(n.attr_ints("pads")->empty());
  EXPECT_EQ(*n.attr_tensor("value"), nullptr);
  EXPECT_EQ(*n.attr_graph("body"), nullptr);
}

TEST(NodeAttributes, PresentWithTheRightType) {
  Node n;
  n.attributes = {int_attr("axis", -1), string_attr("mode", "edge")};
  EXPECT_EQ(*n.attr_int("axis", 0), -1);
  EXPECT_EQ(*n.attr_string("mode", ""), "edge");
  EXPECT_EQ(*n.attr_float("axis", 0.f), -1.f);  // an int is accepted as a float
}

TEST(NodeAttributes, WrongTypeIsAnErrorNamingTheAttribute) {
  Node n;
  n.attributes = {string_attr("alpha", "big"), int_attr("mode", 1)};
  Result<float> f = n.attr_float("alpha", 1.f);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.status().message(), "attribute 'alpha' has type string, expected float");
  Result<std::string> s = n.attr_string("mode", "");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "attribute 'mode' has type int, expected string");
  EXPECT_FALSE(n.attr_ints("mode").ok());
  EXPECT_FALSE(n.attr_int("alpha", 0).ok());
}

}  // namespace
}  // namespace kiln::ir
