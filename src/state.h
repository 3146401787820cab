/*
** state.h -- pm_State, everything perfmon keeps for one lua_State.
**
** One pm_State per Lua universe (main thread and its coroutines).  It lives
** in a full userdata anchored in the registry, so it dies with lua_close.
** It is the engine's pm_Engine (engine.h), first, and what the adapter
** keeps beside it to talk to Lua: the layout below is grouped by owner.
*/
#ifndef PM_STATE_H
#define PM_STATE_H

#include <lua.h>

#include "engine.h"
#include "mem.h"

#define PM_WRAP_CACHE 64

/* wrapper.c's answer for one pair of functions (f: a library's, w: the
** plugin's that called it) */
typedef struct pm_WrapAnswer {
  const void *f, *w;
  uint64_t forgets; /* e.fns_forgets when it was found */
  int wraps;
} pm_WrapAnswer;

typedef struct pm_State pm_State;
typedef struct pm_Thread pm_Thread;
typedef struct pm_Profiler pm_Profiler; /* profiler/profiler.h */
typedef struct pm_Sampler pm_Sampler; /* sampler.h */

/* What samples a state (S->samplers): the hook answers a count request
** to each running one. */
enum { PM_SAMPLER_PROFILER, PM_SAMPLER_MONITOR, PM_SAMPLERS };

struct pm_State {
  pm_Engine e; /* first: the engine's callbacks find the state from it */
  lua_State *main;
  int closed;

  /* watch.c: the wrapped allocator (e.falloc is the one it wraps) */
  size_t string_offset; /* lua_tostring - lua_topointer for strings */
  /* what the allocator calls when the bytes allocated pass a point of the
  ** memory probe's (pm_sampled_alloc, set as a sampled monitor opens:
  ** watch.c never names sampled.c) */
  void (*alloc_point)(pm_State *S, size_t size, int block);
  uint64_t asked; /* the bytes the request under way was counted for */

  /* fleet.c: this state's entry on the process's board, or 0 */
  uint64_t fleet_id;

  /* sampler.c: the samplers running, or NULL, and what answers them at
  ** the count event they asked for (pm_sampler_answer, set by the first
  ** sampler made: the hook calls it, never sampler.c by name) */
  pm_Sampler *samplers[PM_SAMPLERS];
  void (*answer)(pm_Sampler *s, lua_State *L);
  /* what resumes a coroutine (trap.h's f): coroutine.resume, what a
  ** function of coroutine.wrap runs, and the profiler's (coroutines.c) */
  lua_CFunction co_f[3];
  int running_direct; /* the running coroutine is read from them */

  /* profiler/ */
  pm_Profiler *profiler; /* the sampling profiler running, or NULL */

  /* sampled.c: how many sampled monitors are open (their sampler is
  ** samplers[PM_SAMPLER_MONITOR]), and each one's period in µs */
  int nsampled;
  int sampled_asked; /* the timer the first sampled monitor asked for */
  int rates_cap;
  uint32_t *rates;
  /* where each nested loop level was entered: a thread and its frame,
  ** compared, never followed */
  const lua_State *loop_thread[PM_MAX_LOOPS];
  const void *loop_ci[PM_MAX_LOOPS];
  /* where the last allocation sampled ran (compared, never followed): its
  ** thread and frame, or NULL where it cannot be read */
  const lua_State *alloc_thread;
  const void *alloc_ci;
  uint64_t alloc_hold; /* no walk is asked for before e.allocs.bytes is */

  /* monitor.c */
  int exact; /* exact monitors open: the call/return hook is installed */
  /* lhooks.c's: debug.sethook and gethook shared or not, as exact
  ** monitors are open or not; NULL without the debug library */
  void (*hooks_shared)(lua_State *L, int shared);

  /* hook.c */
  lua_Hook hook; /* the fast or the public one */
  lua_Hook chain_hook; /* the same, calling a program's hook chained */
  int frame_direct; /* frames are read through CallInfo (frame.h) */
  int trap_direct; /* hooks are set without walking the stack (trap.h) */
  int proto_direct; /* chunks are told by their prototype tree (proto.h) */
  int proto_heap; /* and found in the heap when monitoring begins */
  lua_Hook debug_hook; /* the debug library's, which debug.sethook sets */
  pm_Thread *current; /* the thread of the last hook event */
  int hook_lost; /* a monitored thread's hook was taken (debug.sethook) */
  int threads_hooked; /* every coroutine has the monitor's hook */

  /* lmarkers.c: perfmon.event's and nested_loop's C functions, whose
  ** frames are boundaries of sets (hook.h's pm_hook_boundary) */
  lua_CFunction brackets[2];

  /* wrapper.c: which plugins' functions wrap which libraries' */
  pm_WrapAnswer wrap[PM_WRAP_CACHE];

  /* path.c: the deepest folder the last path normalised went down, which
  ** then existed and held no symlink: a path that begins with it (a
  ** plugin's next file, the next prefix of many) is walked from there */
  size_t path_dirlen;
  char path_dir[PM_KEY_MAX];
};

/* state.c */
pm_State *pm_state_get (lua_State *L); /* NULL when not loaded or closed */
/* Makes it, closed, with close as its finalizer (lua_close runs it);
** raises when another copy of perfmon's code owns this state's pm_State.
** pm_state_ready opens it once the rest of perfmon is set up for it. */
pm_State *pm_state_new (lua_State *L, lua_CFunction close);
void pm_state_ready (lua_State *L, pm_State *S);
/* The address the copy of perfmon's code that owns the state marked it
** with (which names its file), when it is another copy; else NULL. */
const void *pm_state_other (lua_State *L);

#endif
