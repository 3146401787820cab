/*
** state.h -- pm_State, everything perfmon keeps for one lua_State.
**
** One pm_State per Lua universe (main thread and its coroutines).  It lives
** in a full userdata anchored in the registry, so it dies with lua_close.
** Every other room reads and writes its part of it: the layout below is
** grouped by owner.
**
** The address map `known` is shared by the rooms that key anything on a
** Lua object's address: functions (hook.c), threads (hook.c), environments
** and chunks (group.c).  watch.c wraps the allocator so that when Lua frees
** a block that is a key, the entry goes first: an address reused by a new
** object can never inherit the old object's groups.
*/
#ifndef PM_STATE_H
#define PM_STATE_H

#include <lua.h>

#include "clock.h"
#include "group.h"
#include "map.h"

/* Hints for the hot paths (the hook, the allocator wrapper): what to keep
** inline, and what to move out of line so that the common case needs no
** register saved. */
#if defined(__GNUC__)
#define PM_INLINE inline __attribute__((always_inline))
#define PM_NOINLINE __attribute__((noinline))
#define PM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PM_INLINE inline
#define PM_NOINLINE
#define PM_UNLIKELY(x) (x)
#endif

/* Tags in the low bits of a `known` value (the pointers are 8-aligned). */
#define PM_TAG_MASK 7u
enum {
  PM_FN_LUA = 0, /* a Lua function; the value is its pm_Set */
  PM_FN_C = 1, /* a C function: its frame inherits the caller's set */
  PM_FN_RESUME = 2, /* coroutine.resume: arg 1 is the thread */
  PM_FN_WRAP = 3, /* a coroutine.wrap function: upvalue 1 is the thread */
  PM_THREAD = 4, /* a pm_Thread */
  PM_ENV = 5, /* a pm_Env */
  PM_CHUNK = 6 /* a pm_Chunk */
};
#define PM_TAG(v) ((unsigned)((v)&PM_TAG_MASK))
#define PM_PTR(v) ((void *)((v) & ~(uintptr_t)PM_TAG_MASK))

enum {
  PM_PROBE_JANK,
  PM_PROBE_BLOCKING,
  PM_PROBE_TICKS,
  PM_PROBE_CHUNKS,
  PM_PROBE_MEMORY,
  PM_NPROBES
};
#define PM_BIT(p) (1u << (p))

#define PM_MAX_LOOPS 64 /* nesting depth of event loops */

typedef struct pm_Thread pm_Thread;
typedef struct pm_Profiler pm_Profiler; /* profiler.c */

struct pm_State {
  lua_State *main;
  int closed;

  /* watch.c: the wrapped allocator and what it watches */
  lua_Alloc falloc;
  void *fud;
  size_t string_offset; /* lua_tostring - lua_topointer for strings */
  int count_allocs; /* the memory probe is held: allocs counts */
  pm_Allocs allocs; /* every allocation counted, monotonic */
  pm_Map known;
  size_t bytes; /* perfmon's own records (pm_alloc), beside known's */

  /* group.c */
  pm_Group **groups; /* live and dead not yet swept, by id */
  int ngroups, groupcap;
  int lastid; /* ids made so far */
  int ndead; /* dead groups among them */
  pm_Env *envs;
  pm_Source *sources;
  int nsources, sourcecap;
  pm_Set **sets;
  size_t setmask, nsets;
  pm_Set *empty;

  /* stopwatch.c */
  unsigned probes; /* PM_BIT(probe) when held */
  int probe_refs[PM_NPROBES];
  int monitors;
  uint64_t iter; /* iteration number, 1.. */
  uint64_t period; /* commits so far */
  uint64_t period_cycles; /* cycles when the period began */
  uint64_t period_blocked; /* blocked_cycles then */
  pm_Group *touched; /* groups that ran in this period */
  int ntouched; /* how many */
  const pm_Set *self_set; /* the innermost frame's set: its self time runs */
  uint64_t self_cycles, self_blocked; /* when that measure began */
  pm_Allocs self_alloc, period_alloc; /* S->allocs then, and at the commit */
  uint32_t self_cpu;
  uint64_t window; /* renormalisations so far */
  uint64_t window_cycles, window_blocked; /* when the window began */
  pm_CpuTime window_time; /* the thread's CPU time then */
  const void *window_thread; /* the OS thread whose clock that was */
  pm_Group *windowed; /* groups with cycles in this window */
  uint64_t window_limit; /* cycles: a group change ends an older window */
  double cpu_per_cycle; /* µs of CPU per busy cycle, last window */
  pm_CpuTime period_time; /* of this period, from windows closed in it */
  double cycles_per_us; /* the counter's rate; 0 until measured */
  uint64_t rate_cycles; /* where the rate is measured from */
  double rate_wall;
  int loop; /* 0: the outer loop; >0: nested */
  unsigned char in_event[PM_MAX_LOOPS];
  int loop_orphans; /* levels set aside when monitoring stopped: may end */
  int blocking_depth;
  int blocking_orphans; /* paused when monitoring stopped: may still end */
  double blocking_since, blocking_total; /* wall µs */
  uint64_t blocking_since_cycles, blocked_cycles; /* off the CPU */
  pm_Stats process;
  int own; /* perfmon's own work runs (pm_sw_own) */
  uint64_t own_cycles; /* when it began */
  pm_CpuTime own_time;

  /* alert.c: the watcher's thresholds (µs) and what makes jank visible */
  int watching; /* a dispatcher is set: alerts are detected */
  int quiet; /* listeners run: nothing is charged to groups */
  double jank_threshold, blocking_threshold, input_window;
  int alerts_pending; /* groups with an alert not yet taken */
  double alert_due; /* wall µs: when the dispatcher wants its next call */
  int animating; /* the host says an animation runs */
  int event_animated; /* an animation ran during the open event */
  double last_input, event_since; /* wall µs */

  /* fleet.c: this state's entry on the process's board, or 0 */
  uint64_t fleet_id;

  /* profiler.c */
  pm_Profiler *profiler; /* the sampling profiler running, or NULL */

  /* hook.c */
  lua_Hook hook; /* the fast or the public one */
  lua_Hook chain_hook; /* the same, calling a program's hook chained */
  int trap_direct; /* hooks are set without walking the stack (trap.h) */
  int proto_direct; /* chunks are told by their prototype tree (proto.h) */
  int proto_heap; /* and found in the heap when monitoring begins */
  lua_Hook debug_hook; /* the debug library's, which debug.sethook sets */
  pm_Thread *current; /* the thread of the last hook event */
  int hook_lost; /* a monitored thread's hook was taken (debug.sethook) */
  lua_CFunction resume_f, wrap_f;
};

/* state.c */
pm_State *pm_state_get (lua_State *L); /* NULL when not loaded or closed */
/* Makes it on first call; raises when another copy of perfmon's code
** owns this state's pm_State.  pm_state_other: the address that copy
** marked it with (which names its file), or NULL. */
pm_State *pm_state_open (lua_State *L);
const void *pm_state_other (lua_State *L);
void *pm_alloc (pm_State *S, size_t n);
void pm_free (pm_State *S, void *p, size_t n);
/* The array a of n items of `size` bytes, with room for `need` (its
** capacity *cap doubled from `first` as often as it takes): a itself when
** it has the room, else a new copy (a is freed, *cap updated), or NULL
** when memory ran out (a and *cap as they were). */
void *pm_grow (pm_State *S, void *a, int n, int need, int *cap, size_t size,
               int first);
char *pm_strdup (pm_State *S, const char *s);
void pm_strfree (pm_State *S, char *s);

#endif
