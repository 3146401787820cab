/*
** sampled.h -- sampled monitors: groups charged from samples of the stack.
**
** A sampled monitor sets no call/return hook.  The sampler (sampler.h)
** signals the thread every 4 ms of its CPU time on the "cpu" timer (a
** perf event), or where the kernel refuses it at the first scheduler tick
** after that on the "tick" timer, and at the next instruction
** the stack of the coroutine that runs, and of every coroutine that
** resumed it, is walked: each group on it is charged the CPU time since
** the last sample, once, and the innermost Lua frame's groups get it as
** self time too (stopwatch.c, pm_sw_sample).  Events are still bracketed
** by the markers, so the process's CPU time and jank histogram stay
** exact; a group's time in an event is that of the samples in it.  While
** an exact monitor is open its hook measures every group, and samples
** charge nothing.
*/
#ifndef PM_SAMPLED_H
#define PM_SAMPLED_H

#include "state.h"

/* A sampled monitor that samples every rate_us µs of CPU time opens (the
** first starts the timer) or closes (the last stops it): the CPU timer
** runs at the shortest period of those open, from its next signal.  With
** PM_SAMPLED_WINDOW in rate_us the monitor is the sample window's
** (stopwatch.h's pm_sw_window, opened first): its rate counts only while
** the window is open, and the timer goes back to the others' rate at the
** sample that ends it.  Opening returns an error message or NULL. */
#define PM_SAMPLED_WINDOW 0x80000000u
/* timer: the PM_TIMER_* (sampler.h) the monitor asks for, CPU or TICK, or
** PM_SAMPLED_ANY_TIMER: the one running, else the CPU timer (the tick
** timer with PERFMON_SAMPLED_TIMER=tick in the environment).  The first
** sampled monitor's decides; one that asks for another while it runs is
** refused. */
#define PM_SAMPLED_ANY_TIMER (-1)
const char *pm_sampled_open (pm_State *S, uint32_t rate_us, int timer);
void pm_sampled_close (pm_State *S, uint32_t rate_us);
/* Whether a windowed monitor is open. */
int pm_sampled_windowed (const pm_State *S);
/* A nested loop was entered (the loop level is S->e.loop) by L's running
** frame: the samples taken inside it stop there, so that the code that
** spun the loop is not charged for it, as exact monitors cancel it. */
void pm_sampled_loop (lua_State *L, pm_State *S);
/* The allocator's: an allocation of size bytes (a new block, or the
** growth of one) took the bytes allocated past a point of the memory
** probe's (stopwatch.h): a sample of the allocations due is asked for at
** the next instruction, or at the return of the function running if that
** comes first, and charges the stack from the frame running now. */
void pm_sampled_alloc (pm_State *S, size_t size, int block);
/* The timer the sampled monitors' samples come from, "cpu" or "tick";
** NULL while none is open. */
const char *pm_sampled_timer (const pm_State *S);
/* lua_close: the timer stops, whatever monitors were left open. */
void pm_sampled_free (pm_State *S);

#endif
