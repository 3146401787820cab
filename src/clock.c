/*
** clock.c -- cycle counter, CPU id, thread CPU time, wall time.
**
** The design documents' RDTSC pitfalls are handled by the stopwatch, not
** here: this file only reads clocks.  rdtscp is used when the CPU has it,
** because it also returns the CPU id, which lets a measure that started
** and ended on different CPUs be discarded.
*/
#define _GNU_SOURCE
#include "clock.h"

#include "hints.h"

#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

/* What the CPU has, found by the first pm_clock_init (clock.h's flags).
** Every lua_State on every thread reads it, and states opened at once on
** several threads all write it (the same value): one atomic word, so that
** this is no data race.  Relaxed order is enough, each reader needing only
** the word. */
atomic_uint pm_clock_flags;

#define FLAGS() atomic_load_explicit(&pm_clock_flags, memory_order_relaxed)

/* Finds what the CPU has, once: whether its TSC is invariant (pm_cycles
** needs no CPU id then), whether it has rdtscp to read one. */
void pm_clock_init (void) {
  unsigned flags = PM_CLOCK_KNOWN;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (FLAGS() & PM_CLOCK_KNOWN)
    return;
  if (__get_cpuid(0x80000001, &a, &b, &c, &d) && ((d >> 27) & 1))
    flags |= PM_CLOCK_RDTSCP;
  if (__get_cpuid(0x80000007, &a, &b, &c, &d) && ((d >> 8) & 1))
    flags |= PM_CLOCK_INVARIANT;
#endif
  atomic_store_explicit(&pm_clock_flags, flags, memory_order_relaxed);
}

const char *pm_clock_name (void) {
#if defined(__x86_64__)
  unsigned flags = FLAGS();
  return (flags & PM_CLOCK_INVARIANT) ? "rdtsc (invariant)"
         : (flags & PM_CLOCK_RDTSCP)  ? "rdtscp"
                                      : "rdtsc";
#elif defined(__aarch64__)
  return "cntvct_el0";
#else
  return "clock_gettime";
#endif
}

static double read_us (clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* getrusage gives the user/system split, but Linux updates a running
** thread's figures only at scheduler ticks: a 2 ms event can read as 6.
** The thread CPU clock is exact, so it gives the total.  getrusage is read
** again only once the thread has run RUSAGE_EVERY_US since the last read:
** its figures cannot have moved by more than a few ticks meanwhile, and
** events are often far shorter than a tick, so reading it at every commit
** would cost a system call for nothing. */
#define RUSAGE_EVERY_US 4000.0

static _Thread_local PM_TLS_MODEL struct {
  double cpu_us; /* the thread's CPU time at the last read */
  double user_us, system_us; /* what getrusage said then */
} split = {-RUSAGE_EVERY_US, 0, 0};

void pm_cputime (pm_CpuTime *t) {
  t->cpu_us = read_us(CLOCK_THREAD_CPUTIME_ID);
  if (t->cpu_us - split.cpu_us >= RUSAGE_EVERY_US) {
    struct rusage ru;
#if defined(RUSAGE_THREAD)
    getrusage(RUSAGE_THREAD, &ru);
#else
    getrusage(RUSAGE_SELF, &ru);
#endif
    split.cpu_us = t->cpu_us;
    split.user_us =
        (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec;
    split.system_us =
        (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
  }
  t->user_us = split.user_us;
  t->system_us = split.system_us;
}

_Thread_local PM_TLS_MODEL char pm_os_thread_mark;

double pm_wall_us (void) {
  return read_us(CLOCK_MONOTONIC);
}

double pm_realtime_us (void) {
  return read_us(CLOCK_REALTIME);
}
