// Shared helpers of the kiln subcommands: argument parsing, error lines and
// printing values.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/result.h"
#include "kiln/value.h"

namespace kiln::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  ///< the command ran and something failed
inline constexpr int kExitUsage = 2;    ///< bad flags or arguments

/// Folds a message onto one line (newlines become "; ").
std::string one_line(std::string_view message);
/// Prints "kiln: error: MESSAGE" as one line on stderr and returns `exit_code`.
int fail(std::string_view message, int exit_code = kExitFailure);

/// One flag a subcommand accepts.
struct FlagSpec {
  std::string_view name;  ///< with the dashes: "--threads"
  bool takes_value = false;
  bool repeatable = false;
};

/// Parsed command line of one subcommand: positionals and flags. Flags take
/// "--flag VALUE" or "--flag=VALUE"; "--" ends the flags.
class Args {
 public:
  /// Errors (kInvalidArgument) name the flag and the subcommand.
  static Result<Args> parse(std::span<const std::string> argv, std::span<const FlagSpec> specs,
                            std::string_view command);

  const std::vector<std::string>& positionals() const { return positionals_; }
  bool has(std::string_view flag) const;
  /// The value of a flag given once (the last one if repeated).
  std::optional<std::string> value(std::string_view flag) const;
  /// Every value of a repeatable flag, in order.
  std::vector<std::string> values(std::string_view flag) const;

 private:
  std::vector<std::string> positionals_;
  std::vector<std::pair<std::string, std::string>> flags_;
};

/// Parses a decimal integer in [lo, hi] given to `flag`.
Result<int64_t> parse_int_flag(std::string_view flag, std::string_view text, int64_t lo, int64_t hi);

/// "float32[1, 10]", "seq(3 x float32[2])", "none".
std::string describe_type(const Value& v);
/// The first `max_values` elements of a tensor, comma separated ("..." after
/// them if there are more); for a sequence, those of its first tensor.
std::string preview_values(const Value& v, size_t max_values = 6);
/// Formats element `i` of a tensor (any dtype) for messages.
std::string format_element(const Tensor& t, int64_t i);
/// "[2, 0, 1]": the multi-index of flat index `i` in `shape`.
std::string multi_index(const Shape& shape, int64_t i);

/// Prints rows as left-aligned columns separated by two spaces.
void print_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace kiln::cli
