// The read-only graph view a plugin sees (kiln_graph_t and its nodes, values
// and attributes): a subset of an ir::Graph's nodes (those no earlier
// backend claimed and the host did not fold), all of its values, constants
// with zero-copy data. Built by the host for one call and destroyed after.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "kiln/c/backend.h"

struct kiln_graph;

namespace kiln::runtime {
/// Content hashes of constants (value_constant_info), each computed on its
/// first request and kept for the views that share this cache: one
/// partitioning's views and their subgraph views, so a large model is hashed
/// once per load, not once per call. Keyed by the constant's Tensor, whose
/// address is stable while the constants map holding it is not modified
/// (true during partitioning). shared_ptr: views made one after another by
/// the partitioner, and the subgraph views inside them, share one cache.
struct ConstantHashes {
  std::mutex mu;
  std::unordered_map<const Tensor*, std::array<uint64_t, 2>> by_tensor;
};
}  // namespace kiln::runtime

struct kiln_value {
  const kiln_graph* graph = nullptr;
  kiln::ir::ValueId id = kiln::ir::kNoValue;  // kNoValue for type-proto pseudo values
  const char* name = "";
  const kiln::ir::ValueType* type = nullptr;
  const kiln::Tensor* constant = nullptr;
  // The ONNX external-data file `constant` was read from (null: embedded).
  const kiln::ir::ExternalLocation* external = nullptr;
  int32_t producer = -1;           // view node index
  std::vector<uint32_t> consumers; // view node indices
  bool outside_consumers = false;
  bool graph_input = false;
  bool graph_output = false;
};

struct kiln_attribute {
  const kiln_graph* graph = nullptr;
  const kiln::ir::Attribute* attr = nullptr;
  // Built on first access (views are used by one call at a time).
  mutable std::vector<std::unique_ptr<kiln_graph>> subgraphs;
  mutable std::vector<std::unique_ptr<kiln_value>> type_values;
};

struct kiln_node {
  const kiln_graph* graph = nullptr;
  const kiln::ir::Node* node = nullptr;
  size_t index = 0;
  std::vector<kiln_attribute> attributes;
};

struct kiln_graph {
  const kiln::ir::Graph* graph = nullptr;
  std::vector<kiln_node> nodes;
  std::vector<kiln_value> values;  // one per ir value id
  std::vector<int32_t> view_index; // per ir node: its view index or -1
  std::vector<int32_t> ir_index;   // per view node: its ir node index
  std::shared_ptr<kiln::runtime::ConstantHashes> hashes;  // never null
};

namespace kiln::runtime {

/// The values a node reads through its subgraph attributes (outer references
/// of If/Loop/Scan bodies, resolved in `g`, nested bodies included).
std::vector<ir::ValueId> implicit_inputs(const ir::Node& node, const ir::Graph& g);
/// Every value a node reads, once each: its inputs and its subgraphs' outer references.
std::vector<ir::ValueId> reads_of(const ir::Node& n, const ir::Graph& g);

/// Builds a view of `g` offering the nodes `offered` (ir node indices, in
/// topological order). `constants` (null: g's initializers) maps values the
/// host holds data for. `hidden_readers` are ir nodes that are neither offered
/// nor folded away: values they read count as read outside the view.
/// `hashes` (null: a cache of the view's own) keeps constants' content hashes
/// across views made over the same constants.
std::unique_ptr<kiln_graph> make_graph_view(const ir::Graph& g,
                                            const std::unordered_map<ir::ValueId, Tensor>* constants,
                                            std::span<const int32_t> offered,
                                            std::span<const int32_t> hidden_readers,
                                            std::shared_ptr<ConstantHashes> hashes = nullptr);

/// Fills the graph-view members of the host table.
void fill_graph_view_functions(kiln_host_api_t& table);

}  // namespace kiln::runtime
