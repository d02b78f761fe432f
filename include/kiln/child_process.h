// Running a function in a forked child process (POSIX), so that a crash, an
// abort or a hang inside it cannot take the caller down: the importer's ONNX
// type inference, each `kiln conformance` test and each `kiln check-backend`
// group run this way.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "kiln/result.h"

namespace kiln {

/// How a child process ended, and every byte it wrote to its pipe.
struct ChildResult {
  enum class End {
    kExited,    ///< it returned or called exit: see exit_code
    kSignaled,  ///< a signal ended it: see signal
    kTimedOut,  ///< it ran past the timeout and was killed (SIGKILL)
    kUnknown,   ///< it could not be waited for (the application ignores SIGCHLD)
  };
  End end = End::kUnknown;
  int exit_code = 0;   ///< with kExited
  int signal = 0;      ///< with kSignaled
  std::string output;  ///< what the child wrote to its end of the pipe

  /// Exited with status 0.
  bool exited_cleanly() const { return end == End::kExited && exit_code == 0; }
  /// "exited with status 3", "killed by signal 11 (Segmentation fault)",
  /// "timed out after 5 s" or "could not be waited for", for messages.
  std::string describe(int timeout_s = 0) const;
};

/// Forks. The child runs `body(fd)`, `fd` being the write end of a pipe
/// (write with write_all), and leaves with _exit(body's return value): no
/// atexit handlers or static destructors run in it. The parent reads the
/// pipe until the child closes it, or until `timeout_s` seconds have passed
/// (0: no limit; the child is then killed), and reaps the child. stdio
/// buffers are flushed before the fork so nothing is printed twice.
/// Errors: kInternal when the pipe or the fork cannot be made.
Result<ChildResult> run_in_child(const std::function<int(int fd)>& body, int timeout_s = 0);

/// False when a forked child could hang before it runs anything: in an
/// AddressSanitizer build whose process runs more than one thread. clang-14's
/// ASan allocator has no fork handlers, so a child forked while another thread
/// holds the allocator's lock waits for it forever at its first allocation
/// (glibc's malloc and TSan lock around fork; they are always safe).
bool fork_is_safe();

/// Writes all of `bytes` to `fd`, retrying after EINTR; false on an error.
bool write_all(int fd, std::string_view bytes);

}  // namespace kiln
