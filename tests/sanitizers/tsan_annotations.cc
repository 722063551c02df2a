// ThreadSanitizer annotations for the synchronization that happens inside
// libraries not built with TSan (TSan builds only: cmake/FolioSanitize.cmake
// links this shared library into every executable of a
// -DFOLIO_SANITIZE=thread build; tests/sanitizers/run.sh makes one).
//
// 1. abseil. libabsl_synchronization from Debian is not built with TSan, so
// absl::Mutex, absl::CondVar and absl::Notification, which are atomics and
// futexes inside that library, synchronize nothing as far as TSan can see.
// Our rendezvous service, LocalCommunicator and worker service guard their
// state with absl::Mutex, and gRPC's own locks (grpc_core::Mutex and CondVar)
// are absl ones too, so without this every access under such a lock is
// reported as a race. An abseil built with TSan annotates these calls
// itself (ABSL_TSAN_MUTEX_*); this does the same from outside.
//
// 2. gRPC calls. A batch of operations started on a call (StartWrite,
// StartRead, Finish, ...) completes on another thread; libgrpc hands it over
// through its lock-free call combiner and completion queues, which TSan
// cannot see either, so a message serialized by the starting thread and
// destroyed in the reaction (OnWriteDone) on a gRPC thread reads as a race.
// grpc_call_start_batch() releases on the call and grpc_call_unref(), which
// gRPC's C++ layer calls when it finalizes the batch and before it runs the
// reaction, acquires on it: "a batch starts before it completes". (This may
// also order two of our threads that only meet through the same call; it
// never invents an order between unrelated calls.)
//
// How: this library defines those public, out-of-line entry points. It comes
// before libabsl_synchronization and libgrpc in the executable's library
// order, so the executable's calls and those of libgrpc / libgrpc++ / libgpr
// bind here. Each one tells TSan what it does (the __tsan_mutex_* and
// __tsan_acquire/__tsan_release interface, <sanitizer/tsan_interface.h>) and
// calls the library's own definition (dlsym(RTLD_NEXT, name)). Between
// pre_lock/post_lock and pre_unlock/post_unlock TSan ignores memory accesses,
// as for abseil's own annotations, so the conditions abseil evaluates inside
// Await / LockWhen / Unlock are not checked.
//
// Limits: a CondVar wait or an Await is annotated as an exclusive unlock and
// relock (the mode the mutex is held in is not visible from here; folio and
// gRPC wait with exclusive locks only). Notification::HasBeenNotified() is
// inline and reads an atomic that the uninstrumented Notify() sets, so only
// WaitForNotification*() synchronize with Notify(). If abseil's ABI changes
// (another inline namespace, other signatures) dlsym fails and the first
// call aborts with the name it could not find: update the names below.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <grpc/grpc.h>

#include "absl/base/config.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

static_assert(ABSL_OPTION_USE_INLINE_NAMESPACE == 1,
              "the mangled names below assume abseil's inline namespace");

