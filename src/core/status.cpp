#include "kiln/status.h"

namespace kiln {

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
