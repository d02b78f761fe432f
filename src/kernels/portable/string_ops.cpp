// StringNormalizer: drops stopwords from a [C] or [1, C] string tensor, then
// lower-cases, upper-cases or keeps the rest.
//
// Case mapping is done here on UTF-8 text, without the C library's locales
// (which differ between systems and may be missing): the one-to-one
// (simple) Unicode mappings of Basic Latin, Latin-1, Latin Extended-A,
// Latin Extended Additional, Greek, Cyrillic, Armenian and the fullwidth
// Latin letters. Other characters, and bytes that are not valid UTF-8, pass
// unchanged. The `locale` attribute is accepted and does not change the
// mapping (no language-specific rules such as Turkish dotless i).
#include <string_view>
#include <unordered_set>

#include "kernels/portable/util/elementwise.h"
#include "kernels/registry.h"

namespace kiln::kernels {
namespace {

using namespace ew;

struct CaseRange {
  uint32_t lo, hi;
  int32_t delta;
  uint8_t parity;  // 0: every code point; 1: odd ones only; 2: even ones only
};

constexpr CaseRange kToLower[] = {
    {0x41, 0x5A, 32, 0},      {0xC0, 0xD6, 32, 0},      {0xD8, 0xDE, 32, 0},      {0x100, 0x12F, 1, 2},
    {0x130, 0x130, -199, 0},  {0x132, 0x137, 1, 2},     {0x139, 0x148, 1, 1},     {0x14A, 0x177, 1, 2},
    {0x178, 0x178, -121, 0},  {0x179, 0x17E, 1, 1},     {0x386, 0x386, 38, 0},    {0x388, 0x38A, 37, 0},
    {0x38C, 0x38C, 64, 0},    {0x38E, 0x38F, 63, 0},    {0x391, 0x3A1, 32, 0},    {0x3A3, 0x3AB, 32, 0},
    {0x400, 0x40F, 80, 0},    {0x410, 0x42F, 32, 0},    {0x460, 0x481, 1, 2},     {0x48A, 0x4BF, 1, 2},
    {0x531, 0x556, 48, 0},    {0x1E00, 0x1E95, 1, 2},   {0x1EA0, 0x1EFF, 1, 2},   {0xFF21, 0xFF3A, 32, 0},
};

constexpr CaseRange kToUpper[] = {
    {0x61, 0x7A, -32, 0},     {0xB5, 0xB5, 743, 0},     {0xE0, 0xF6, -32, 0},     {0xF8, 0xFE, -32, 0},
    {0xFF, 0xFF, 121, 0},     {0x101, 0x12F, -1, 1},    {0x131, 0x131, -232, 0},  {0x133, 0x137, -1, 1},
    {0x13A, 0x148, -1, 2},    {0x14B, 0x177, -1, 1},    {0x17A, 0x17E, -1, 2},    {0x17F, 0x17F, -300, 0},
    {0x3AC, 0x3AC, -38, 0},   {0x3AD, 0x3AF, -37, 0},   {0x3B1, 0x3C1, -32, 0},   {0x3C2, 0x3C2, -31, 0},
    {0x3C3, 0x3CB, -32, 0},   {0x3CC, 0x3CC, -64, 0},   {0x3CD, 0x3CE, -63, 0},   {0x430, 0x44F, -32, 0},
    {0x450, 0x45F, -80, 0},   {0x461, 0x481, -1, 1},    {0x48B, 0x4BF, -1, 1},    {0x561, 0x586, -48, 0},
    {0x1E01, 0x1E95, -1, 1},  {0x1EA1, 0x1EFF, -1, 1},  {0xFF41, 0xFF5A, -32, 0},
};

template <size_t N>
uint32_t map_code_point(uint32_t cp, const CaseRange (&table)[N]) {
  for (const CaseRange& r : table) {
    if (cp < r.lo || cp > r.hi) continue;
    if (r.parity == 1 && (cp & 1u) == 0) continue;
    if (r.parity == 2 && (cp & 1u) != 0) continue;
    return static_cast<uint32_t>(static_cast<int32_t>(cp) + r.delta);
  }
  return cp;
}

/// Decodes one UTF-8 sequence at s[i]; returns its length, or 0 if invalid.
size_t decode_utf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  size_t len;
  uint32_t v;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2;
    v = c & 0x1Fu;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    v = c & 0x0Fu;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    v = c & 0x07u;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3Fu);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;  // overlong or not a scalar
  *cp = v;
  return len;
}

