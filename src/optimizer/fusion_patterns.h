// Pieces of phase B (optimizer.h) shared by the matchers in
// portable_fusions.cpp and the files beside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "optimizer/graph_uses.h"
#include "optimizer/optimizer.h"

namespace kiln::optimizer {

/// The FusedConv activation ("Relu", "Clip", ...) and its activation_params
/// for a single activation node, or "" when `act` is none FusedConv has.
std::string conv_activation(const ConstantMap& constants, const ir::Node& act, std::vector<float>* params);

/// When the only reader of `*result` is a free, eligible activation node
/// that FusedConv applies (conv_activation), takes it into `f`: its index
/// into f->replaces, "+<act>" onto f->name, its output into `*result`, and
/// the activation attributes onto f->node (set_conv_activation). Call after
/// f->node is set.
void take_conv_activation(const ir::Graph& g, const ConstantMap& constants, const GraphUses& uses,
                          const std::vector<uint8_t>& eligible, const std::vector<uint8_t>& used, ir::ValueId* result,
                          Fusion* f);

/// Adds FusedConv's "activation" and, when `params` is not empty,
/// "activation_params" attributes to `node`.
void set_conv_activation(ir::Node* node, const std::string& act, const std::vector<float>& params);

/// Conv whose only reader is an Add of a float32 tensor Z of the Conv
/// output's own static shape (a residual connection), optionally followed
/// by one activation: one com.microsoft FusedConv with Z as input 3 (the
/// portable conv kernel adds Z before the activation, in its GEMM or
/// output pass), so the sum and the activation are no passes of their own.
/// Appends the proposal to `out`; `used` and `eligible` are per node.
void match_conv_add(const ir::Graph& g, const ConstantMap& constants, const GraphUses& uses,
                    const std::vector<uint8_t>& eligible, const std::vector<uint8_t>& used, size_t ni,
                    std::vector<Fusion>* out);

/// BatchNormalization (inference, constant float32 statistics) whose only
/// reader is a Relu whose only reader is a pointwise Conv (1x1, stride 1, no
/// padding, group 1, constant W) as X: one kiln::PreActivationConv (the
/// pre-activation block of DenseNet's layers; the normalization cannot fold
/// into W through the Relu, so the conv applies it as it packs X), with the
/// conv's own activation after it when there is one. Anchored at the
/// BatchNormalization node `ni`.
void match_preact_conv(const ir::Graph& g, const ConstantMap& constants, const GraphUses& uses,
                       const std::vector<uint8_t>& eligible, const std::vector<uint8_t>& used, size_t ni,
                       std::vector<Fusion>* out);

}  // namespace kiln::optimizer
