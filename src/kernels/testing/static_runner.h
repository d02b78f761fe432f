// Runs one portable kernel through its static call (kernels/static_call.h),
// for tests that compare it with compute().
#pragma once

#include <vector>

#include "kernels/testing/kernel_runner.h"

namespace kiln::testing {

/// Runs `call` through compute() (for the output shapes), then binds the
/// kernel's static call to the inputs' dtypes and shapes and those outputs
/// and runs it on fresh outputs, which it returns. kNotFound when the kernel
/// offers no static call for them; compute()'s error when compute() fails.
Result<std::vector<Value>> run_op_static(const OpCall& call);

}  // namespace kiln::testing
