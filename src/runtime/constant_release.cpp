#include "runtime/constant_release.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace kiln::runtime {
namespace {

// Only pages wholly inside [p, p + n): a neighbour's bytes may share the edges.
void drop_mapped_pages(const void* p, size_t n) {
  const long ps = sysconf(_SC_PAGESIZE);
  if (ps <= 0 || n == 0) return;
  const auto page = static_cast<uintptr_t>(ps);
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + n) / page * page;
  // A private, never-written file mapping: dropped pages are read from the
  // file again if touched, so a failure here only costs memory.
  if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace

void release_constant_bytes(ir::Graph& g, ConstantMap& constants, ir::ValueId id) {
  auto c = constants.find(id);
  if (c == constants.end()) return;
  auto ext = g.external_data.find(id);
  if (ext != g.external_data.end() && ext->second.mapped && ext->second.data == c->second.raw_data())
    drop_mapped_pages(c->second.raw_data(), c->second.nbytes());
  c->second = Tensor();
  if (auto it = g.initializers.find(id); it != g.initializers.end()) it->second = Tensor();
}

}  // namespace kiln::runtime
