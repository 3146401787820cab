/*
** clock.h -- the clocks perfmon reads.
**
** pm_cycles is the cheap clock the hook reads when a group's stopwatch
** starts or stops: the cycle counter (rdtscp on x86-64, the virtual counter
** on arm64, CLOCK_MONOTONIC in ns elsewhere), with the id of the CPU it was
** read on where that matters and the hardware says it: a measure that starts
** and ends on different CPUs of unsynchronised counters is discarded.
** pm_cputime is the expensive, exact clock read once or twice per event to
** renormalise cycles into CPU time.
*/
#ifndef PM_CLOCK_H
#define PM_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "hints.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define PM_CPU_UNKNOWN UINT32_MAX

typedef struct pm_CpuTime {
  double cpu_us; /* exact: CLOCK_THREAD_CPUTIME_ID */
  double user_us; /* getrusage: moves at scheduler ticks, read every 4 ms */
  double system_us;
} pm_CpuTime;

void pm_clock_init (void);

/* What pm_clock_init found the CPU has. */
#define PM_CLOCK_KNOWN 1
#define PM_CLOCK_RDTSCP 2 /* the CPU has rdtscp */
#define PM_CLOCK_INVARIANT 4 /* its TSC is invariant */
extern atomic_uint pm_clock_flags;

/* Inline: the hook reads it at every change of group, where a call would
** cost as much as the read (the engine's tests build with PM_FAKE_CLOCK
** and link their own).  An invariant TSC ticks at one rate on every
** core and the kernel keeps the cores in step, so a measure that migrates
** stays exact: the CPU id is then reported as unknown and no measure is
** discarded for moving. */
#if defined(PM_FAKE_CLOCK)
uint64_t pm_cycles (uint32_t *cpu);
#else
static inline uint64_t pm_cycles (uint32_t *cpu) {
#if defined(__x86_64__)
  if ((atomic_load_explicit(&pm_clock_flags, memory_order_relaxed) &
       (PM_CLOCK_RDTSCP | PM_CLOCK_INVARIANT)) == PM_CLOCK_RDTSCP) {
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    *cpu = aux & 0xfff; /* Linux puts the node above bit 12 */
    return t;
  }
  *cpu = PM_CPU_UNKNOWN;
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t t;
  __asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(t));
  *cpu = PM_CPU_UNKNOWN;
  return t;
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  *cpu = PM_CPU_UNKNOWN;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}
#endif

void pm_cputime (pm_CpuTime *t);
double pm_wall_us (void); /* monotonic, for blocking time */
/* The calling OS thread, as an identity: CLOCK_THREAD_CPUTIME_ID is its
** clock, and a lua_State may be handed from one thread to another.  The
** address of a thread-local byte, inline: every commit asks. */
#if defined(PM_FAKE_CLOCK)
const void *pm_os_thread (void);
#else
extern _Thread_local PM_TLS_MODEL char pm_os_thread_mark;
static inline const void *pm_os_thread (void) {
  return &pm_os_thread_mark;
}
#endif
double pm_realtime_us (void); /* since the epoch, for snapshot times */
const char *pm_clock_name (void);

#endif
