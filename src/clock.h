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

#include <stdint.h>

#define PM_CPU_UNKNOWN UINT32_MAX

typedef struct pm_CpuTime {
  double cpu_us; /* exact: CLOCK_THREAD_CPUTIME_ID */
  double user_us; /* getrusage: moves at scheduler ticks, read every 4 ms */
  double system_us;
} pm_CpuTime;

void pm_clock_init (void);
uint64_t pm_cycles (uint32_t *cpu);
void pm_cputime (pm_CpuTime *t);
double pm_wall_us (void); /* monotonic, for blocking time */
/* The calling OS thread, as an identity: CLOCK_THREAD_CPUTIME_ID is its
** clock, and a lua_State may be handed from one thread to another. */
const void *pm_os_thread (void);
double pm_realtime_us (void); /* since the epoch, for snapshot times */
const char *pm_clock_name (void);

#endif
