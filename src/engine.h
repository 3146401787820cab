/*
** engine.h -- pm_Engine, what perfmon measures with, for one Lua universe.
**
** The engine is the part of perfmon that knows no Lua: the clocks, the
** address map, groups and their sets, the stopwatch (iterations, windows,
** periods, commits) and alert detection.  It includes no Lua header, links
** alone, and is unit-tested in C with fake clocks (tests/engine/).  The
** adapter (state.h) embeds a pm_Engine as the first member of its pm_State
** and drives it from the hook; the layout below is grouped by owner.
**
** Two address maps key records on a Lua object's address: `fns`, the
** functions the hook looks up at every call (resolve.c), apart so that
** it stays small and its entries dense; `known`, everything else: threads
** (hook.c), environments and upvalues (group.c), chunks and prototypes
** (chunk.c).  The adapter's allocator wrapper (watch.c) drops an entry the
** moment Lua frees its key, so that an address reused by a new object
** never inherits the old object's groups; one filter of both maps' keys
** (`keyed`) tells it which frees to look up.
*/
#ifndef PM_ENGINE_H
#define PM_ENGINE_H

#include "chunk.h"
#include "clock.h"
#include "context.h"
#include "group.h"
#include "hints.h"
#include "index.h"
#include "map.h"
#include "source.h"

/* What the markers return: the same values as perfmon.h's PERFMON_OK and
** PERFMON_EMISUSE (host.c checks that they agree). */
#define PM_OK 0
#define PM_EMISUSE (-2)

/* Tags in the low bits of a `known` value (the pointers are 8-aligned). */
#define PM_TAG_MASK 7u
enum {
  PM_FN_LUA = 0, /* a Lua function; the value is its pm_Set */
  PM_FN_C = 1, /* a C function, or a Lua function of no group: its frame
                  inherits the caller's set */
  PM_FN_RESUME = 2, /* coroutine.resume: arg 1 is the thread */
  PM_FN_WRAP = 3, /* a coroutine.wrap function: upvalue 1 is the thread */
  PM_THREAD = 4, /* a pm_Thread */
  PM_ENV = 5, /* a pm_Env */
  PM_CHUNK = 6, /* a pm_Chunk */
  PM_UPVAL = 7 /* an upvalue: the pm_Env of its load, or none (NULL) */
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

/* The sample window: from `since` to `until` (monotonic µs), the samples
** taken charge each group's pm_WindowStats too (the part of a sample's
** span after `since`), so that its figures cover the window alone whenever
** they are read, even inside an event that outlasts it (an event's
** figures reach the totals only at its end): from `since` to `last`, its
** last sample.  It ends at the first sample past `until`, which it does
** not take (or when ended).  cpu_us: the samples' CPU time in it;
** missed_us: the part that charged no group, an exact monitor being open. */
typedef struct pm_SampleWindow {
  int open;
  uint64_t id; /* 1.. for each window opened; 0: none ever */
  double since, until, last;
  double since_cpu; /* the thread's CPU time at `since` */
  double cpu_us, missed_us;
  uint64_t samples;
} pm_SampleWindow;

struct pm_Engine {
  /* mem.c: perfmon's own records, through the allocator Lua was given */
  pm_Allocf falloc;
  void *fud;
  size_t bytes; /* perfmon's own records (pm_alloc), beside the maps' */
  pm_Map fns; /* a function -> its PM_FN_* value */
  /* times fns was emptied, or partly (source.c): what the adapter keeps
  ** of functions by their address is good while this holds (their frees
  ** are seen meanwhile) */
  uint64_t fns_forgets;
  pm_Map known; /* threads, environments, chunks, upvalues */
  pm_MapFilter keyed; /* the keys of both, for the allocator wrapper */
  int count_allocs; /* the memory probe is held: allocs counts */
  pm_Allocs allocs; /* every allocation counted, monotonic (watch.c) */

  /* group.c */
  pm_Group **groups; /* live and dead not yet swept, by id */
  int ngroups, groupcap;
  int lastid; /* ids made so far */
  int ndead; /* dead groups among them */
  pm_Env *envs;
  pm_Set **sets; /* interned, in no order */
  int nsets, setcap;
  pm_Index setidx; /* sets by their hash */
  pm_Set *empty;

  pm_Sources src; /* source.c */

  /* context.c: every context but the root, in the order they were made */
  pm_Ctx **ctxs;
  int nctxs, ctxcap;
  pm_Index ctxidx; /* by (base entered from, set) */
  uint64_t ctx_refused; /* calls past PM_CTX_MAX: run in their caller's */
  pm_Ctx root; /* nothing runs: outside any group, or all cancelled */

