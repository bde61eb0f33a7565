// ThreadSanitizer annotations for the system's (uninstrumented) abseil.
//
// Debian's libabsl is not built with -fsanitize=thread, so ThreadSanitizer
// does not see absl::Mutex lock and unlock: every member an absl::Mutex
// guards looks unsynchronized, and a TSan run of our code would drown in
// false reports. Linked into the TSan build's test binaries only, this file
// defines absl::Mutex's and absl::CondVar's locking members itself (the
// executable's definitions take precedence over the shared library's, for
// our calls and for the library's own calls through its PLT), tells TSan
// what each does with the annotation interface (sanitizer/tsan_interface.h),
// and calls the library's definition (dlsym(RTLD_NEXT)) to do it.
//
// The library's internals (condition evaluation in the unlocking thread,
// waits) run between a pre and a post annotation, where TSan ignores memory
// accesses, as abseil's own TSan build does. A wait (Await, CondVar::Wait)
// is a release before it and an acquire after it.
//
// oneTBB's scheduler is not instrumented either (a task handed to a worker
// thread is invisible to TSan), so these binaries run the compute pool with
// one thread: TBB's parallel loops run in the thread that calls them, and
// TSan checks the threads of our own (ps timers, the client's sender, gRPC
// callbacks, the checkpointer, the supervisor's reader).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "tbb/global_control.h"

namespace {

template <typename Fn>
Fn Real(const char* mangled) {
  void* fn = dlsym(RTLD_NEXT, mangled);
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_sync_annotations: %s not found: %s\n", mangled, dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

// The library's exported members call each other through its PLT (e.g.
// AwaitWithTimeout calls AwaitWithDeadline), which lands here again: only
// the outermost call of a thread is annotated.
thread_local int nesting = 0;
struct Outermost {
  Outermost() : outer(nesting++ == 0) {}
  ~Outermost() { --nesting; }
  const bool outer;
};

// The abseil inline namespace of this system's library, in mangled names.
#define PSTRAIN_ABSL_NS "N4absl7debian3"

void Release(void* mu, unsigned flags) {
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
}

// A call that returns with `mu` held (flags as for __tsan_mutex_pre_lock).
template <typename Call>
auto Locking(void* mu, unsigned flags, Call call) {
  __tsan_mutex_pre_lock(mu, flags);
  auto result = call();
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

// The most restrictive global_control wins: tests that ask for more threads
// get one too.
const tbb::global_control one_compute_thread(tbb::global_control::max_allowed_parallelism, 1);

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>("_Z" PSTRAIN_ABSL_NS "5Mutex4LockEv");
  Outermost guard;
  if (!guard.outer) return real(this);
  Locking(this, 0, [&] { return (real(this), 0); });
}

void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>("_Z" PSTRAIN_ABSL_NS "5Mutex6UnlockEv");
  Outermost guard;
  if (!guard.outer) return real(this);
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>("_Z" PSTRAIN_ABSL_NS "5Mutex7TryLockEv");
  Outermost guard;
  if (!guard.outer) return real(this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}

void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>("_Z" PSTRAIN_ABSL_NS "5Mutex10ReaderLockEv");
  Outermost guard;
  if (!guard.outer) return real(this);
  Locking(this, __tsan_mutex_read_lock, [&] { return (real(this), 0); });
}

void Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>("_Z" PSTRAIN_ABSL_NS "5Mutex12ReaderUnlockEv");
  Outermost guard;
  if (!guard.outer) return real(this);
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>("_Z" PSTRAIN_ABSL_NS
                                                              "5Mutex8LockWhenERKNS0_9ConditionE");
  Outermost guard;
  if (!guard.outer) return real(this, cond);
  Locking(this, 0, [&] { return (real(this, cond), 0); });
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "_Z" PSTRAIN_ABSL_NS "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Outermost guard;
  if (!guard.outer) return real(this, cond, timeout);
  return Locking(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "_Z" PSTRAIN_ABSL_NS "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Outermost guard;
  if (!guard.outer) return real(this, cond, deadline);
  return Locking(this, 0, [&] { return real(this, cond, deadline); });
}

void Mutex::Await(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>("_Z" PSTRAIN_ABSL_NS
                                                              "5Mutex5AwaitERKNS0_9ConditionE");
  Outermost guard;
  if (!guard.outer) return real(this, cond);
  Release(this, 0);
  Locking(this, 0, [&] { return (real(this, cond), 0); });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "_Z" PSTRAIN_ABSL_NS "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Outermost guard;
  if (!guard.outer) return real(this, cond, timeout);
  Release(this, 0);
  return Locking(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "_Z" PSTRAIN_ABSL_NS "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Outermost guard;
  if (!guard.outer) return real(this, cond, deadline);
  Release(this, 0);
  return Locking(this, 0, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  static auto real =
      Real<void (*)(CondVar*, Mutex*)>("_Z" PSTRAIN_ABSL_NS "7CondVar4WaitEPNS0_5MutexE");
  Outermost guard;
  if (!guard.outer) return real(this, mu);
  Release(mu, 0);
  Locking(mu, 0, [&] { return (real(this, mu), 0); });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "_Z" PSTRAIN_ABSL_NS "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Outermost guard;
  if (!guard.outer) return real(this, mu, timeout);
  Release(mu, 0);
  return Locking(mu, 0, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, Time)>(
      "_Z" PSTRAIN_ABSL_NS "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Outermost guard;
  if (!guard.outer) return real(this, mu, deadline);
  Release(mu, 0);
  return Locking(mu, 0, [&] { return real(this, mu, deadline); });
}

ABSL_NAMESPACE_END
}  // namespace absl