void encode_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

template <size_t N>
std::string map_case(std::string_view s, const CaseRange (&table)[N]) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t len = decode_utf8(s, i, &cp);
    if (len == 0) {  // not UTF-8: keep the byte
      out += s[i];
      ++i;
      continue;
    }
    encode_utf8(map_code_point(cp, table), &out);
    i += len;
  }
  return out;
}

/// Lower-cases UTF-8 text with the simple mappings described above.
std::string utf8_to_lower(std::string_view s) { return map_case(s, kToLower); }
/// Upper-cases UTF-8 text with the simple mappings described above.
std::string utf8_to_upper(std::string_view s) { return map_case(s, kToUpper); }

class StringNormalizerKernel final : public Kernel {
 public:
  enum class CaseChange : uint8_t { kNone, kLower, kUpper };

  Status init(const KernelInit& init) {
    const std::string action = init.attr_string("case_change_action", "NONE");
    if (action == "NONE") {
      case_change_ = CaseChange::kNone;
    } else if (action == "LOWER") {
      case_change_ = CaseChange::kLower;
    } else if (action == "UPPER") {
      case_change_ = CaseChange::kUpper;
    } else {
      return invalid_argument("attribute case_change_action is '", action,
                              "', expected NONE, LOWER or UPPER");
    }
    case_sensitive_ = init.attr_int("is_case_sensitive", 0) != 0;
    for (const std::string& w : init.attr_strings("stopwords")) {
      stopwords_.insert(case_sensitive_ ? w : utf8_to_lower(w));
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    if (x->dtype() != DType::kString) {
      return invalid_argument("input 0 has dtype ", dtype_name(x->dtype()), ", expected string");
    }
    const bool two_d = x->rank() == 2;
    if (!(x->rank() == 1 || (two_d && x->dim(0) == 1))) {
      return invalid_argument("input 0 has shape ", x->shape().to_string(),
                              ", expected [C] or [1, C]");
    }
    const std::string* in = x->data<std::string>();
    const int64_t n = x->numel();
    std::vector<int64_t> kept;
    kept.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if (!stopwords_.empty()) {
        const bool stop = case_sensitive_ ? stopwords_.count(in[i]) != 0 : stopwords_.count(utf8_to_lower(in[i])) != 0;
        if (stop) continue;
      }
      kept.push_back(i);
    }
    // All dropped: one empty string, keeping the input's rank.
    const int64_t c = kept.empty() ? 1 : static_cast<int64_t>(kept.size());
    const Shape shape = two_d ? Shape{1, c} : Shape{c};
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kString, shape));
    std::string* out = y->data<std::string>();
    if (kept.empty()) {
      out[0].clear();
      return Status::ok();
    }
    for (size_t k = 0; k < kept.size(); ++k) {
      const std::string& s = in[kept[k]];
      switch (case_change_) {
        case CaseChange::kNone: out[k] = s; break;
        case CaseChange::kLower: out[k] = utf8_to_lower(s); break;
        case CaseChange::kUpper: out[k] = utf8_to_upper(s); break;
      }
    }
    return Status::ok();
  }

 private:
  CaseChange case_change_ = CaseChange::kNone;
  bool case_sensitive_ = false;
  std::unordered_set<std::string> stopwords_;
};

}  // namespace

void register_string_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "StringNormalizer", .since_version = 10, .until_version = 1000,
         .dtypes = kStringDType, .type_input = 0, .factory = make_kernel<StringNormalizerKernel>, .flags = 0});
}

}  // namespace kiln::kernels