namespace {

#define FOLIO_TSAN_STR2(x) #x
#define FOLIO_TSAN_STR(x) FOLIO_TSAN_STR2(x)

// The next definition of `name` after this library's (the real one).
template <typename Fn>
Fn Next(const std::string& name) {
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_annotations: no %s to wrap (%s)\n", name.c_str(), dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

// abseil's definition of the member whose mangled name, past
// "_ZN[K]4absl<len><inline namespace>", is `rest`.
template <typename Fn>
Fn Real(const char* rest, bool is_const = false) {
  const std::string ns = FOLIO_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return Next<Fn>(std::string(is_const ? "_ZNK4absl" : "_ZN4absl") + std::to_string(ns.size()) +
                  ns + rest);
}

// abseil's own entry points call one another (AwaitWithTimeout calls
// AwaitWithDeadline, Notification's waits lock its mutex, ...), and those
// calls bind here too: only the outermost one on a thread is annotated.
thread_local int depth = 0;
struct Nesting {
  Nesting() : outer(depth++ == 0) {}
  ~Nesting() { --depth; }
  const bool outer;
};

// Declares `real` (abseil's definition) and `nesting`; a nested call just
// returns real(...).
#define FOLIO_REAL(type, ...)                       \
  static const auto real = Real<type>(__VA_ARGS__); \
  const Nesting nesting

// A wait that releases `mu` and holds it again on return (Await*,
// CondVar::Wait*): the release is annotated before the wait and the acquire
// after it, and the wait itself lies inside the unlock annotation, where TSan
// ignores accesses (abseil evaluates the waiter's condition in there, with
// the real mutex held).
template <typename Wait>
auto WaitUnlocked(void* mu, Wait wait) {
  __tsan_mutex_pre_unlock(mu, 0);
  const auto result = wait();
  __tsan_mutex_post_unlock(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// --- Mutex -----------------------------------------------------------------

// Not ~Mutex(): destruction needs no annotation (freeing the memory drops
// TSan's state for it), and gRPC destroys its mutexes after reference-count
// drops that TSan cannot see, which would read as races with the last use.

void Mutex::Lock() {
  FOLIO_REAL(void (*)(Mutex*), "5Mutex4LockEv");
  if (!nesting.outer) return real(this);
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLock() {
  FOLIO_REAL(void (*)(Mutex*), "5Mutex10ReaderLockEv");
  if (!nesting.outer) return real(this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::TryLock() {
  FOLIO_REAL(bool (*)(Mutex*), "5Mutex7TryLockEv");
  if (!nesting.outer) return real(this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  FOLIO_REAL(bool (*)(Mutex*), "5Mutex13ReaderTryLockEv");
  if (!nesting.outer) return real(this);
  const unsigned flags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, flags);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::Unlock() {
  FOLIO_REAL(void (*)(Mutex*), "5Mutex6UnlockEv");
  if (!nesting.outer) return real(this);
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  FOLIO_REAL(void (*)(Mutex*), "5Mutex12ReaderUnlockEv");
  if (!nesting.outer) return real(this);
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

void Mutex::LockWhen(const Condition& cond) {
  FOLIO_REAL(void (*)(Mutex*, const Condition&), "5Mutex8LockWhenERKNS0_9ConditionE");
  if (!nesting.outer) return real(this, cond);
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  FOLIO_REAL(void (*)(Mutex*, const Condition&), "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  if (!nesting.outer) return real(this, cond);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, cond);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  FOLIO_REAL(bool (*)(Mutex*, const Condition&, Duration),
             "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  if (!nesting.outer) return real(this, cond, timeout);
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  FOLIO_REAL(bool (*)(Mutex*, const Condition&, Duration),
             "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  if (!nesting.outer) return real(this, cond, timeout);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool met = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  FOLIO_REAL(bool (*)(Mutex*, const Condition&, Time),
             "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  if (!nesting.outer) return real(this, cond, deadline);
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  FOLIO_REAL(bool (*)(Mutex*, const Condition&, Time),
             "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  if (!nesting.outer) return real(this, cond, deadline);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return met;
}

// Await*: called with the mutex held; abseil releases it while waiting and
// holds it again on return, whatever the outcome.
void Mutex::Await(const Condition& cond) {
  FOLIO_REAL(void (*)(Mutex*, const Condition&), "5Mutex5AwaitERKNS0_9ConditionE");
  if (!nesting.outer) return real(this, cond);
  WaitUnlocked(this, [&] { real(this, cond); return true; });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  FOLIO_REAL(bool (*)(Mutex*, const Condition&, Duration),
             "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  if (!nesting.outer) return real(this, cond, timeout);
  return WaitUnlocked(this, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  FOLIO_REAL(bool (*)(Mutex*, const Condition&, Time),
             "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  if (!nesting.outer) return real(this, cond, deadline);
  return WaitUnlocked(this, [&] { return real(this, cond, deadline); });
}

// --- CondVar: the wait releases the mutex and holds it again on return. ----

void CondVar::Wait(Mutex* mu) {
  FOLIO_REAL(void (*)(CondVar*, Mutex*), "7CondVar4WaitEPNS0_5MutexE");
  if (!nesting.outer) return real(this, mu);
  WaitUnlocked(mu, [&] { real(this, mu); return true; });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  FOLIO_REAL(bool (*)(CondVar*, Mutex*, Duration),
             "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  if (!nesting.outer) return real(this, mu, timeout);
  return WaitUnlocked(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  FOLIO_REAL(bool (*)(CondVar*, Mutex*, Time),
             "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  if (!nesting.outer) return real(this, mu, deadline);
  return WaitUnlocked(mu, [&] { return real(this, mu, deadline); });
}

// --- Notification: Notify() happens before the waits that see it. ---------

void Notification::Notify() {
  FOLIO_REAL(void (*)(Notification*), "12Notification6NotifyEv");
  if (!nesting.outer) return real(this);
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  FOLIO_REAL(void (*)(const Notification*), "12Notification19WaitForNotificationEv", true);
  if (!nesting.outer) return real(this);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  FOLIO_REAL(bool (*)(const Notification*, Duration),
             "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  if (!nesting.outer) return real(this, timeout);
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  FOLIO_REAL(bool (*)(const Notification*, Time),
             "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  if (!nesting.outer) return real(this, deadline);
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl

// --- gRPC: a batch started on a call happens before its completion. --------

extern "C" {

grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops, void* tag,
                                      void* reserved) {
  static const auto real =
      Next<grpc_call_error (*)(grpc_call*, const grpc_op*, size_t, void*, void*)>(
          "grpc_call_start_batch");
  __tsan_release(call);
  return real(call, ops, nops, tag, reserved);
}

void grpc_call_unref(grpc_call* call) {
  static const auto real = Next<void (*)(grpc_call*)>("grpc_call_unref");
  __tsan_acquire(call);
  real(call);
}

}  // extern "C"
