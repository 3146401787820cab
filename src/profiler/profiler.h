/*
** profiler.h -- the sampling profiler (perfmon.profiler), its wing.
**
** The stopwatch says which group is slow; the sampler says which function.
** The wing's rooms share the pm_Profiler below, and depend on the core
** (the hook, the engine's memory) in one direction:
**
** - records.c: what it keeps (functions, the trie of stacks, the ring of
**   samples), knowing no Lua;
** - the core's sampler (sampler.h): the timer and its signal, which count
**   the periods of the thread's CPU time and ask the hook for a count
**   event; the hook's answer comes back to the profiler's take;
** - sample.c: the sample taken at that safe point, the stack walked into
**   the records;
** - coroutines.c: which coroutine runs, without a monitor;
** - profiler.c: start, stop, reset;
** - lprofiler.c: the Lua binding, core.profiler_*: the userdata, and the
**   records read out into Lua tables.
**
** A running profiler is anchored in the registry and is S->profiler; the
** records are written in the hook and by frame(), and read by lprofiler.c
** between samples (P->s.hold keeps samples out while they are read).
*/
#ifndef PM_PROFILER_H
#define PM_PROFILER_H


#include <stdint.h>

#include "records.h"
#include "sampler.h"
#include "state.h"

#define PM_PROF_DEPTH 512 /* frames kept per sample, from the top */

/* user values of the profiler userdata */
enum { PM_PROF_THREADS = 1, PM_PROF_ANCHOR, PM_PROF_NUV };

/* The anchor (a table, user value PM_PROF_ANCHOR): what start prepared and
** stop puts back, by index, so that neither needs a new key (allocation)
** once start has committed: the coroutine library, its resume and wrap,
** ours, their names, and the thread start ran in. */
enum {
  PM_ANCHOR_COLIB = 1,
  PM_ANCHOR_RESUME, /* the originals: PM_ANCHOR_RESUME + i */
  PM_ANCHOR_WRAP,
  PM_ANCHOR_MY_RESUME, /* ours: PM_ANCHOR_MY_RESUME + i */
  PM_ANCHOR_MY_WRAP,
  PM_ANCHOR_NAME_RESUME, /* "resume", "wrap" */
  PM_ANCHOR_NAME_WRAP,
  PM_ANCHOR_THREAD,
  PM_ANCHOR_SLOTS = PM_ANCHOR_THREAD
};

/* pm_Profiler.state; lprofiler.c names them.  COLLECTED: its __gc ran (a
** finalizer may still hold it): its records are gone and it never starts
** again. */
enum {
  PM_PROF_NEW,
  PM_PROF_RUNNING,
  PM_PROF_STOPPED,
  PM_PROF_FORCED,
  PM_PROF_COLLECTED
};

struct pm_Profiler {
  pm_Sampler s; /* first: its take is the profiler's */
  pm_State *S; /* whose memory its records are: S outlives its __gc */
  int state; /* PM_PROF_* */
  int fast; /* walk frames through CallInfo (frame.h verified it) */
  pm_Records r;
  struct pm_Level *levels; /* the stack being sampled (sample.c) */
  struct pm_Name *names; /* the cache of call names (sample.c) */
  uint64_t total, gc; /* periods sampled; those the collector took */
  uint64_t cycles, cycles_seen; /* collections finished; at last sample */
  uint64_t truncated; /* samples of stacks deeper than PM_PROF_DEPTH */
  uint32_t nthreads;
  double since_us, micros; /* wall time running since reset */
  double start_realtime; /* of the first start since reset */
  double interval_us;
};

/* profiler.c */

/* Sets up the C side of a new profiler of S. */
void pm_profiler_init (pm_Profiler *P, pm_State *S);
/* Starts P, whose userdata is at index idx, sampling every rate_us µs of
** CPU time, on a timer of kind `timer` (PM_TIMER_*), and keeping
** max_samples (0: all); another profiler running on this state is
** forcibly stopped.  Then, if a monitor is open and `after` is not 0,
** calls the function at index after with the value above it (the Lua
** side's marker listener).  Raises an error when it cannot: P is
** then not running, and nothing of it is left behind. */
void pm_profiler_start (lua_State *L, pm_Profiler *P, int idx, uint32_t rate_us,
                        int timer, uint32_t max_samples, int after);
/* Stops P, whose userdata is at index idx (0 while the state closes: the
** coroutine library is left as it is); state: PM_PROF_STOPPED or
** PM_PROF_FORCED.  Works while the state closes, from any OS thread, and
** neither allocates nor raises. */
void pm_profiler_stop (lua_State *L, pm_Profiler *P, int idx, int state);
void pm_profiler_reset (pm_Profiler *P); /* forgets every record */
/* Frees what P holds (its __gc, once it is stopped). */
void pm_profiler_free (pm_Profiler *P);

/* lprofiler.c: adds core.profiler_* to the table on the top of the stack. */
void pm_profiler_register (lua_State *L);

#endif
