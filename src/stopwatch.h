/*
** stopwatch.h -- the cycle stopwatch of the design documents.
**
** A group's stopwatch is attached by the outermost frame that enters the
** group in the current iteration, and stopped when that frame leaves: so
** when A calls B both run, and when B calls back into A, A is not started a
** second time.  Each stopwatch remembers its iteration number; bumping
** E->iter cancels every measure under way in O(1) (nested loops, event
** boundaries), since a stale stopwatch is simply dropped when it stops.
**
** Cycles accumulate per group over a period, the span between two commits
** (each event's begin and end, a snapshot taken outside events).  The
** thread's CPU time is read at the end of a window, which turns each
** group's share of the window's cycles into user, system and CPU
** microseconds.  A window ends at the first change of group once it is
** 1 ms old, and at commits, except that an event boundary leaves a
** younger window open: time off the CPU stays with the groups that ran
** around it, and short events share one clock read.
*/
#ifndef PM_STOPWATCH_H
#define PM_STOPWATCH_H

#include "engine.h"

/* Starts stopwatches for the groups of s that are not running; returns
** the mask of those it started (bit i: s->g[i]). */
uint32_t pm_sw_acquire (pm_Engine *E, const pm_Set *s);
/* Stops the stopwatches a frame started in iteration iter. */
void pm_sw_release (pm_Engine *E, const pm_Set *s, uint32_t owned,
                    uint64_t iter);

/* Self time runs for the innermost frame's set.  A call into another set
** enters it: its stopwatches start, and it becomes the innermost set;
** returns what the frame owns, PM_SW_SELF and the acquired bits.  Its
** return leaves it: the set below (that of the frame under it) becomes
** the innermost again.  pm_sw_self says which set is innermost when
** frames go without their returns (a thread perfmon loses sight of). */
#define PM_SW_SELF ((uint64_t)1 << 32)
uint64_t pm_sw_enter (pm_Engine *E, const pm_Set *s);
void pm_sw_leave (pm_Engine *E, const pm_Set *s, uint64_t owned, uint64_t iter,
                  const pm_Set *below);
void pm_sw_self (pm_Engine *E, const pm_Set *s);

/* A coroutine switch stops the stopwatches of the frames of one thread
** and starts those of another's, between pm_sw_switch_begin and
** pm_sw_switch_end, at one instant: the clock is read once, at begin (a
** read costs tens of ns in a virtual machine), and what the switch itself
** takes goes to what runs after it.  No set is innermost in between; s
** is at end. */
void pm_sw_switch_begin (pm_Engine *E);
void pm_sw_switch_end (pm_Engine *E, const pm_Set *s);

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
** samples begin.  pm_sw_sample takes the CPU time since the last sample
** and returns whether the sets on the stack are
** to be charged with it (not when `charge` is 0: an exact monitor is open,
** and wins); then pm_sw_sample_set charges each set's groups, the
** innermost first with self set: every group once per sample, those of
** the innermost set as self time too. */
void pm_sw_sampled (pm_Engine *E, int on);
int pm_sw_sample (pm_Engine *E, int charge);
void pm_sw_sample_set (pm_Engine *E, const pm_Set *s, int self);

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
