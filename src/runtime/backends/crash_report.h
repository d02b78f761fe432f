// Crash reports for plugin code: while a thread runs a plugin's compiled
// partition, a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) first
// writes one line naming the backend and the partition to stderr, e.g.
//
//   kiln: backend 'xnnpack' in partition 'xnnpack:1f2e...' crashed (SIGSEGV)
//
// and then hands the signal to whatever handler was installed before (the
// default one ends the process as usual; a sanitizer's prints its report).
// The handler is async-signal-safe: it reads a preformatted string and
// calls write(2) and sigaction only. It is installed once per process, the
// first time a partition is made; KILN_NO_CRASH_REPORT=1 leaves the
// process's handlers alone.
#pragma once

#include <string>

namespace kiln::runtime {

/// Installs the handlers (once; later calls do nothing). Thread-safe.
void install_crash_report();

/// Marks the calling thread as running plugin code described by `what`
/// ("backend 'x' in partition 'y'") until destroyed. `what` must outlive
/// the scope. A crash on a thread the plugin started itself (no scope on
/// it) names the most recent partition entered on any thread, marked as such.
class PluginCallScope {
 public:
  explicit PluginCallScope(const std::string& what);
  ~PluginCallScope();
  PluginCallScope(const PluginCallScope&) = delete;
  PluginCallScope& operator=(const PluginCallScope&) = delete;

 private:
  const char* previous_;
};

}  // namespace kiln::runtime
