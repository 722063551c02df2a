#ifndef FOLIO_COMMON_CHECK_H_
#define FOLIO_COMMON_CHECK_H_

// Invariant checks. A failed CHECK is a bug in folio, never bad input (bad
// input gets an absl::Status): print where and abort. Debian's abseil
// (20220623) predates absl/log, hence our own small macros.

#include <cstdio>
#include <cstdlib>

namespace folio::internal {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* expr) {
  std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, expr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace folio::internal

#define FOLIO_CHECK(cond)                                                 \
  do {                                                                    \
    if (__builtin_expect(!(cond), 0))                                     \
      ::folio::internal::CheckFailed(__FILE__, __LINE__, #cond);          \
  } while (0)

#define FOLIO_CHECK_EQ(a, b) FOLIO_CHECK((a) == (b))
#define FOLIO_CHECK_NE(a, b) FOLIO_CHECK((a) != (b))
#define FOLIO_CHECK_LT(a, b) FOLIO_CHECK((a) < (b))
#define FOLIO_CHECK_LE(a, b) FOLIO_CHECK((a) <= (b))
#define FOLIO_CHECK_GE(a, b) FOLIO_CHECK((a) >= (b))
#define FOLIO_CHECK_GT(a, b) FOLIO_CHECK((a) > (b))

#ifdef NDEBUG
#define FOLIO_DCHECK(cond) \
  do {                     \
  } while (0)
#else
#define FOLIO_DCHECK(cond) FOLIO_CHECK(cond)
#endif

#endif  // FOLIO_COMMON_CHECK_H_
