#include "runtime/backends/crash_report.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kiln::runtime {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr const char* kNames[] = {"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT"};
constexpr int kNumSignals = sizeof(kSignals) / sizeof(kSignals[0]);

struct sigaction g_previous[kNumSignals];
thread_local const char* t_current = nullptr;
// The partition most recently entered on any thread, for crashes on threads
// the plugin made (its own thread pool); lock-free, so safe to read in the handler.
std::atomic<const char*> g_last{nullptr};
std::atomic<int> g_active{0};
static_assert(std::atomic<const char*>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

void put(const char* s) {
  size_t n = std::strlen(s);  // strlen is async-signal-safe (POSIX.1-2016)
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void on_fatal_signal(int sig, siginfo_t* info, void* uctx) {
  int k = 0;
  while (k < kNumSignals && kSignals[k] != sig) ++k;
  if (k == kNumSignals) return;
  const char* what = t_current;
  bool other_thread = false;
  if (!what && g_active.load() > 0) {
    what = g_last.load();
    other_thread = what != nullptr;
  }
  if (what) {
    put("kiln: ");
    put(what);
    put(" crashed (");
    put(kNames[k]);
    put(other_thread ? ") on a thread the plugin started\n" : ")\n");
  }
  // Chain: the previous handler, or the default action.
  const struct sigaction& prev = g_previous[k];
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, uctx);
    return;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler) {
    prev.sa_handler(sig);
    return;
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  // A fault re-executes the instruction on return and now ends the process;
  // a raised signal (SIGABRT) is sent again.
  if (!info || info->si_code <= 0) raise(sig);
}

void install() {
  if (const char* off = std::getenv("KILN_NO_CRASH_REPORT"); off && std::strcmp(off, "1") == 0) return;
  for (int k = 0; k < kNumSignals; ++k) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = &on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(kSignals[k], &sa, &g_previous[k]) != 0) std::memset(&g_previous[k], 0, sizeof(g_previous[k]));
  }
}

}  // namespace

void install_crash_report() {
  static std::once_flag once;
  std::call_once(once, install);
}

PluginCallScope::PluginCallScope(const std::string& what) : previous_(t_current) {
  t_current = what.c_str();
  g_last.store(t_current);
  g_active.fetch_add(1);
}

PluginCallScope::~PluginCallScope() {
  // g_last never keeps pointing at a scope that ended (its partition may go away).
  const char* mine = t_current;
  g_last.compare_exchange_strong(mine, previous_);
  g_active.fetch_sub(1);
  t_current = previous_;
}

}  // namespace kiln::runtime
