// Status: the error type of Kiln. No exceptions cross Kiln's layers; every
// fallible function returns a Status or a Result<T> (result.h).
//
// An OK Status is one null pointer: creating, moving and testing it costs
// nothing. A message is allocated only on error.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kiln {

/// The kind of failure. Stable: the C ABI mirrors these values.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,    ///< bad input from the user or a model file
  kNotFound = 2,           ///< a file, name, kernel or plugin is missing
  kUnimplemented = 3,      ///< valid but not supported (an op, a dtype)
  kOutOfRange = 4,         ///< an index or size outside its bounds
  kFailedPrecondition = 5, ///< called in the wrong state
  kInternal = 6,           ///< a bug in Kiln
  kIo = 7,                 ///< reading or writing a file failed
  kUnavailable = 8,        ///< a backend or library is not usable here
  kCancelled = 9,          ///< the caller cancelled the run (RunOptions::cancel)
  kDeadlineExceeded = 10,  ///< the run's deadline passed (RunOptions::deadline)
  kResourceExhausted = 11, ///< a device ran out of memory or another resource
};

/// Returns a short lower-case name of `code` ("invalid argument").
const char* status_code_name(StatusCode code);

/// A code and a message, or OK. Move-only; copy with clone().
class [[nodiscard]] Status {
 public:
  /// OK.
  Status() = default;
  /// An error with `code` (not kOk) and a message that names the problem.
  Status(StatusCode code, std::string message);

  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status ok() { return Status(); }

  bool is_ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  /// The message; empty when OK.
  const std::string& message() const;
  /// "invalid argument: message", or "ok".
  std::string to_string() const;

  /// Prepends "context: " to the message of an error; OK stays OK.
  Status with_context(std::string_view context) &&;

  Status clone() const { return is_ok() ? Status() : Status(state_->code, state_->message); }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

namespace detail {
// Message building without <sstream> in every file: what `os << arg` would
// print, for the argument types messages use.
void append_double(std::string& s, double v);   // "%g", as a default ostream
void append_pointer(std::string& s, const void* p);
void append_quoted(std::string& s, std::string_view v);  // std::quoted

template <class T>
void append_arg(std::string& s, const T& v) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, bool>) {
    s += v ? '1' : '0';
  } else if constexpr (std::is_same_v<D, char> || std::is_same_v<D, signed char> || std::is_same_v<D, unsigned char>) {
    s += static_cast<char>(v);
  } else if constexpr (std::is_enum_v<D>) {
    s += std::to_string(static_cast<long long>(v));
  } else if constexpr (std::is_integral_v<D>) {
    s += std::to_string(v);
  } else if constexpr (std::is_floating_point_v<D>) {
    append_double(s, static_cast<double>(v));
  } else if constexpr (std::is_pointer_v<std::remove_cvref_t<T>> &&
                       (std::is_same_v<D, const char*> || std::is_same_v<D, char*>)) {
    if (v) s += v;  // a null C string prints nothing
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    s += std::string_view(v);
  } else if constexpr (std::is_pointer_v<D>) {
    append_pointer(s, static_cast<const void*>(v));
  } else if constexpr (requires { v.string(); }) {
    append_quoted(s, v.string());  // std::filesystem::path prints quoted
  } else {
    static_assert(sizeof(T) == 0, "make_status: no way to print this argument");
  }
}

template <class... Args>
std::string str_cat(Args&&... args) {
  std::string s;
  (append_arg(s, args), ...);
  return s;
}
}  // namespace detail

/// Builds an error whose message is the streamed concatenation of `args`.
template <class... Args>
Status make_status(StatusCode code, Args&&... args) {
  return Status(code, detail::str_cat(std::forward<Args>(args)...));
}
template <class... Args>
Status invalid_argument(Args&&... args) {
  return make_status(StatusCode::kInvalidArgument, std::forward<Args>(args)...);
}
template <class... Args>
Status unimplemented(Args&&... args) {
  return make_status(StatusCode::kUnimplemented, std::forward<Args>(args)...);
}
template <class... Args>
Status not_found(Args&&... args) {
  return make_status(StatusCode::kNotFound, std::forward<Args>(args)...);
}
template <class... Args>
Status internal_error(Args&&... args) {
  return make_status(StatusCode::kInternal, std::forward<Args>(args)...);
}

}  // namespace kiln

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

/// Returns the Status of `expr` from the enclosing function if it is an error.
#define KILN_RETURN_IF_ERROR(expr)                         \
  do {                                                     \
    ::kiln::Status kiln_status_ = (expr);                  \
    if (!kiln_status_.is_ok()) return kiln_status_;        \
  } while (0)

/// Returns `make_status(code, ...)` when `cond` is false.
#define KILN_CHECK_OR_RETURN(cond, code, ...)                         \
  do {                                                                \
    if (!(cond)) return ::kiln::make_status((code), __VA_ARGS__);     \
  } while (0)
