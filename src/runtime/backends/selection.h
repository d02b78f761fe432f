// Turns a session's backend settings (names in order, NAME.KEY=VALUE
// options, fallback policy) into a PartitionRequest: resolves names against
// a registry, creates one instance per selected plugin with its options (or,
// for a plugin with KILN_PLUGIN_SHARED_INSTANCES, takes the one the
// registry's sessions share: BackendRegistry::Impl::instance_for).
#pragma once

#include <string>
#include <vector>

#include "kiln/backends.h"
#include "runtime/backends/partitioner.h"

namespace kiln::runtime {

/// `names` empty: every available plugin with priority > 0, highest first
/// (ties in load order), then portable. Otherwise the given order; "portable"
/// may appear anywhere (it claims every node it has a kernel for), and is
/// implied last. Unknown names, duplicates and options for backends that are
/// not selected are errors. An unavailable named backend is skipped with a
/// note under `allow` and is an error under `require`. The option key
/// "device" picks a device by index or name.
Result<PartitionRequest> select_backends(const BackendRegistry& registry, const std::vector<std::string>& names,
                                         const std::vector<BackendOption>& options, FallbackPolicy fallback);

}  // namespace kiln::runtime
