/*
** stopwatch.h -- the cycle stopwatch of the design documents.
**
** A group's stopwatch runs from the outermost frame that enters the group
** in the current iteration to that frame's return: so when A calls B both
** run, and when B calls back into A, A is not started a second time.
** perfmon keeps them as contexts (context.h): between two changes of
** group one context runs, the groups running and the innermost set, and a
** change charges it the cycles since the last.  Bumping E->iter cancels
** every measure under way in O(1) (nested loops, event boundaries): the
** root runs, and a frame left in an older iteration returns to the root.
**
** Cycles accumulate per group over a period, the span between two commits
** (each event's begin and end, a snapshot taken outside events).  The
** thread's CPU time is read at the end of a window, which turns each
** group's share of the window's cycles into user, system and CPU
** microseconds.  A window ends at the first change of group once it is
** 1 ms old, and at commits, except that an event boundary leaves a
** younger window open: time off the CPU stays with the groups that ran
** around it, and short events share one clock read.  The contexts give
** their cycles to their groups at those ends (a flush).
*/
#ifndef PM_STOPWATCH_H
#define PM_STOPWATCH_H

#include "engine.h"

/* Changes of group.  A call into set s enters the context pm_ctx_child
** gives, and returns the context it left, to go back to at its return
** (NULL: no memory for a context, nothing changed).  The return leaves
** for it, or for the root when the iteration it was left in (iter) is
** over.  pm_sw_change goes to any context: a coroutine switch, one clock
** read for all that stops and starts there.  pm_sw_child is the context
** a call into s from c leads to, counted as entered, without a change:
** the frames of a coroutine that runs again (c when no memory). */
pm_Ctx *pm_sw_enter (pm_Engine *E, const pm_Set *s);
/* The same into a library's set s whose self time stays its own: the
** caller wraps the library's function (wrapper.h). */
pm_Ctx *pm_sw_enter_own (pm_Engine *E, const pm_Set *s);
void pm_sw_leave (pm_Engine *E, pm_Ctx *to, uint64_t iter);
void pm_sw_change (pm_Engine *E, pm_Ctx *to);
pm_Ctx *pm_sw_child (pm_Engine *E, pm_Ctx *c, const pm_Set *s);

/* c, left in iteration iter, if that iteration still runs; else the root:
** an event boundary or a nested loop cancelled what ran then. */
static inline pm_Ctx *pm_sw_valid (pm_Engine *E, pm_Ctx *c, uint64_t iter) {
  return c != NULL && iter == E->iter ? c : &E->root;
}

void pm_sw_start (pm_Engine *E); /* monitoring begins */
void pm_sw_stop (pm_Engine *E); /* monitoring ends: commit what is pending */
void pm_sw_snapshot (pm_Engine *E);
/* perfmon's own work (a snapshot's tables) begins (on) or ends: left out of
** every measure, the process's included, as time off the CPU is; nothing
** it allocates counts. */
void pm_sw_own (pm_Engine *E, int on);
/* A quiet region: what runs inside is charged to no group (the process
** still counts its CPU time). */
void pm_sw_quiet (pm_Engine *E, int on);
void pm_sw_probes (pm_Engine *E, unsigned probes, int delta);

/* Sampled mode: groups are charged from samples of the stack instead of
** stopwatches.  pm_sw_sampled(E, 1) marks the thread's CPU time where
** samples begin.  pm_sw_sample begins a walk of the stack: it takes the
** CPU time since the last sample (or with `allocs`, the allocations due,
** below) and returns whether the sets on the stack are to be charged with
** it (not when `charge` is 0: an exact monitor is open, and wins); then
** pm_sw_sample_set charges each set's groups, every group once per walk,
** and those of the set that owns the walk's self time (context.h's rule,
** told by sampled.c's walk) as self time, or self allocations, too,
** once. */
void pm_sw_sampled (pm_Engine *E, int on);
int pm_sw_sample (pm_Engine *E, int allocs, int charge);
void pm_sw_sample_set (pm_Engine *E, const pm_Set *s, int self);
/* The sample window (engine.h) opens now for window_us of wall time, or
** ends now if it is still open. */
void pm_sw_window (pm_Engine *E, double window_us);
void pm_sw_window_end (pm_Engine *E);

/* With the memory probe held in sampled mode, points are drawn on the line
** of bytes allocated (E->allocs.bytes), one in each stride of
** E->alloc_stride bytes (PM_ALLOC_STRIDE), at random; E->alloc_next is
** the next one (UINT64_MAX while none is drawn).  The allocator calls
** pm_sw_alloc_cross when an allocation of size bytes (a new block, or the
** growth of one) took allocs.bytes past it: the points it covers are due,
** each a stride of bytes, to the next walk, which the allocator asks for
** since it cannot walk the stack itself. */
#define PM_ALLOC_STRIDE 16384u
void pm_sw_alloc_cross (pm_Engine *E, size_t size, int block);

/* The host's markers; each returns PERFMON_OK or PERFMON_EMISUSE. */
int pm_sw_event_begin (pm_Engine *E);
int pm_sw_event_end (pm_Engine *E);
int pm_sw_nested_enter (pm_Engine *E);
int pm_sw_nested_leave (pm_Engine *E);
int pm_sw_blocking_begin (pm_Engine *E);
int pm_sw_blocking_end (pm_Engine *E);
/* A thread suspended inside the n innermost nested loops: they are set
** aside while it is (the loop below runs events again), with whether each
** had an event open (bit i: the i-th from the top); they come back when it
** runs again (0 when there is no room: they are dropped).  n levels of a
** thread that monitoring forgets may still be left (not a misuse). */
uint64_t pm_sw_nested_pause (pm_Engine *E, int n);
int pm_sw_nested_resume (pm_Engine *E, int n, uint64_t events);
void pm_sw_nested_orphan (pm_Engine *E, int n);
/* A thread suspended inside n blocking calls, which wait no more while it
** is (the code that runs meanwhile is not blocked); they go on when it
** runs again. */
void pm_sw_blocking_pause (pm_Engine *E, int n);
void pm_sw_blocking_resume (pm_Engine *E, int n);
/* n paused calls of a thread that monitoring forgets: they may still end
** (not a misuse), and never wait again. */
void pm_sw_blocking_orphan (pm_Engine *E, int n);

#endif
