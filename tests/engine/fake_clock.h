/*
** fake_clock.h -- the clocks of clock.h, driven by the engine's tests.
**
** fake_clock.c replaces src/clock.c in engine-test: every clock the engine
** reads stands still until a test moves it, so that what a stopwatch, a
** window or a commit computes can be checked exactly.  The cycle counter
** runs at FAKE_CYCLES_PER_US against the wall clock; the thread's CPU clock
** moves only by what the test says ran on the CPU.
*/
#ifndef FAKE_CLOCK_H
#define FAKE_CLOCK_H

#include <stdint.h>

#define FAKE_CYCLES_PER_US 1000

/* wall_us of wall time pass, cpu_us of it on the thread's CPU (all user
** time): the cycle counter moves with the wall. */
void fake_advance (double wall_us, double cpu_us);
/* The next read of the thread's CPU clock is preempted for wall_us after
** it reads: the wait Linux puts there when the thread's slice is spent. */
void fake_preempt_in_cputime (double wall_us);
/* The CPU the counter is read on from now (unsynchronised counters). */
void fake_cpu (uint32_t cpu);

#endif