  /* stopwatch.c */
  unsigned probes; /* PM_BIT(probe) when held */
  int probe_refs[PM_NPROBES];
  int monitors;
  pm_Ctx *ctx; /* the context running: charged from `last` on */
  uint64_t last; /* cycles at the last change of context */
  int slow; /* a change must look at more than the clock (change_slow) */
  uint32_t last_cpu; /* the CPU `last` was read on, where it matters */
  pm_Allocs last_alloc; /* allocs then (the memory probe) */
  pm_Ctx *charged; /* contexts charged since the last flush */
  uint64_t flushes; /* of the charged contexts into their groups */
  pm_Ctx *blocking_ctx; /* the context a blocking call began in */
  uint64_t iter; /* iteration number, 1.. */
  uint64_t period; /* commits so far */
  uint64_t period_cycles; /* cycles when the period began */
  uint64_t period_blocked; /* blocked_cycles then */
  pm_Group *touched; /* groups that ran in this period */
  int ntouched; /* how many */
  pm_Allocs period_alloc; /* allocs at the commit */
  uint64_t window; /* renormalisations so far */
  uint64_t cycle_reads; /* of the cycle counter, by the stopwatch */
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
  int sampled; /* sampled monitors are open: samples charge groups */
  uint64_t samples; /* samples that charged groups */
  uint64_t samples_committed; /* of those, the ones in process.samples */
  pm_CpuTime sample_time; /* the thread's CPU time at the last sample */
  pm_CpuTime sample_dt; /* what the sample being taken charges */
  double sample_event_us; /* the part of it in this period (its event) */
  double sample_event_sum; /* what this period's samples gave its event */
  uint64_t sample_cycles; /* the counter at the last sample */
  double sample_wall; /* the monotonic clock at the last sample, µs */
  double sample_part; /* the part of this sample in the sample window */
  pm_SampleWindow sample_window;
  int sample_allocs; /* the walk under way charges alloc_walk, not time */
  /* sampled mode's memory: points on the line of bytes allocated
  ** (allocs.bytes), one drawn at random in each stride of alloc_stride
  ** bytes, each standing for a stride; UINT64_MAX while none is drawn */
  uint64_t alloc_next; /* allocs.bytes the next point lies below */
  uint64_t alloc_stratum; /* where its stride begins */
  uint64_t alloc_stride;
  uint64_t alloc_seed; /* the draws' state (xorshift64*), never 0 */
  pm_Allocs alloc_due; /* what the points since the last walk stand for */
  double alloc_due_blocks, alloc_carry; /* blocks, and the rounding's rest */
  pm_Allocs alloc_walk; /* what the walk under way charges */
  uint64_t alloc_walks; /* walks that charged bytes */
  int own; /* perfmon's own work runs (pm_sw_own) */
  uint64_t own_cycles; /* when it began */
  pm_CpuTime own_time;

  /* alert.c: the watcher's thresholds (µs) and what makes jank visible */
  int watching; /* a dispatcher is set: alerts are detected */
  int quiet; /* listeners run: nothing is charged to groups */
  double jank_threshold, blocking_threshold, input_window;
  int alert_inclusive; /* jank decided on inclusive time, not self time */
  int alerts_pending; /* groups with an alert not yet taken */
  double alert_due; /* wall µs: when the dispatcher wants its next call */
  int animating; /* the host says an animation runs */
  int event_animated; /* an animation ran during the open event */
  double last_input, event_since; /* wall µs */

  /* group.c's calls to what names sets, the contexts above it (context.h),
  ** set by pm_ctx_init: a sweep spares the contexts that run or wait to
  ** be flushed and frees those naming a dying group (sweep) before the sets
  ** go; pm_sets_free frees them all first (free) */
  void (*ctx_sweep)(pm_Engine *E);
  void (*ctx_free)(pm_Engine *E);
};

/* Readies a zeroed E to allocate with f and ud. */
static inline void pm_engine_init (pm_Engine *E, pm_Allocf f, void *ud) {
  E->falloc = f;
  E->fud = ud;
  pm_map_share(&E->fns, &E->keyed);
  pm_map_share(&E->known, &E->keyed);
  E->iter = 1;
  E->period = 1;
  E->root.base = &E->root;
  E->ctx = &E->root;
  E->alloc_next = UINT64_MAX;
}

#endif
