#include "cli_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <complex>
#include <cstdio>
#include <iostream>

namespace kiln::cli {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one.
size_t utf8_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 && c >= 0xc2 ? 2 : (c & 0xf0) == 0xe0 ? 3
                 : (c & 0xf8) == 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  return n;
}

}  // namespace

std::string one_line(std::string_view message) {
  // Messages may quote names and bytes from model or data files: keep the
  // line one line of valid UTF-8 (control bytes and invalid sequences -> '?').
  std::string out;
  out.reserve(message.size());
  for (size_t i = 0; i < message.size();) {
    const char c = message[i];
    if (c == '\n' || c == '\r') {
      while (i + 1 < message.size() && (message[i + 1] == '\n' || message[i + 1] == '\r')) ++i;
      if (i + 1 < message.size()) out += "; ";
      ++i;
      continue;
    }
    const size_t n = utf8_length(message, i);
    if (n == 0 || (n == 1 && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f))) {
      out.push_back(c == '\t' ? ' ' : '?');
      ++i;
      continue;
    }
    out.append(message.substr(i, n));
    i += n;
  }
  return out;
}

int fail(std::string_view message, int exit_code) {
  std::fflush(stdout);
  std::fprintf(stderr, "kiln: error: %s\n", one_line(message).c_str());
  return exit_code;
}

Result<Args> Args::parse(std::span<const std::string> argv, std::span<const FlagSpec> specs,
                         std::string_view command) {
  Args args;
  bool flags_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (flags_done || a.size() < 2 || a[0] != '-') {
      args.positionals_.push_back(a);
      continue;
    }
    if (a == "--") {
      flags_done = true;
      continue;
    }
    std::string name = a;
    std::optional<std::string> inline_value;
    if (const size_t eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs)
      if (s.name == name) spec = &s;
    if (!spec) return invalid_argument("unknown flag '", name, "' for 'kiln ", command, "' (see kiln ", command, " --help)");
    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < argv.size()) {
        value = argv[++i];
      } else {
        return invalid_argument("flag ", name, " needs a value");
      }
    } else if (inline_value) {
      return invalid_argument("flag ", name, " takes no value");
    }
    if (!spec->repeatable && args.has(name)) return invalid_argument("flag ", name, " is given more than once");
    args.flags_.emplace_back(name, std::move(value));
  }
  return args;
}

bool Args::has(std::string_view flag) const {
  return std::any_of(flags_.begin(), flags_.end(), [&](const auto& f) { return f.first == flag; });
}

std::optional<std::string> Args::value(std::string_view flag) const {
  std::optional<std::string> v;
  for (const auto& f : flags_)
    if (f.first == flag) v = f.second;
  return v;
}

std::vector<std::string> Args::values(std::string_view flag) const {
  std::vector<std::string> v;
  for (const auto& f : flags_)
    if (f.first == flag) v.push_back(f.second);
  return v;
}

Result<int64_t> parse_int_flag(std::string_view flag, std::string_view text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    return invalid_argument(flag, " expects an integer in [", lo, ", ", hi, "], got '", text, "'");
  }
  return v;
}

std::string multi_index(const Shape& shape, int64_t i) {
  std::vector<int64_t> idx(shape.rank());
  for (size_t d = shape.rank(); d-- > 0;) {
    const int64_t n = shape[d] > 0 ? shape[d] : 1;
    idx[d] = i % n;
    i /= n;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

namespace {

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s.substr(0, 24)) q += (c == '\n' ? ' ' : c);
  if (s.size() > 24) q += "...";
  return q + "\"";
}

}  // namespace

std::string format_element(const Tensor& t, int64_t i) {
  return visit_dtype(t.dtype(), [&](auto tag) -> std::string {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, UnsupportedDType>) {
      // Low-precision types (one byte each in memory): the stored code.
      if (dtype_is_low_precision(t.dtype())) return "code " + std::to_string(static_cast<const uint8_t*>(t.raw_data())[i]);
      return "?";
    } else {
      const T& v = t.data<T>()[i];
      if constexpr (std::is_same_v<T, std::string>) {
        return quote(v);
      } else if constexpr (std::is_same_v<T, bool>) {
        return v ? "true" : "false";
      } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
        return "(" + format_double(v.real()) + (v.imag() < 0 ? "" : "+") + format_double(v.imag()) + "j)";
      } else if constexpr (std::is_integral_v<T>) {
        return std::to_string(v);
      } else if constexpr (std::is_same_v<T, double>) {
        return format_double(v);
      } else {  // float, Float16, BFloat16
        return format_double(static_cast<double>(static_cast<float>(v)));
      }
    }
  });
}

std::string describe_type(const Value& v) {
  if (v.is_none()) return "none";
  if (v.is_tensor()) return std::string(dtype_name(v.tensor().dtype())) + v.tensor().shape().to_string();
  const auto& items = v.sequence_items();
  if (items.empty()) return std::string("seq(0 x ") + dtype_name(v.elem_dtype()) + ")";
  return "seq(" + std::to_string(items.size()) + " x " + dtype_name(items[0].dtype()) +
         items[0].shape().to_string() + (items.size() > 1 ? ", ...)" : ")");
}

std::string preview_values(const Value& v, size_t max_values) {
  const Tensor* t = nullptr;
  if (v.is_tensor()) t = &v.tensor();
  if (v.is_sequence() && !v.sequence_items().empty()) t = &v.sequence_items()[0];
  if (!t || !t->defined()) return "";
  std::string s;
  const int64_t n = t->numel();
  for (int64_t i = 0; i < n && i < static_cast<int64_t>(max_values); ++i) s += (i ? ", " : "") + format_element(*t, i);
  if (n > static_cast<int64_t>(max_values)) s += ", ...";
  return s;
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) {
      if (widths.size() <= c) widths.push_back(0);
      widths[c] = std::max(widths[c], r[c].size());
    }
  for (const auto& r : rows) {
    std::string line = "  ";
    for (size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line.append(widths[c] - r[c].size() + 2, ' ');
    }
    std::cout << line << '\n';
  }
}

}  // namespace kiln::cli
