/*
** hints.h -- compiler hints for the hot paths (the hook, the allocator
** wrapper, the markers): what to keep inline, what to move out of line so
** that the common case needs no register saved, and thread-local storage
** read with a plain load.
*/
#ifndef PM_HINTS_H
#define PM_HINTS_H

#if defined(__GNUC__)
#define PM_INLINE inline __attribute__((always_inline))
#define PM_NOINLINE __attribute__((noinline))
#define PM_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* initial-exec: a plain load, where the default model of a shared object
   calls __tls_get_addr on every access */
#define PM_TLS_MODEL __attribute__((tls_model("initial-exec")))
#else
#define PM_INLINE inline
#define PM_NOINLINE
#define PM_UNLIKELY(x) (x)
#define PM_TLS_MODEL
#endif

#endif
