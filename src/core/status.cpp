#include "kiln/status.h"

#include <algorithm>
#include <cstdio>

namespace kiln {

namespace detail {

void append_double(std::string& s, double v) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof(buf), "%g", v);
  if (n > 0) s.append(buf, static_cast<size_t>(std::min<int>(n, static_cast<int>(sizeof(buf)) - 1)));
}

void append_pointer(std::string& s, const void* p) {
  if (!p) {
    s += '0';  // as an ostream prints a null pointer
    return;
  }
  char buf[32];
  const int n = std::snprintf(buf, sizeof(buf), "%p", p);
  if (n > 0) s.append(buf, static_cast<size_t>(n));
}

void append_quoted(std::string& s, std::string_view v) {
  s += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') s += '\\';
    s += c;
  }
  s += '"';
}

}  // namespace detail

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kIo: return "i/o error";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kDeadlineExceeded: return "deadline exceeded";
    case StatusCode::kResourceExhausted: return "resource exhausted";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code == StatusCode::kOk) return;
  state_ = std::make_unique<State>(State{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::to_string() const {
  if (!state_) return "ok";
  return std::string(status_code_name(state_->code)) + ": " + state_->message;
}

Status Status::with_context(std::string_view context) && {
  if (state_) state_->message = std::string(context) + ": " + state_->message;
  return std::move(*this);
}

}  // namespace kiln
