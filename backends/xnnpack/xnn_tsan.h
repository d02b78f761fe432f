// pthreadpool (a system library, not instrumented) hands tasks to its
// workers and waits for them in code ThreadSanitizer cannot see. Under TSan
// the two edges that matter are annotated: the caller's writes happen before
// a task runs (tsan_release before the parallel call, tsan_acquire at the
// task's start), and a task's writes happen before the caller goes on
// (tsan_release at the task's end, tsan_acquire after the call).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define KILN_XNN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_XNN_TSAN 1
#endif
#endif

namespace kiln_xnnpack {

#ifdef KILN_XNN_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
inline void tsan_acquire(const void* sync) { __tsan_acquire(const_cast<void*>(sync)); }
inline void tsan_release(const void* sync) { __tsan_release(const_cast<void*>(sync)); }
#else
inline void tsan_acquire(const void*) {}
inline void tsan_release(const void*) {}
#endif

}  // namespace kiln_xnnpack
