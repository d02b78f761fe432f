#include "kernels/prepack.h"

namespace kiln::kernels {
namespace {
thread_local PrepackStore* g_active = nullptr;
}  // namespace

PrepackStore* active_prepack_store() { return g_active; }

PrepackScope::PrepackScope(PrepackStore* store) : prev_(g_active) { g_active = store; }
PrepackScope::~PrepackScope() { g_active = prev_; }

}  // namespace kiln::kernels
