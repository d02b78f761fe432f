#include "kiln/child_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstring>

namespace kiln {
namespace {

// Reads `fd` until EOF, or until `timeout_s` (> 0) passes: false then.
bool read_until_eof(int fd, int timeout_s, std::string* out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char buf[1 << 16];
  for (;;) {
    int wait_ms = -1;
    if (timeout_s > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 60 * 1000));
    }
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    out->append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
#define KILN_ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ASAN_BUILD 1
#endif
#endif

bool fork_is_safe() {
#ifdef KILN_ASAN_BUILD
  std::error_code ec;
  size_t threads = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (++threads > 1) return false;
  }
  return !ec;  // unknown: not safe
#else
  return true;
#endif
}

bool write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string ChildResult::describe(int timeout_s) const {
  switch (end) {
    case End::kExited: return "exited with status " + std::to_string(exit_code);
    case End::kSignaled: return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    case End::kTimedOut: return "timed out after " + std::to_string(timeout_s) + " s";
    case End::kUnknown: break;
  }
  return "could not be waited for";
}

Result<ChildResult> run_in_child(const std::function<int(int fd)>& body, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return internal_error("cannot create a pipe: ", std::strerror(errno));
  std::fflush(nullptr);  // std::cout is synced with stdio: this flushes it too
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(fds[0]);
    close(fds[1]);
    return internal_error("cannot fork: ", std::strerror(e));
  }
  if (pid == 0) {
    close(fds[0]);
    int rc = 1;
    try {
      rc = body(fds[1]);
    } catch (...) {
    }
    close(fds[1]);
    _exit(rc);
  }
  close(fds[1]);
  ChildResult r;
  const bool finished = read_until_eof(fds[0], timeout_s, &r.output);
  close(fds[0]);
  if (!finished) kill(pid, SIGKILL);
  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (!finished) {
    r.end = ChildResult::End::kTimedOut;
  } else if (waited != pid) {
    r.end = ChildResult::End::kUnknown;
  } else if (WIFSIGNALED(status)) {
    r.end = ChildResult::End::kSignaled;
    r.signal = WTERMSIG(status);
  } else {
    r.end = ChildResult::End::kExited;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return r;
}

}  // namespace kiln
