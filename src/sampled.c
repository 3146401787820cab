/*
** sampled.c -- sampled monitors (see sampled.h).
*/
#include "sampled.h"

#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "resolve.h"
#include "sampler.h"
#include "stopwatch.h"
#include "trap.h"
#include "wrapper.h"

/* The tick timer is asked for less than any scheduler tick, so that its
** signal comes at every tick of the thread's CPU time, and never more
** often, whatever the monitors' period. */
#define PM_SAMPLED_TICK_NS 1000000u
/* The period when the only monitors left are windowed ones whose window is
** over: they count nothing more, so samples cost next to nothing. */
#define PM_SAMPLED_IDLE_NS 1000000000u

/*
** {======================================================
** A sample: the stacks walked, their sets charged
** =======================================================
*/

/* The set of the function of frame ar of T, or NULL for a C function
** (it runs in its caller's set): from the address map, or resolved. */
static const pm_Set *set_of (pm_State *S, lua_State *T, lua_Debug *ar) {
  uintptr_t v = 0;
  if (S->frame_direct)
    v = pm_map_get(&S->e.fns, pm_frame_function(ar->i_ci));
  if (v == 0) {
    lua_getinfo(T, "f", ar);
    v = pm_resolve(S, T);
    lua_pop(T, 1);
  }
  return PM_TAG(v) == PM_FN_LUA ? PM_PTR(v) : NULL;
}

/* T's frames, the top first, with the function of the last one whose set
** was looked up, and that set. */
typedef struct Frames {
  lua_State *T;
  lua_Debug ar;
  int level;
  const void *fn;
  const pm_Set *set;
} Frames;

static int frames_first (Frames *f, lua_State *T) {
  f->T = T;
  f->level = 0;
  f->fn = f; /* no function's address */
  return lua_getstack(T, 0, &f->ar);
}

/* The set of frame f: a recursion's frames run one function, whose set is
** looked up once. */
static PM_INLINE const pm_Set *frames_set (pm_State *S, Frames *f) {
  const void *fn;
  if (!S->frame_direct)
    return set_of(S, f->T, &f->ar);
  fn = pm_frame_function(f->ar.i_ci);
  if (fn != f->fn) {
    f->fn = fn;
    f->set = set_of(S, f->T, &f->ar);
  }
  return f->set;
}

static int frames_next (pm_State *S, Frames *f) {
  if (S->frame_direct) { /* the caller's CallInfo; the bottom: base_ci */
    const void *up = pm_frame_caller(f->ar.i_ci);
    if (up == NULL || pm_frame_caller(up) == NULL)
      return 0;
    f->ar.i_ci = (struct CallInfo *)up;
    return 1;
  }
  return lua_getstack(f->T, ++f->level, &f->ar);
}

/* In the thread that spun the nested loop running, the frames charged are
** those above the loop's frame (stop), less those in the spinning code's
** set from there up to the first other set: an exact monitor's stopwatches
** are cancelled at the loop, and a frame in its caller's set starts none.
** Returns how many frames from the top are charged, or -1 when stop is
** not on T's stack. */
static int loop_cut (pm_State *S, lua_State *T, const void *stop) {
  const pm_Set *spinner = NULL, *s;
  Frames f;
  int i, at = -1, cut = 0;
  if (!frames_first(&f, T))
    return -1;
  for (i = 0; spinner == NULL; i++) {
    if (at < 0 && (const void *)f.ar.i_ci == stop)
      at = i;
    if (at >= 0)
      spinner = frames_set(S, &f); /* the first Lua frame from stop down */
    if (!frames_next(S, &f))
      break;
  }
  if (at < 0)
    return -1;
  frames_first(&f, T);
  for (i = 0; i < at; i++, frames_next(S, &f))
    if ((s = frames_set(S, &f)) != NULL && s != spinner)
      cut = i + 1;
  return cut;
}

