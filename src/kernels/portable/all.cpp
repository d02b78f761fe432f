// The one list of portable kernel families. Each family file defines its
// register_* function; adding a family means adding one line in each list.
#include "kernels/registry.h"

namespace kiln::kernels {

void register_control_flow_ops(KernelRegistry& r);
void register_sequence_ops(KernelRegistry& r);
void register_matmul_ops(KernelRegistry& r);
void register_conv_ops(KernelRegistry& r);
void register_conv_transpose_ops(KernelRegistry& r);
void register_pool_ops(KernelRegistry& r);
void register_normalization_ops(KernelRegistry& r);
void register_quantize_ops(KernelRegistry& r);
void register_einsum_ops(KernelRegistry& r);
void register_det_ops(KernelRegistry& r);
void register_roi_align_ops(KernelRegistry& r);

void register_shape_ops(KernelRegistry& r);
void register_transform_ops(KernelRegistry& r);
void register_slice_ops(KernelRegistry& r);
void register_gather_scatter_ops(KernelRegistry& r);
void register_reduce_ops(KernelRegistry& r);
void register_softmax_ops(KernelRegistry& r);
void register_sort_ops(KernelRegistry& r);
void register_elementwise_ops(KernelRegistry& r);

void register_resize_ops(KernelRegistry& r);
void register_rnn_ops(KernelRegistry& r);
void register_loss_ops(KernelRegistry& r);
void register_signal_ops(KernelRegistry& r);
void register_detection_ops(KernelRegistry& r);
void register_text_ops(KernelRegistry& r);
void register_grid_sample_ops(KernelRegistry& r);
void register_training_ops(KernelRegistry& r);
void register_random_ops(KernelRegistry& r);
void register_opset18_ops(KernelRegistry& r);
void register_attention_ops(KernelRegistry& r);
void register_quantize_linear_ops(KernelRegistry& r);
void register_opset18_spatial_ops(KernelRegistry& r);
void register_string_ops_20(KernelRegistry& r);
void register_ml_ops(KernelRegistry& r);
void register_causal_conv_ops(KernelRegistry& r);
void register_linear_attention_ops(KernelRegistry& r);
void register_regex_ops(KernelRegistry& r);
void register_image_decoder_ops(KernelRegistry& r);
void register_deform_conv_ops(KernelRegistry& r);

void register_portable_kernels(KernelRegistry& r) {
  register_resize_ops(r);
  register_rnn_ops(r);
  register_loss_ops(r);
  register_signal_ops(r);
  register_detection_ops(r);
  register_text_ops(r);
  register_grid_sample_ops(r);
  register_training_ops(r);
  register_random_ops(r);
  register_shape_ops(r);
  register_transform_ops(r);
  register_slice_ops(r);
  register_gather_scatter_ops(r);
  register_reduce_ops(r);
  register_softmax_ops(r);
  register_sort_ops(r);
  register_elementwise_ops(r);
  register_control_flow_ops(r);
  register_sequence_ops(r);
  register_matmul_ops(r);
  register_conv_ops(r);
  register_conv_transpose_ops(r);
  register_pool_ops(r);
  register_normalization_ops(r);
  register_quantize_ops(r);
  register_einsum_ops(r);
  register_det_ops(r);
  register_roi_align_ops(r);
  register_opset18_ops(r);
  register_attention_ops(r);
  register_quantize_linear_ops(r);
  register_opset18_spatial_ops(r);
  register_string_ops_20(r);
  register_ml_ops(r);
  register_causal_conv_ops(r);
  register_linear_attention_ops(r);
  register_regex_ops(r);
  register_image_decoder_ops(r);
  register_deform_conv_ops(r);
}

}  // namespace kiln::kernels
