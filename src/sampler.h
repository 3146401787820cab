/*
** sampler.h -- asking Lua for samples: the timer and its signal.
**
** Two things sample a lua_State: the profiler (profiler/), which keeps
** stacks, and the sampled monitors (sampled.c), which charge groups.  Each
** has a pm_Sampler: a timer that sends SIGPROF to the thread that started
** it, after a period of wall time ("precise": a one-shot POSIX timer), at
** the first scheduler tick after a period of the thread's CPU time
** ("tick": the same on its CPU clock; see timer_clock), or after a period
** of it ("cpu": a perf event, cpu_timer_open); the handler arms it again
** (the perf event's period), later than a period when the
** sampler's own cost was high (rearm), so that it never starves the
** program.  Either way the handler only counts the whole periods of the
** thread's CPU time and asks the hook for a count event at the next
** instruction of the coroutine that runs and of the main thread
** (pm_hook_request, async-signal-safe as lua_sethook is: ldebug.c says so,
** and lua.c stops a script on Ctrl-C that way).  The hook answers at that
** safe point through S->answer, pm_sampler_answer, which calls the
** sampler's `take`.  Everything the signal handler touches is here, in the fields
** marked for it, and in the lua_State hook fields.
*/
#ifndef PM_SAMPLER_H
#define PM_SAMPLER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "state.h"

/* pm_Sampler.timer: the clock the timer runs on.  Either way the periods
** are counted on the thread's CPU clock: only how often the handler gets
** to count them differs. */
enum {
  PM_TIMER_PRECISE, /* CLOCK_MONOTONIC: a signal every period */
  PM_TIMER_TICK, /* the thread's CPU clock: at most one a scheduler tick */
  PM_TIMER_CPU /* a perf event on the thread's CPU time: every period; the
               ** tick timer where the kernel refuses it (pm_sampler_start
               ** says which in `timer`) */
};

typedef struct pm_Sampler pm_Sampler;
struct pm_Sampler {
  pm_State *S;
  /* takes a sample of `weight` periods on L, at the hook's safe point */
  void (*take)(pm_Sampler *s, lua_State *L, unsigned weight);
  int hold; /* samples wait (the profiler's records are being read) */
  int asked; /* a sample pm_sampler_ask asked for, on the Lua thread */
  /* read by the signal handler */
  lua_State *volatile running; /* the coroutine running, where tracked */
  int slot; /* of its timer in sampler.c's table */
  atomic_int tag; /* the signal's value: the slot and a generation */
  uint64_t period_ns;
  _Atomic(uint64_t) next_period_ns; /* pm_sampler_retime's, or 0 */
  int timer; /* PM_TIMER_* */
  uint64_t tick_period_ns; /* the period on the tick timer (0: period_ns) */
  uint64_t cpu_mark; /* thread CPU time whose periods were counted */
  uint64_t asked_cpu; /* thread CPU time at the last request */
  atomic_uint pending; /* periods since the last sample */
  atomic_int sampling; /* the hook is at work: no period is counted */
  int has_timer;
  int fd; /* the CPU timer's event, or -1 */
  /* the one-shot timer's pacing: when and for how long it was last armed,
  ** the signal's latency seen lately, the hook's last sample */
  uint64_t armed_at, armed_ns;
  uint64_t latency_ns, latency_min;
  int latency_n;
  _Atomic(uint64_t) work_ns;
  uint64_t throttled; /* times the timer was armed past a period */
  long tid; /* the thread the timer signals, as gettid names it */
  pthread_t owner; /* the same thread */
};

/* Readies a zeroed s for S, answered by take; sets S->answer, through
** which the hook answers the count events samplers ask for. */
void pm_sampler_init (pm_Sampler *s, pm_State *S,
                      void (*take)(pm_Sampler *, lua_State *, unsigned));
/* Creates and arms s's timer, on the clock s->timer says, every
** s->period_ns; returns an error message, or NULL. */
const char *pm_sampler_start (pm_Sampler *s);
/* s samples every period_ns from its next signal on (a running CPU
** timer's period; from any thread). */
void pm_sampler_retime (pm_Sampler *s, uint64_t period_ns);
/* Deletes s's timer: no handler uses s afterwards, and no tick of it can
** meet SIGPROF's default action.  From any thread. */
void pm_sampler_stop (pm_Sampler *s);
/* The coroutine running, as the samples take it. */
lua_State *pm_sampler_target (pm_Sampler *s);
/* Asks for a sample from the thread that runs the Lua state, outside the
** signal handler (the allocator, which cannot walk the stack itself): the
** same count event, whose `take` then has a weight of 0 unless periods
** passed meanwhile. */
void pm_sampler_ask (pm_Sampler *s);
/* The count event a timer asked for, on L: the hook answers every sampler
** of S (S->samplers) with it, through S->answer. */
void pm_sampler_answer (pm_Sampler *s, lua_State *L);

#endif