/* Who owns a sample's self time, as the walk goes down (context.h's
** rule): the innermost set that is not a library's, or failing one, the
** innermost library's (the host dispatching on its own). */
typedef struct Self {
  int found; /* a set that is not a library's was charged self time */
  const pm_Set *lib; /* the innermost library's set, until then */
  int frames; /* the frames walked so far */
} Self;

/* The walk found where self time's owner is decided with no plugin's set
** above: the innermost library's set, if one was seen, keeps it. */
static void self_to_library (pm_State *S, Self *o) {
  if (o->lib != NULL)
    pm_sw_sample_set(&S->e, o->lib, 1);
  o->found = 1;
}

/* Whether frame ar runs perfmon.event's or nested_loop's bracket: the code
** above it is the new iteration's, not its caller's. */
static int is_bracket (pm_State *S, lua_State *T, lua_Debug *ar) {
  lua_CFunction f;
  if (S->frame_direct && !pm_frame_is_c(ar->i_ci))
    return 0;
  if (!lua_getinfo(T, "f", ar))
    return 0;
  f = lua_tocfunction(T, -1);
  lua_pop(T, 1);
  return f != NULL && (f == S->brackets[0] || f == S->brackets[1]);
}

/* The first of T's frames a walk charges, the top first: from frame
** `from` (an allocation's) where it is on T's stack, the frames called
** since it are not the allocation's; else the top.  Returns how many it
** passed, or -1 for none. */
static int frames_from (pm_State *S, Frames *f, lua_State *T,
                        const void *from) {
  int i;
  if (!frames_first(f, T))
    return -1;
  for (i = 0; from != NULL && (const void *)f->ar.i_ci != from; i++)
    if (!frames_next(S, f))
      return frames_first(f, T) ? 0 : -1;
  return i;
}

/* Charges the sets of T's frames, the top first (from `from`, above),
** self time as *o says: where a plugin's frame wraps the library's
** function it called (wrapper.h), or an event's bracket stands between
** them, the library keeps it.  Returns 0 where it reached the code that
** spun the nested loop running: the walk ends there. */
static int walk (pm_State *S, lua_State *T, const void *from, Self *o) {
  const pm_Set *last = NULL, *s, *above = NULL;
  lua_Debug up; /* the frame above, where its set is a library's */
  Frames f;
  int i, cut = -1, self;
  if (S->e.loop > 0 && S->loop_thread[S->e.loop] == T)
    cut = loop_cut(S, T, S->loop_ci[S->e.loop]);
  if ((i = frames_from(S, &f, T, from)) < 0)
    return 1;
  for (;; i++, o->frames++) {
    if (cut >= 0 && i >= cut)
      return 0;
    s = frames_set(S, &f);
    if (s != NULL && s != last) {
      self = !o->found && !s->lib;
      if (self && above != NULL && pm_wraps(S, T, &up, &f.ar)) {
        self_to_library(S, o); /* the library's own work */
        self = 0;
      }
      pm_sw_sample_set(&S->e, s, self);
      o->found |= self;
      if (o->lib == NULL && s->lib)
        o->lib = s;
      last = s;
    }
    if (s == NULL && !o->found && is_bracket(S, T, &f.ar))
      self_to_library(S, o);
    if ((above = s != NULL && s->lib ? s : NULL) != NULL)
      up = f.ar;
    if (!frames_next(S, &f))
      return 1;
  }
}

/* L's stack, then those of the coroutines that resumed it, down to the
** main thread, where the chain of resumes can be read (else L's alone);
** in L, from frame `from` (walk).  Returns how many frames it walked. */
static int walk_all (pm_State *S, lua_State *L, const void *from) {
  lua_State *chain[PM_TRAP_CHAIN];
  Self o = {0, NULL, 0};
  int n = 0;
  if (S->running_direct)
    n = pm_trap_chain(S->main, S->co_f, chain);
  while (n > 0 && chain[n - 1] != L)
    n--;
  if (n == 0)
    walk(S, L, from, &o);
  else if (walk(S, chain[--n], from, &o))
    while (n > 0 && walk(S, chain[--n], NULL, &o))
      ;
  if (!o.found)
    self_to_library(S, &o);
  return o.frames;
}

