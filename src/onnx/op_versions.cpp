#include "onnx/op_versions.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::importer {

namespace {

using K = AttrKind;

constexpr OpAttr kReduce[] = {{"keepdims", K::kInt}, {"noop_with_empty_axes", K::kInt}};
constexpr OpAttr kSplit[] = {{"axis", K::kInt}, {"num_outputs", K::kInt}};
constexpr OpAttr kPad[] = {{"mode", K::kString}};
constexpr OpAttr kDft[] = {{"inverse", K::kInt}, {"onesided", K::kInt}};
constexpr OpAttr kResize[] = {
    {"antialias", K::kInt},         {"axes", K::kInts},
    {"coordinate_transformation_mode", K::kString}, {"cubic_coeff_a", K::kFloat},
    {"exclude_outside", K::kInt},   {"extrapolation_value", K::kFloat},
    {"keep_aspect_ratio_policy", K::kString},       {"mode", K::kString},
    {"nearest_mode", K::kString}};
constexpr OpAttr kAvgPool[] = {{"auto_pad", K::kString}, {"ceil_mode", K::kInt},     {"count_include_pad", K::kInt},
                               {"dilations", K::kInts},  {"kernel_shape", K::kInts, true}, {"pads", K::kInts},
                               {"strides", K::kInts}};
constexpr OpAttr kLpPool[] = {{"auto_pad", K::kString},  {"ceil_mode", K::kInt}, {"dilations", K::kInts},
                              {"kernel_shape", K::kInts, true}, {"p", K::kInt},  {"pads", K::kInts},
                              {"strides", K::kInts}};
constexpr OpAttr kGroupNorm[] = {{"epsilon", K::kFloat}, {"num_groups", K::kInt, true}, {"stash_type", K::kInt}};
constexpr OpAttr kCol2Im[] = {{"dilations", K::kInts}, {"pads", K::kInts}, {"strides", K::kInts}};
constexpr OpAttr kAxes[] = {{"axes", K::kInts}};
constexpr OpAttr kGelu[] = {{"approximate", K::kString}};
constexpr OpAttr kAlignCorners[] = {{"align_corners", K::kInt}};
constexpr OpAttr kDeformConv[] = {{"dilations", K::kInts}, {"group", K::kInt},   {"kernel_shape", K::kInts},
                                  {"offset_group", K::kInt}, {"pads", K::kInts}, {"strides", K::kInts}};
constexpr OpAttr kStringSplit[] = {{"delimiter", K::kString}, {"maxsplit", K::kInt}};
constexpr OpAttr kRegex[] = {{"pattern", K::kString}};
constexpr OpAttr kImageDecoder[] = {{"pixel_format", K::kString}};
constexpr OpAttr kGridSample[] = {{"align_corners", K::kInt}, {"mode", K::kString}, {"padding_mode", K::kString}};
constexpr OpAttr kQuantize[] = {{"axis", K::kInt},         {"block_size", K::kInt}, {"output_dtype", K::kInt},
                                {"precision", K::kInt},    {"saturate", K::kInt}};
constexpr OpAttr kDequantize[] = {{"axis", K::kInt}, {"block_size", K::kInt}, {"output_dtype", K::kInt}};
constexpr OpAttr kRmsNorm[] = {{"axis", K::kInt}, {"epsilon", K::kFloat}, {"stash_type", K::kInt}};
constexpr OpAttr kRotary[] = {{"interleaved", K::kInt}, {"num_heads", K::kInt}, {"rotary_embedding_dim", K::kInt}};
constexpr OpAttr kAttention[] = {{"is_causal", K::kInt},   {"kv_num_heads", K::kInt},
                                 {"q_num_heads", K::kInt}, {"qk_matmul_output_mode", K::kInt},
                                 {"scale", K::kFloat},     {"softcap", K::kFloat},
                                 {"softmax_precision", K::kInt}};
constexpr OpAttr kBitCast[] = {{"to", K::kInt, true}};
constexpr OpAttr kCum[] = {{"exclusive", K::kInt}, {"reverse", K::kInt}};
constexpr OpAttr kCausalConv[] = {{"activation", K::kString}};
constexpr OpAttr kLinearAttention[] = {{"kv_num_heads", K::kInt}, {"q_num_heads", K::kInt}, {"scale", K::kFloat},
                                       {"update_rule", K::kString}};
constexpr OpAttr kFlexAttention[] = {{"prob_mod", K::kGraph}, {"scale", K::kFloat}, {"score_mod", K::kGraph}};
constexpr OpAttr kTensorScatter[] = {{"axis", K::kInt}, {"mode", K::kString}};
constexpr OpAttr kSwish[] = {{"alpha", K::kFloat}};
constexpr OpAttr kLabelEncoder[] = {
    {"default_float", K::kFloat},   {"default_int64", K::kInt},    {"default_string", K::kString},
    {"default_tensor", K::kTensor}, {"keys_floats", K::kFloats},   {"keys_int64s", K::kInts},
    {"keys_strings", K::kStrings},  {"keys_tensor", K::kTensor},   {"values_floats", K::kFloats},
    {"values_int64s", K::kInts},    {"values_strings", K::kStrings}, {"values_tensor", K::kTensor}};
constexpr OpAttr kTreeEnsemble[] = {
    {"aggregate_function", K::kInt},      {"leaf_targetids", K::kInts, true},   {"leaf_weights", K::kTensor, true},
    {"membership_values", K::kTensor},    {"n_targets", K::kInt},               {"nodes_falseleafs", K::kInts, true},
    {"nodes_falsenodeids", K::kInts, true}, {"nodes_featureids", K::kInts, true}, {"nodes_hitrates", K::kTensor},
    {"nodes_missing_value_tracks_true", K::kInts}, {"nodes_modes", K::kTensor, true},
    {"nodes_splits", K::kTensor, true},   {"nodes_trueleafs", K::kInts, true},  {"nodes_truenodeids", K::kInts, true},
    {"post_transform", K::kInt},          {"tree_roots", K::kInts, true}};

// One row per op version from opset 18 on whose inputs, outputs or
// attributes differ from the version libonnx 1.12 picks in its place, or
// whose op libonnx lacks. Versions that only widen the type constraints
// (Reshape-19/21, Identity-21, ...) keep libonnx's schema.
const OpVersion kTable[] = {
    {"", "ReduceL1", 18, 1, 2, 1, 1, kReduce, "data"},
    {"", "ReduceL2", 18, 1, 2, 1, 1, kReduce, "data"},
    {"", "ReduceLogSum", 18, 1, 2, 1, 1, kReduce, "data"},
    {"", "ReduceLogSumExp", 18, 1, 2, 1, 1, kReduce, "data"},
    {"", "ReduceMax", 18, 1, 2, 1, 1, kReduce, "data"},
    {"", "ReduceMean", 18, 1, 2, 1, 1, kReduce, "data"},
    {"", "ReduceMin", 18, 1, 2, 1, 1, kReduce, "data"},
    {"", "ReduceProd", 18, 1, 2, 1, 1, kReduce, "data"},
    {"", "ReduceSumSquare", 18, 1, 2, 1, 1, kReduce, "data"},
    {"", "Split", 18, 1, 2, 1, kVariadic, kSplit, "input"},
    {"", "Pad", 18, 2, 4, 1, 1, kPad, "data,pads"},
    {"", "Resize", 18, 1, 4, 1, 1, kResize, "X"},
    {"", "LpPool", 18, 1, 1, 1, 1, kLpPool, "X"},
    {"", "AveragePool", 19, 1, 1, 1, 1, kAvgPool, "X"},
    {"", "OptionalHasElement", 18, 0, 1, 1, 1, {}, ""},
    {"", "OptionalGetElement", 18, 1, 1, 1, 1, {}, "input"},
    {"", "DFT", 20, 1, 3, 1, 1, kDft, "input"},
    {"", "GridSample", 20, 2, 2, 1, 1, kGridSample, "X,grid"},
    {"", "GroupNormalization", 18, 3, 3, 1, 1, kGroupNorm, "X,scale,bias"},
    {"", "GroupNormalization", 21, 3, 3, 1, 1, kGroupNorm, "X,scale,bias"},
    {"", "Col2Im", 18, 3, 3, 1, 1, kCol2Im, "input,image_shape,block_shape"},
    {"", "CenterCropPad", 18, 2, 2, 1, 1, kAxes, "input_data,shape"},
    {"", "BitwiseAnd", 18, 2, 2, 1, 1, {}, "A,B"},
    {"", "BitwiseOr", 18, 2, 2, 1, 1, {}, "A,B"},
    {"", "BitwiseXor", 18, 2, 2, 1, 1, {}, "A,B"},
    {"", "BitwiseNot", 18, 1, 1, 1, 1, {}, "X"},
    {"", "Mish", 18, 1, 1, 1, 1, {}, "X"},
    {"", "DeformConv", 19, 3, 5, 1, 1, kDeformConv, "X,W,offset"},
    {"", "Gelu", 20, 1, 1, 1, 1, kGelu, "X"},
    {"", "AffineGrid", 20, 2, 2, 1, 1, kAlignCorners, "theta,size"},
    {"", "StringConcat", 20, 2, 2, 1, 1, {}, "X,Y"},
    {"", "StringSplit", 20, 1, 1, 2, 2, kStringSplit, "X"},
    {"", "RegexFullMatch", 20, 1, 1, 1, 1, kRegex, "X"},
    {"", "ImageDecoder", 20, 1, 1, 1, 1, kImageDecoder, "encoded_stream"},
    {"", "QuantizeLinear", 21, 2, 3, 1, 1, kQuantize, "x,y_scale"},
    {"", "DequantizeLinear", 21, 2, 3, 1, 1, kDequantize, "x,x_scale"},
    {"", "RMSNormalization", 23, 2, 2, 1, 1, kRmsNorm, "X,scale"},
    {"", "RotaryEmbedding", 23, 3, 4, 1, 1, kRotary, "X,cos_cache,sin_cache"},
    {"", "Attention", 23, 3, 6, 1, 4, kAttention, "Q,K,V"},
    {"", "Attention", 24, 3, 7, 1, 4, kAttention, "Q,K,V"},
    {"", "TensorScatter", 24, 2, 3, 1, 1, kTensorScatter, "past_cache,update"},
    {"", "Swish", 24, 1, 1, 1, 1, kSwish, "X"},
    {"", "BitCast", 26, 1, 1, 1, 1, kBitCast, "input"},
    {"", "CumProd", 26, 2, 2, 1, 1, kCum, "x,axis"},
    {"", "CausalConvWithState", 27, 2, 4, 1, 2, kCausalConv, "input,weight"},
    {"", "LinearAttention", 27, 3, 6, 1, 2, kLinearAttention, "query,key,value"},
    {"ai.onnx.preview", "FlexAttention", 1, 3, 3, 1, 1, kFlexAttention, "Q,K,V"},
    {"ai.onnx.ml", "LabelEncoder", 4, 1, 1, 1, 1, kLabelEncoder, "X"},
    {"ai.onnx.ml", "TreeEnsemble", 5, 1, 1, 1, 1, kTreeEnsemble, "X"},
};

}  // namespace

std::span<const OpVersion> op_versions() { return kTable; }

std::string_view required_input_name(const OpVersion& v, int i) {
  if (i < 0) return {};
  std::string_view names = v.required_inputs;
  for (; i > 0 && !names.empty(); --i) {
    const size_t comma = names.find(',');
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
  }
  return names.substr(0, names.find(','));
}

const OpVersion* find_op_version(std::string_view domain, std::string_view op, int opset) {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string, std::vector<const OpVersion*>>();
    for (const OpVersion& v : kTable) (*m)[std::string(v.domain) + '\0' + v.op_type].push_back(&v);
    return m;
  }();
  if (domain == "ai.onnx") domain = "";
  auto it = index->find(std::string(domain) + '\0' + std::string(op));
  if (it == index->end()) return nullptr;
  const OpVersion* best = nullptr;
  for (const OpVersion* v : it->second)
    if (v->since_version <= opset && (!best || v->since_version > best->since_version)) best = v;
  return best;
}

}  // namespace kiln::importer
