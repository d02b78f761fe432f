#include "kernels/portable/util/gemm_prepack.h"

#include <string>

#include "kernels/prepack.h"

namespace kiln::kernels {
namespace {

template <class Pack>
PackedMatrix cached(const KernelInit& init, std::string_view slot, bool is_a, int64_t rows, int64_t cols,
                    Pack pack) {
  PrepackStore* store = active_prepack_store();
  if (!store) return pack();
  const std::string key = std::string(slot) + "/" + PackedMatrix::layout_key(is_a);
  PackedBytes found = store->find(init.node, key);
  if (!found.bytes.empty()) {
    PackedMatrix pm = PackedMatrix::from_bytes(is_a, rows, cols, found.bytes, std::move(found.holder));
    if (!pm.empty()) return pm;
  }
  PackedMatrix pm = pack();
  store->offer(init.node, key, PackedBytes{pm.bytes(), pm.holder()});
  return pm;
}

}  // namespace

PackedMatrix pack_a_for(const KernelInit& init, std::string_view slot, bool trans, int64_t m, int64_t k,
                        const float* a, int64_t lda) {
  return cached(init, slot, true, m, k, [&] { return PackedMatrix::pack_a(trans, m, k, a, lda); });
}

PackedMatrix pack_b_for(const KernelInit& init, std::string_view slot, bool trans, int64_t k, int64_t n,
                        const float* b, int64_t ldb) {
  return cached(init, slot, false, k, n, [&] { return PackedMatrix::pack_b(trans, k, n, b, ldb); });
}

}  // namespace kiln::kernels