/* A walk of the allocations due costs in proportion to the stack's
** depth, and comes every stride of bytes allocated: one of n frames holds
** the next off for n / PM_WALK_FRAMES strides, so that a deep stack
** (a recursion) costs the program no more than one of PM_WALK_FRAMES
** frames would; the points due meanwhile go to the next walk. */
#define PM_WALK_FRAMES 32

static void retime (pm_State *S);

/* L answers: a sample of the CPU time where a period passed (weight: the
** CPU clock says how much it charges), a sample of the allocations due
** from the frame that made the last of them, unless a deep walk holds it
** off (a sample of the CPU time comes meanwhile too). */
static void take (pm_Sampler *sm, lua_State *L, unsigned weight) {
  pm_State *S = sm->S;
  if (weight != 0) {
    int windowed = S->e.sample_window.open;
    int charge = pm_sw_sample(&S->e, 0, S->exact == 0);
    if (windowed && !S->e.sample_window.open)
      retime(S); /* the window is over, and its monitor's rate with it */
    if (charge)
      walk_all(S, L, NULL);
  }
  if (S->e.allocs.bytes >= S->alloc_hold &&
      pm_sw_sample(&S->e, 1, S->exact == 0)) {
    int n = walk_all(S, L, S->alloc_thread == L ? S->alloc_ci : NULL);
    S->alloc_hold =
        S->e.allocs.bytes + (uint64_t)(n / PM_WALK_FRAMES) * S->e.alloc_stride;
  }
}

void pm_sampled_alloc (pm_State *S, size_t size, int block) {
  pm_Sampler *sm = S->samplers[PM_SAMPLER_MONITOR];
  lua_State *T;
  lua_Debug ar;
  pm_sw_alloc_cross(&S->e, size, block);
  if (sm == NULL || S->e.allocs.bytes < S->alloc_hold)
    return;
  /* level 0 reads the thread's running frame, and walks nothing */
  T = pm_sampler_target(sm);
  S->alloc_thread = T;
  S->alloc_ci = lua_getstack(T, 0, &ar) ? (const void *)ar.i_ci : NULL;
  pm_sampler_ask(sm);
}

void pm_sampled_loop (lua_State *L, pm_State *S) {
  lua_Debug ar;
  int k = S != NULL ? S->e.loop : 0;
  if (k <= 0 || k >= PM_MAX_LOOPS)
    return;
  S->loop_thread[k] = L;
  S->loop_ci[k] = lua_getstack(L, 0, &ar) ? (const void *)ar.i_ci : NULL;
}

/* }====================================================== */

/*
** {======================================================
** Opening and closing
** =======================================================
*/

/* The timer a monitor asked for, else the CPU timer, unless
** PERFMON_SAMPLED_TIMER=tick asks for the one it falls back to (the specs
** run both). */
static int sampled_timer (int asked) {
  const char *force;
  if (asked != PM_SAMPLED_ANY_TIMER)
    return asked;
  force = getenv("PERFMON_SAMPLED_TIMER");
  return force != NULL && strcmp(force, "tick") == 0 ? PM_TIMER_TICK
                                                     : PM_TIMER_CPU;
}

/* The shortest period of the sampled monitors open, in ns: a windowed
** one's only while its window is open; 1 s when that leaves none. */
static uint64_t shortest (const pm_State *S) {
  uint32_t r = UINT32_MAX, v;
  int i;
  for (i = 0; i < S->nsampled; i++) {
    v = S->rates[i] & ~PM_SAMPLED_WINDOW;
    if ((S->rates[i] & PM_SAMPLED_WINDOW) && !S->e.sample_window.open)
      continue;
    if (v < r)
      r = v;
  }
  return r == UINT32_MAX ? PM_SAMPLED_IDLE_NS : (uint64_t)r * 1000u;
}

