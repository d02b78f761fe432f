// The demo model of `kiln demo-model` (see demo_model.cpp).
#pragma once

#include <string>

namespace kiln::cli {

/// The serialized ModelProto of the demo CNN; the same bytes on every call.
std::string demo_model_bytes();

}  // namespace kiln::cli
