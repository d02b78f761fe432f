// StatusError: a kiln::Status carried through C++ as an exception until
// pybind11 turns it into the kiln.KilnError subclass of its code
// (kiln/_errors.py) with the runtime's one-line message.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include <kiln/status.h>

namespace kiln::python {

class StatusError : public std::runtime_error {
 public:
  StatusError(StatusCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  explicit StatusError(const Status& status) : StatusError(status.code(), status.message()) {}
  StatusCode code() const { return code_; }

 private:
  StatusCode code_;
};

/// Throws StatusError(kInvalidArgument, concatenated args).
template <class... Args>
[[noreturn]] void throw_invalid(Args&&... args) {
  throw StatusError(StatusCode::kInvalidArgument, detail::str_cat(std::forward<Args>(args)...));
}

/// Registers the translator StatusError -> kiln._errors classes.
void register_error_translator();

}  // namespace kiln::python