/* The CPU timer runs at the shortest period; the tick timer at every
** tick whatever it is. */
static void retime (pm_State *S) {
  pm_Sampler *sm = S->samplers[PM_SAMPLER_MONITOR];
  if (sm->timer == PM_TIMER_CPU)
    pm_sampler_retime(sm, shortest(S));
}

const char *pm_sampled_open (pm_State *S, uint32_t rate_us, int timer) {
  pm_Sampler *sm;
  const char *err;
  uint32_t *r;
  if (S->nsampled > 0 && timer != PM_SAMPLED_ANY_TIMER &&
      timer != S->sampled_asked)
    return timer == PM_TIMER_TICK
               ? "the sampled monitors open run on the \"cpu\" timer: "
                 "\"tick\" only once they are closed"
               : "the sampled monitors open run on the \"tick\" timer: "
                 "\"cpu\" only once they are closed";
  r = pm_grow(&S->e, S->rates, S->nsampled, S->nsampled + 1, &S->rates_cap,
              sizeof(*r), 4);
  if (r == NULL)
    return "not enough memory";
  S->rates = r;
  S->rates[S->nsampled] = rate_us;
  S->alloc_point = pm_sampled_alloc;
  if (S->nsampled > 0) {
    S->nsampled++;
    retime(S);
    return NULL;
  }
  if ((sm = pm_alloc(&S->e, sizeof(*sm))) == NULL)
    return "not enough memory";
  pm_sampler_init(sm, S, take);
  sm->timer = S->sampled_asked = sampled_timer(timer);
  sm->period_ns = (uint64_t)(rate_us & ~PM_SAMPLED_WINDOW) * 1000u;
  sm->tick_period_ns = PM_SAMPLED_TICK_NS;
  if ((err = pm_sampler_start(sm)) != NULL) {
    pm_free(&S->e, sm, sizeof(*sm));
    return err;
  }
  pm_sw_sampled(&S->e, 1);
  S->samplers[PM_SAMPLER_MONITOR] = sm;
  S->nsampled = 1;
  return NULL;
}

int pm_sampled_windowed (const pm_State *S) {
  int i;
  for (i = 0; i < S->nsampled; i++)
    if (S->rates[i] & PM_SAMPLED_WINDOW)
      return 1;
  return 0;
}

const char *pm_sampled_timer (const pm_State *S) {
  const pm_Sampler *sm = S->samplers[PM_SAMPLER_MONITOR];
  if (sm == NULL)
    return NULL;
  return sm->timer == PM_TIMER_CPU ? "cpu" : "tick";
}

void pm_sampled_free (pm_State *S) {
  pm_Sampler *sm = S->samplers[PM_SAMPLER_MONITOR];
  if (S->rates != NULL)
    pm_free(&S->e, S->rates, (size_t)S->rates_cap * sizeof(*S->rates));
  S->rates = NULL;
  S->rates_cap = 0;
  if (sm == NULL)
    return;
  pm_sampler_stop(sm);
  S->samplers[PM_SAMPLER_MONITOR] = NULL;
  pm_free(&S->e, sm, sizeof(*sm));
  S->nsampled = 0;
  pm_sw_sampled(&S->e, 0);
}

void pm_sampled_close (pm_State *S, uint32_t rate_us) {
  int i;
  if (S->nsampled == 0)
    return;
  for (i = 0; i < S->nsampled - 1 && S->rates[i] != rate_us; i++)
    ;
  S->rates[i] = S->rates[--S->nsampled]; /* that one, or the last */
  if (S->nsampled == 0)
    pm_sampled_free(S);
  else
    retime(S);
}

/* }====================================================== */
