// Which ONNX nodes the oneDNN backend runs, and why it declines the rest.
#pragma once

#include <string>

#include "kiln/c/backend_sdk.hpp"

namespace kiln_onednn {

/// "" when the backend runs `node`; otherwise a reason a user can act on.
std::string decline_reason(const kiln::sdk::Node& node);

/// The constant scalar `v` holds (a one-element float32 constant), or false.
bool constant_scalar(const kiln::sdk::Value& v, float* out);

/// Ints of an int64 (or int32) constant.
bool constant_ints(const kiln::sdk::Value& v, std::vector<int64_t>* out);

}  // namespace kiln_onednn
