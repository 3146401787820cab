/*
** hook.c -- the debug hook, shadow stacks, thread switches.
*/
#include "hook.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "perfmon.h"
#include "proto.h"
#include "resolve.h"
#include "stopwatch.h"
#include "trap.h"
#include "watch.h"
#include "wrapper.h"

#define PM_MASK (LUA_MASKCALL | LUA_MASKRET)

/*
** {======================================================
** Thread records
** =======================================================
*/

/* The record of the last lua_State seen on this OS thread.  The epoch moves
** whenever any record dies, so a stale entry is never used. */
static atomic_uint epoch;
static _Thread_local PM_TLS_MODEL struct {
  lua_State *L;
  pm_Thread *t;
  unsigned epoch;
} last;

/* The records of the few lua_States this OS thread switched between
** lately, by their address: a coroutine switch then finds its record
** without the state's map.  Any slot holds any state, searched in turn,
** so that two coroutines that take turns never evict each other (by
** address, 3 coroutines in 8 slots would share one a third of the
** time); a new one takes the slots round.  The same epoch guards them. */
#define PM_RECENT 8
static _Thread_local PM_TLS_MODEL struct {
  struct {
    lua_State *L;
    pm_Thread *t;
  } e[PM_RECENT];
  unsigned epoch, next;
} recent;

/* L's record if it is among the recent ones, else NULL. */
static pm_Thread *recent_find (lua_State *L, unsigned ep) {
  int i;
  if (recent.epoch != ep)
    return NULL;
  for (i = 0; i < PM_RECENT; i++)
    if (recent.e[i].L == L)
      return recent.e[i].t;
  return NULL;
}

static void recent_keep (lua_State *L, pm_Thread *t, unsigned ep) {
  unsigned i = recent.next++ % PM_RECENT;
  if (recent.epoch != ep) {
    memset(&recent, 0, sizeof(recent));
    recent.epoch = ep;
    i = recent.next++;
  }
  recent.e[i].L = L;
  recent.e[i].t = t;
}

static void invalidate (void) {
  atomic_fetch_add_explicit(&epoch, 1, memory_order_relaxed);
}

/* S->current, and each record's flag that says it is (cached). */
static void set_current (pm_State *S, pm_Thread *t) {
  if (S->current != NULL)
    S->current->current = 0;
  if (t != NULL)
    t->current = 1;
  S->current = t;
}

static pm_Thread *thread_new (pm_State *S, lua_State *L) {
  pm_Thread *t = pm_alloc(&S->e, sizeof(*t));
  if (t == NULL)
    return NULL;
  memset(t, 0, sizeof(*t));
  t->S = S;
  t->L = L;
  if (!pm_map_put(&S->e.known, pm_thread_key(L), (uintptr_t)t | PM_THREAD,
                  S->e.falloc, S->e.fud)) {
    pm_free(&S->e, t, sizeof(*t));
    return NULL;
  }
  return t;
}

static void set_chain (pm_Thread *t, lua_Hook h, int mask, int count) {
  t->chain = h;
  t->chain_mask = h != NULL ? mask : 0;
  t->chain_count = h != NULL ? count : 0;
}

static void thread_free (pm_Thread *t) {
  pm_State *S = t->S;
  set_chain(t, NULL, 0, 0);
  if (t->f)
    pm_free(&S->e, t->f, (size_t)t->cap * sizeof(pm_Frame));
  if (S->current == t)
    set_current(S, NULL);
  pm_free(&S->e, t, sizeof(*t));
}

/* }====================================================== */

/*
** {======================================================
** Hooks set, and count requests
** =======================================================
*/

static int sampling (const pm_State *S) {
  return S->samplers[PM_SAMPLER_PROFILER] != NULL ||
         S->samplers[PM_SAMPLER_MONITOR] != NULL;
}

/* The hook a thread gets for one count event when it has no monitor's
** hook: the answer to a sample request, given to every sampler running
** (each takes a sample if it asked for one). */
static void count_hook (lua_State *L, lua_Debug *ar) {
  pm_State *S = pm_state_get(L);
  int i;
  if (S == NULL) {
    lua_sethook(L, NULL, 0, 0);
    return;
  }
  if (ar->event != LUA_HOOKCOUNT) {
    if (S->exact > 0 && S->hook != NULL) { /* a monitor installed meanwhile */
      S->hook(L, ar);
      return;
    }
    if (ar->event != LUA_HOOKRET) /* else a return that a request asked for */
      return;
  }
  if (!sampling(S))
    pm_hook_unrequest(S, L);
  for (i = 0; i < PM_SAMPLERS; i++)
    if (S->samplers[i] != NULL)
      S->answer(S->samplers[i], L);
}

/* Sets h for mask and count on L, keeping a count request that waits for
** its answer. */
static void sethook (pm_State *S, lua_State *L, lua_Hook h, int mask,
                     int count) {
  if (sampling(S) && (lua_gethookmask(L) & LUA_MASKCOUNT))
    lua_sethook(L, h != NULL ? h : count_hook, mask | LUA_MASKCOUNT, 1);
  else
    lua_sethook(L, h, mask, count);
}

/* It is made again at every tick until answered, count mask or not: the
** interpreter may have just put the request's mark down (luaG_traceexec,
** with hooks off when it looked), and only a new request sets it again.
** A return event answers too where `ret` asks (and no monitor's hook has
** them already). */
int pm_hook_request (pm_State *S, lua_State *L, int ret) {
  lua_Hook h = lua_gethook(L);
  int mask = LUA_MASKCOUNT;
  if (h == NULL || h == count_hook)
    mask |= ret ? LUA_MASKRET : 0;
  if (h == NULL)
    h = count_hook;
  else if (h == count_hook || h == S->hook || h == S->chain_hook)
    mask |= lua_gethookmask(L);
  else
    return 0; /* a foreign hook (debug.sethook) is left alone: no sample */
  pm_trap_sethook(L, h, mask, 1, S->trap_direct);
  return 1;
}

/* A program's count hook chained on L (pm_hook_chain) gets its count
** back: it starts again from the sample. */
void pm_hook_unrequest (pm_State *S, lua_State *L) {
  int mask = lua_gethookmask(L), chained, count = 0;
  if (mask & LUA_MASKCOUNT) {
    if (pm_hook_chained(S, L, &chained, &count) == NULL ||
        !(chained & LUA_MASKCOUNT)) {
      mask &= ~LUA_MASKCOUNT;
      count = 0;
    }
    if (lua_gethook(L) == count_hook) /* the returns were the request's */
      mask &= ~LUA_MASKRET;
    pm_trap_sethook(L, mask ? lua_gethook(L) : NULL, mask, count,
                    S->trap_direct);
  }
}

/* }====================================================== */

/*
** {======================================================
** Shadow stacks
** =======================================================
*/

/* Room for `need` frames; returns 0 when memory ran out. */
static int frames_grow (pm_Thread *t, int need) {
  pm_Frame *f = pm_grow(&t->S->e, t->f, t->n, need, &t->cap, sizeof(*f), 32);
  if (f == NULL)
    return 0;
  t->f = f;
  return 1;
}

/* A frame for ci on t's shadow stack, its context still to set; NULL when
** memory ran out: this frame goes unmeasured. */
static PM_INLINE pm_Frame *frame_push (pm_Thread *t, const void *ci,
                                       const pm_Set *set) {
  pm_Frame *fr;
  if (t->n == t->cap && !frames_grow(t, t->n + 1))
    return NULL;
  fr = &t->f[t->n++];
  fr->ci = ci;
  fr->set = set;
  fr->iter = t->S->e.iter;
  return fr;
}

static PM_INLINE void push (pm_Thread *t, const void *ci, const pm_Set *set,
                            const pm_Set *parent) {
  pm_Frame *fr = frame_push(t, ci, set);
  if (fr != NULL)
    fr->left = set != parent ? pm_sw_enter(&t->S->e, set) : NULL;
}

/* The call of a library's function ar from a plugin's frame (context.h):
** on the plugin's behalf, unless the plugin's function wraps it.  On the
** slow path, where every call into a library's set goes. */
static PM_NOINLINE void push_library (pm_Thread *t, lua_State *L, lua_Debug *ar,
                                      const pm_Set *set) {
  pm_State *S = t->S;
  pm_Frame *fr = frame_push(t, ar->i_ci, set);
  lua_Debug w;
  int own;
  if (fr == NULL)
    return;
  if (S->frame_direct)
    w.i_ci = (struct CallInfo *)pm_frame_caller(ar->i_ci);
  own = (S->frame_direct || lua_getstack(L, 1, &w)) && pm_wraps(S, L, ar, &w);
  fr->left = own ? pm_sw_enter_own(&S->e, set) : pm_sw_enter(&S->e, set);
}

/* The return of a frame into another set: out of line, as the common
** return stays in its caller's set. */
static PM_NOINLINE void leave (pm_Thread *t, const pm_Frame *fr) {
  pm_sw_leave(&t->S->e, fr->left, fr->iter);
}

/* Pops the top frame of the running thread. */
static PM_INLINE void pop (pm_Thread *t) {
  pm_Frame *fr = &t->f[--t->n];
  if (fr->left != NULL)
    leave(t, fr);
}

static void unwind (pm_Thread *t, int keep) {
  while (t->n > keep)
    pop(t);
}

/* t's frames go (a thread that perfmon lost sight of, or that is
** collected): if it runs, the groups of the context it was resumed from
** run on, and what it runs is code of no group (the empty set's): its
** resumer's self time. */
static void drop_frames (pm_Thread *t) {
  pm_Engine *E = &t->S->e;
  pm_Ctx *c;
  if (t == t->S->current && t->active) {
    c = pm_sw_valid(E, t->base, t->base_iter);
    pm_sw_change(E, E->empty != NULL ? pm_sw_child(E, c, E->empty) : c);
  }
  t->n = 0;
}

/* Index of the frame with CallInfo ci, or -1. */
static int frame_index (const pm_Thread *t, const void *ci) {
  int i = t->n - 1;
  while (i >= 0 && t->f[i].ci != ci)
    i--;
  return i;
}

/* Pops frames that are no longer on the real stack of t->L. */
static void unwind_dead (pm_Thread *t) {
  while (t->n > 0) {
    lua_Debug ar;
    int level;
    for (level = 0; lua_getstack(t->L, level, &ar); level++)
      if (ar.i_ci == t->f[t->n - 1].ci)
        return;
    pop(t);
  }
}

/* }====================================================== */

/*
** {======================================================
** Thread switches
** =======================================================
*/

/* A thread waiting in resume for the running one is LUA_OK with frames;
** one that yielded is LUA_YIELD; one that ended has no frames or died. */
static int is_resumer (lua_State *L, int status) {
  lua_Debug ar;
  return status == LUA_OK && lua_getstack(L, 0, &ar);
}

/* A thread that yielded keeps its frames; one that ended has none.  Its
** nested loops and blocking calls, rare, wait for it to run again. */
static void thread_stop (pm_Thread *t, int status) {
  if (PM_UNLIKELY(t->loops > 0))
    t->loop_events = pm_sw_nested_pause(&t->S->e, t->loops);
  if (PM_UNLIKELY(t->blocking > 0))
    pm_sw_blocking_pause(&t->S->e, t->blocking);
  if (status != LUA_YIELD)
    t->n = 0;
  t->active = 0;
}

/* t runs again, resumed from context base: its frames' contexts are made
** over it, bottom up.  Returns the context of its top frame. */
static pm_Ctx *thread_run (pm_Thread *t, pm_Ctx *base) {
  pm_Engine *E = &t->S->e;
  const pm_Set *parent = NULL; /* the bottom frame enters, even the empty set */
  uint64_t iter = E->iter;
  int i;
  if (PM_UNLIKELY(t->loops > 0) &&
      !pm_sw_nested_resume(E, t->loops, t->loop_events))
    t->loops = 0; /* too deep to come back: dropped */
  t->base = base = pm_sw_valid(E, base, iter); /* a loop resumed cancels */
  t->base_iter = E->iter;
  for (i = 0; i < t->n; i++) {
    pm_Frame *fr = &t->f[i];
    fr->iter = E->iter;
    fr->left = fr->set != parent ? base : NULL;
    if (fr->left != NULL)
      base = pm_sw_child(E, base, fr->set);
    parent = fr->set;
  }
  t->active = 1;
  return base;
}

int pm_hook_blocking_begin (pm_State *S) {
  int rc = pm_sw_blocking_begin(&S->e);
  if (rc == PERFMON_OK && S->exact > 0 && S->current != NULL)
    S->current->blocking++;
  return rc;
}

int pm_hook_blocking_end (pm_State *S) {
  int rc = pm_sw_blocking_end(&S->e);
  if (rc == PERFMON_OK && S->current != NULL && S->current->blocking > 0)
    S->current->blocking--;
  return rc;
}

int pm_hook_nested_enter (pm_State *S) {
  int rc = pm_sw_nested_enter(&S->e);
  if (rc == PERFMON_OK && S->exact > 0 && S->current != NULL)
    S->current->loops++;
  return rc;
}

int pm_hook_nested_leave (pm_State *S) {
  int rc = pm_sw_nested_leave(&S->e);
  if (rc == PERFMON_OK && S->current != NULL && S->current->loops > 0)
    S->current->loops--;
  return rc;
}

/* From prev to t, in one change of context: a thread that resumes
** another keeps its context, to run there again; one that stops goes back
** to the one it was resumed from, where its resumer runs on; t runs over
** the context left, or runs again in its own.  A blocking call it was
** suspended in goes on in its context. */
static PM_INLINE void thread_switch (pm_Thread *t) {
  pm_Engine *E = &t->S->e;
  pm_Thread *prev = t->S->current;
  pm_Ctx *ctx = E->ctx;
  int run = !t->active;
  if (prev != NULL && prev->active) {
    int status = lua_status(prev->L);
    if (is_resumer(prev->L, status)) {
      prev->ctx = ctx;
      prev->ctx_iter = E->iter;
    } else {
      thread_stop(prev, status);
      ctx = pm_sw_valid(E, prev->base, prev->base_iter);
    }
  }
  ctx = run ? thread_run(t, ctx) : pm_sw_valid(E, t->ctx, t->ctx_iter);
  set_current(t->S, t);
  pm_sw_change(E, ctx);
  if (PM_UNLIKELY(run && t->blocking > 0))
    pm_sw_blocking_resume(E, t->blocking);
}

/* }====================================================== */

static const pm_Set *set_of (uintptr_t v, const pm_Set *parent) {
  return PM_TAG(v) == PM_FN_LUA ? PM_PTR(v) : parent;
}

/* The cached value of the function of frame ar: read from the frame
** (fast) or through lua_getinfo, and resolved on a miss. */
static PM_INLINE uintptr_t function_of (pm_State *S, lua_State *L,
                                        lua_Debug *ar, int fast) {
  uintptr_t v;
  if (fast && (v = pm_map_get(&S->e.fns, pm_frame_function(ar->i_ci))) != 0)
    return v;
  lua_getinfo(L, "f", ar);
  v = pm_resolve(S, L);
  lua_pop(L, 1);
  return v;
}

/* Finds the CallInfo of every level from `from` down, into the shadow
** stack's own slots, outermost at 0 (t has no frame yet): down the
** callers on the fast path (frame.h), O(depth); by lua_getstack
** otherwise, O(level) each.  Returns how many slots it filled: with no
** memory for every level, the outermost ones. */
static int seed_find (pm_Thread *t, lua_State *L, int from, int fast) {
  lua_Debug ar;
  const void *ci, *top;
  int depth = 0, i;
  if (!lua_getstack(L, from, &ar))
    return 0;
  top = ar.i_ci;
  if (fast) {
    for (ci = top; pm_frame_caller(ci) != NULL; ci = pm_frame_caller(ci))
      depth++; /* the bottom CallInfo (base_ci) is no level */
  } else {
    while (lua_getstack(L, from + depth, &ar))
      depth++;
  }
  frames_grow(t, depth); /* or keep what fits */
  for (ci = top, i = depth - 1; i >= 0; i--) {
    if (!fast && lua_getstack(L, from + depth - 1 - i, &ar))
      ci = ar.i_ci;
    if (i < t->cap)
      t->f[i].ci = ci;
    if (fast)
      ci = pm_frame_caller(ci);
  }
  return depth < t->cap ? depth : t->cap;
}

/* A thread first seen with frames already on its stack (a coroutine that
** was suspended before monitoring began, the frames that opened the
** monitor) gets them pushed, outermost first, so that their time counts.
** Levels below `from` belong to the event being handled.  They are all
** found before the first push starts a stopwatch: the walk is perfmon's
** time, not the frames' groups'. */
static void seed (pm_Thread *t, lua_State *L, int from, int fast) {
  lua_Debug ar;
  const pm_Set *parent = t->S->e.empty;
  int n = seed_find(t, L, from, fast), i;
  for (i = 0; i < n; i++) {
    const pm_Set *set;
    ar.i_ci = (struct CallInfo *)t->f[i].ci;
    set = set_of(function_of(t->S, L, &ar, fast), parent);
    t->f[i].set = set; /* contexts come when it runs: thread_run */
    t->f[i].left = NULL;
    t->n = i + 1;
    parent = set;
  }
}

/* The record of L, or NULL when perfmon has none yet. */
static pm_Thread *record_of (pm_State *S, lua_State *L) {
  uintptr_t v = pm_map_get(&S->e.known, pm_thread_key(L));
  return v != 0 && PM_TAG(v) == PM_THREAD ? PM_PTR(v) : NULL;
}

/* L's record from the state's map (made if it has none), kept among the
** recent ones; NULL when no monitor is open: then L, a coroutine that
** inherited the hook but runs after monitoring ended, loses it. */
static PM_NOINLINE pm_Thread *thread_lookup (lua_State *L, unsigned *ep) {
  pm_State *S = pm_state_get(L); /* a record alive means monitors are open */
  pm_Thread *t;
  if (S == NULL || S->exact == 0) {
    if (S != NULL)
      sethook(S, L, NULL, 0, 0);
    else
      lua_sethook(L, NULL, 0, 0);
    return NULL;
  }
  if ((t = record_of(S, L)) == NULL && (t = thread_new(S, L)) == NULL)
    return NULL;
  *ep = atomic_load_explicit(&epoch, memory_order_relaxed);
  recent_keep(L, t, *ep);
  return t;
}

static PM_NOINLINE void thread_seed (pm_Thread *t, lua_State *L, int from,
                                     int fast) {
  t->seeded = 1;
  seed(t, L, from, fast);
}

/* The slow way to the record of L, made current (a coroutine switch). */
static pm_Thread *thread_find (lua_State *L, int from, int fast) {
  unsigned ep = atomic_load_explicit(&epoch, memory_order_relaxed);
  pm_Thread *t = recent_find(L, ep);
  if (PM_UNLIKELY(t == NULL) && (t = thread_lookup(L, &ep)) == NULL)
    return NULL;
  if (PM_UNLIKELY(!t->seeded))
    thread_seed(t, L, from, fast);
  last.L = L;
  last.t = t;
  last.epoch = ep;
  if (!t->current)
    thread_switch(t);
  return t;
}

/*
** {======================================================
** The hook
** =======================================================
*/

/* Whether h is the monitor's hook, with or without a program's chained. */
static int is_monitors (pm_State *S, lua_Hook h) {
  return h == S->hook || h == S->chain_hook;
}

/* A hook that is neither perfmon's nor the profiler's: a debugger's, a
** coverage tool's (debug.sethook). */
static int is_foreign (pm_State *S, lua_State *L) {
  lua_Hook h = lua_gethook(L);
  return h != NULL && !is_monitors(S, h) && h != count_hook;
}

int pm_hook_foreign (pm_State *S, lua_State *co) {
  return is_foreign(S, co);
}

int pm_hook_owns (pm_State *S, lua_State *co) {
  return lua_gethook(co) != NULL && !is_foreign(S, co);
}

/* Sets perfmon's hook on co; where a program's hook is chained, the
** variant that calls it, with what it asked for besides calls and
** returns, so that no other thread's events look for one. */
static void install (pm_State *S, lua_State *co, const pm_Thread *t) {
  if (t != NULL && t->chain != NULL)
    sethook(S, co, S->chain_hook,
            PM_MASK | (t->chain_mask & (LUA_MASKLINE | LUA_MASKCOUNT)),
            t->chain_count);
  else
    sethook(S, co, S->hook, PM_MASK, 0);
}

/* Keeps the hook that a program set on co (before a monitor opened, or
** on a coroutine perfmon meets later), to call it from perfmon's. */
static int adopt (pm_State *S, lua_State *co) {
  return pm_hook_chain(S, co, lua_gethook(co), lua_gethookmask(co),
                       lua_gethookcount(co));
}

int pm_hook_chain (pm_State *S, lua_State *co, lua_Hook h, int mask,
                   int count) {
  pm_Thread *t = record_of(S, co);
  if (t == NULL && h == NULL) {
    install(S, co, NULL);
    return 1;
  }
  if (t == NULL && (t = thread_new(S, co)) == NULL)
    return 0;
  set_chain(t, mask != 0 ? h : NULL, mask, count);
  install(S, co, t);
  return 1;
}

lua_Hook pm_hook_chained (pm_State *S, lua_State *co, int *mask, int *count) {
  pm_Thread *t = record_of(S, co);
  *mask = t != NULL ? t->chain_mask : 0;
  *count = t != NULL ? t->chain_count : 0;
  return t != NULL ? t->chain : NULL;
}

/* Hands the event to the program's hook chained on L, if it asked for
** it: after perfmon's own work, so a tool's time in it runs where the
** event happened. */
static PM_NOINLINE void chain_event (lua_State *L, lua_Debug *ar) {
  static const int bit[] = {LUA_MASKCALL, LUA_MASKRET, LUA_MASKLINE,
                            LUA_MASKCOUNT, LUA_MASKCALL};
  pm_State *S = pm_state_get(L);
  pm_Thread *t = S != NULL ? record_of(S, L) : NULL;
  if (t != NULL && t->chain != NULL && ar->event >= 0 && ar->event <= 4 &&
      (t->chain_mask & bit[ar->event]))
    t->chain(L, ar);
}

/* The coroutine that a resume or a wrapped function is about to run gets
** the monitor's hook (pm_hook_give). */
static void hook_coroutine (pm_State *S, lua_State *L, lua_Debug *ar,
                            unsigned kind) {
  lua_State *co = NULL;
  lua_getinfo(L, "f", ar);
  if ((kind == PM_FN_RESUME ? lua_getlocal(L, ar, 1)
                            : lua_getupvalue(L, -1, 1)) != NULL) {
    co = lua_tothread(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (co != NULL)
    pm_hook_give(S, co);
}

/* A thread goes unmeasured: from now on every resume looks whether its
** coroutine has the hook (resolve.c tags resume and wrap again). */
static void hook_lost (pm_State *S) {
  S->hook_lost = 1;
  if (S->threads_hooked) {
    S->threads_hooked = 0;
    pm_functions_forget(&S->e);
  }
}

void pm_hook_give (pm_State *S, lua_State *co) {
  if (is_monitors(S, lua_gethook(co)))
    return;
  if (!is_foreign(S, co))
    install(S, co, record_of(S, co));
  else if (!adopt(S, co))
    hook_lost(S); /* no memory to keep a debugger's: co goes unmeasured */
}

static void give_thread (lua_State *co, void *S) {
  pm_hook_give(S, co);
}

static PM_INLINE const void *caller_of (lua_State *L, lua_Debug *ar, int fast) {
  lua_Debug up;
  if (fast)
    return pm_frame_caller(ar->i_ci);
  return lua_getstack(L, 1, &up) ? up.i_ci : NULL;
}

static PM_INLINE void on_call (pm_Thread *t, lua_State *L, lua_Debug *ar,
                               int fast) {
  pm_State *S = t->S;
  const void *caller = caller_of(L, ar, fast);
  int tail = ar->event == LUA_HOOKTAILCALL && t->n > 0 &&
             t->f[t->n - 1].ci == ar->i_ci; /* replaces the top frame */
  const pm_Set *parent, *set;
  uintptr_t v;
  unsigned kind;
  if (!tail && t->n > 0 && t->f[t->n - 1].ci != caller)
    unwind(t, frame_index(t, caller) + 1); /* frames an error unwound */
  v = function_of(S, L, ar, fast);
  kind = PM_TAG(v);
  if (tail) {
    if (kind != PM_FN_LUA || PM_PTR(v) == t->f[t->n - 1].set)
      return; /* same groups: the frame keeps its stopwatches */
    pop(t);
  }
  parent = t->n > 0 ? t->f[t->n - 1].set : S->e.empty;
  set = set_of(v, parent);
  /* a thread's bottom frame always enters its set: a coroutine's runs
  ** over its resumer's context, whose set is not the frame's (NULL) */
  if (PM_UNLIKELY(set->lib) && set != parent && t->n > 0 && !parent->lib)
    push_library(t, L, ar, set);
  else
    push(t, ar->i_ci, set, t->n > 0 ? parent : NULL);
  if (kind == PM_FN_RESUME || kind == PM_FN_WRAP)
    hook_coroutine(S, L, ar, kind);
}

/* Whether the cached record (last.t) is L's and current: every change of
** thread on this OS thread goes through thread_find, and every change of
** S->current otherwise moves the epoch.  A state handed to another OS
** thread may have switched coroutines there, out of this cache's sight:
** hence the last test (last.t is valid once the first two passed), on
** the record's own line, which the event reads next anyway. */
static PM_INLINE int cached (lua_State *L) {
  return last.L == L &&
         last.epoch == atomic_load_explicit(&epoch, memory_order_relaxed) &&
         last.t->current;
}

/* Every event, handled in full: on the public path all of them, on the
** fast path those on_event leaves.  Out of line, so that the common cases
** in on_event need few registers. */
static PM_NOINLINE void on_event_slow (lua_State *L, lua_Debug *ar, int fast) {
  pm_Thread *t = last.t;
  int i;
  if (PM_UNLIKELY(ar->event == LUA_HOOKCOUNT)) {
    count_hook(L, ar); /* a sample the profiler asked for */
    return;
  }
  if (PM_UNLIKELY(ar->event == LUA_HOOKLINE))
    return; /* a program's hook chained here asked for it */
  if (!cached(L)) {
    if ((t = thread_find(L, ar->event != LUA_HOOKRET, fast)) == NULL)
      return;
  }
  if (ar->event != LUA_HOOKRET) {
    on_call(t, L, ar, fast);
  } else if (t->n > 0 && t->f[t->n - 1].ci == ar->i_ci) {
    pop(t);
  } else { /* frames an error unwound, or one that ran before the hook */
    i = frame_index(t, ar->i_ci);
    unwind(t, i < 0 ? 0 : i);
  }
}

/* A call into another set: out of line, and last in on_event, so that
** the fast path keeps no register across a call. */
static PM_NOINLINE void enter (pm_Thread *t, const void *ci, const pm_Set *set,
                               const pm_Set *parent) {
  push(t, ci, set, parent);
}

/* The call of a function of value v (0: not seen yet) from the top frame:
** a push, and the stopwatches' start where the set changes. */
static PM_INLINE void call_push (lua_State *L, lua_Debug *ar, pm_Thread *t,
                                 uintptr_t v) {
  pm_Frame *top = &t->f[t->n - 1];
  /* top->set is never NULL, so a miss (0) never reads as "same set" */
  if (v == PM_FN_C || v == (uintptr_t)top->set) {
    top[1].ci = ar->i_ci;
    top[1].set = top->set;
    top[1].left = NULL;
    t->n++;
  } else if (v != 0 && PM_TAG(v) == PM_FN_LUA &&
             !((const pm_Set *)PM_PTR(v))->lib)
    enter(t, ar->i_ci, PM_PTR(v), top->set);
  else /* not seen yet, or a library's (push_library) */
    on_event_slow(L, ar, 1);
}

/* call_fast's call of a function whose home slot in the map holds
** another: found again at the next call, it takes that slot
** (pm_map_promote). */
static PM_NOINLINE void call_probed (lua_State *L, lua_Debug *ar,
                                     pm_Thread *t) {
  call_push(L, ar, t,
            pm_map_promote(&t->S->e.fns, pm_frame_function(ar->i_ci)));
}

/* A call from the top frame, on the fast path: a function that stays in
** the caller's groups (a C function, or a Lua function of the same set)
** is a push; one into another set also starts its stopwatches (enter).
** A frame's iter is only read when it owns stopwatches.  Out of line, so
** that a return, the other half of the events, needs no register saved. */
static PM_NOINLINE void call_fast (lua_State *L, lua_Debug *ar, pm_Thread *t) {
  pm_Frame *top = &t->f[t->n - 1];
  uintptr_t v;
  if (ar->event != LUA_HOOKCALL || t->n == t->cap ||
      top->ci != pm_frame_caller(ar->i_ci))
    on_event_slow(L, ar, 1);
  /* where every coroutine has the hook, every C function inherits: no
  ** need to look it up */
  else if (pm_frame_is_c(ar->i_ci) && t->S->threads_hooked)
    call_push(L, ar, t, PM_FN_C);
  else if (pm_map_home(&t->S->e.fns, pm_frame_function(ar->i_ci), &v))
    call_push(L, ar, t, v);
  else
    call_probed(L, ar, t);
}

/* A call or return in t, the cached thread, which has frames, on the
** fast path: the return of the top frame pops it, a call goes to
** call_fast.  Everything else (a sample, a tail call, frames an error
** unwound, a function not seen before, resume and wrap where a coroutine
** may lack the hook, a full shadow stack) goes to on_event_slow. */
static PM_INLINE void on_cached (lua_State *L, lua_Debug *ar, pm_Thread *t) {
  if (ar->event != LUA_HOOKRET)
    call_fast(L, ar, t);
  else if (t->f[t->n - 1].ci == ar->i_ci)
    pop(t);
  else
    on_event_slow(L, ar, 1);
}

/* A call or return in another thread than the last event's, on the fast
** path: a coroutine switch.  Where L's record is among the recent ones
** and has frames, the switch is made here and the event goes on as in the
** cached thread; a thread not seen lately or seen for the first time goes
** to on_event_slow, which finds its record in the state's map. */
static PM_NOINLINE void on_switch (lua_State *L, lua_Debug *ar) {
  unsigned ep = atomic_load_explicit(&epoch, memory_order_relaxed);
  pm_Thread *t = recent_find(L, ep);
  if (t == NULL || !t->seeded || t->n == 0 || ar->event == LUA_HOOKCOUNT ||
      ar->event == LUA_HOOKLINE) {
    on_event_slow(L, ar, 1);
    return;
  }
  last.L = L;
  last.t = t;
  last.epoch = ep;
  if (!t->current)
    thread_switch(t);
  on_cached(L, ar, t);
}

/* Every event: in the cached thread, on_cached; in another, on_switch;
** on the public path, and where the cached thread has no frames,
** on_event_slow. */
static PM_INLINE void on_event (lua_State *L, lua_Debug *ar, int fast) {
  pm_Thread *t = last.t;
  if (fast && cached(L) && t->n > 0)
    on_cached(L, ar, t);
  else if (fast && last.L != L)
    on_switch(L, ar);
  else
    on_event_slow(L, ar, fast);
}

/* The two hooks: the same code, specialised for each way to the frame;
** and each again for the threads with a program's hook chained. */
static void hook_fast (lua_State *L, lua_Debug *ar) {
  on_event(L, ar, 1);
}

static void hook_public (lua_State *L, lua_Debug *ar) {
  on_event(L, ar, 0);
}

static void hook_fast_chained (lua_State *L, lua_Debug *ar) {
  on_event(L, ar, 1);
  chain_event(L, ar);
}

static void hook_public_chained (lua_State *L, lua_Debug *ar) {
  on_event(L, ar, 0);
  chain_event(L, ar);
}

void pm_hook_choose (lua_State *L, pm_State *S) {
  const char *force = getenv("PERFMON_PATH");
  int forced = force != NULL && strcmp(force, "public") == 0;
  S->frame_direct = !forced && pm_frame_verify(L);
  S->hook = S->frame_direct ? hook_fast : hook_public;
  S->chain_hook =
      S->hook == hook_fast ? hook_fast_chained : hook_public_chained;
  S->trap_direct = !forced && pm_trap_verify(L);
  S->running_direct = S->trap_direct && pm_trap_chain_verify(L, S->co_f);
  S->proto_direct = !forced && pm_proto_verify(L);
  S->proto_heap = S->proto_direct && pm_proto_heap_verify(L);
}

const char *pm_hook_path (pm_State *S) {
  return S->frame_direct ? "fast" : "public";
}

/* }====================================================== */

/*
** {======================================================
** Installing and removing
** =======================================================
*/

/* A debugger's or coverage tool's hook stays, called from perfmon's. */
int pm_hook_adopt (lua_State *L, pm_State *S) {
  if ((is_foreign(S, L) && !adopt(S, L)) ||
      (is_foreign(S, S->main) && !adopt(S, S->main)))
    return 0;
  S->hook_lost = 0;
  return 1;
}

int pm_hook_install (lua_State *L, pm_State *S) {
  install(S, S->main, record_of(S, S->main));
  install(S, L, record_of(S, L));
  /* Every coroutine alive gets the hook now, and those made later
  ** inherit it (lua_newthread): resume and wrap need not look whether
  ** theirs has it, as they must where the heap cannot be read.  They
  ** resolve to plain C functions from now on. */
  if (S->proto_heap) {
    pm_proto_threads(L, give_thread, S);
    S->threads_hooked = !S->hook_lost;
    return 1;
  }
  return 0;
}

/* Removes perfmon's hook from L, never a debugger's that took its place;
** a program's hook chained there is set back as the program set it. */
static void unhook (pm_State *S, lua_State *L, pm_Thread *t) {
  if (is_foreign(S, L))
    return;
  if (t != NULL && t->chain != NULL)
    lua_sethook(L, t->chain, t->chain_mask, t->chain_count);
  else
    sethook(S, L, NULL, 0, 0);
}

static int drop_thread (uintptr_t v, void *arg) {
  pm_Thread *t = PM_PTR(v);
  (void)arg;
  if (PM_TAG(v) != PM_THREAD)
    return 0;
  if (!t->active) {
    pm_sw_blocking_orphan(&t->S->e, t->blocking);
    pm_sw_nested_orphan(&t->S->e, t->loops);
  }
  unhook(t->S, t->L, t);
  thread_free(t);
  return 1;
}

void pm_hook_uninstall (lua_State *L, pm_State *S) {
  S->threads_hooked = 0;
  pm_map_filter(&S->e.known, drop_thread, NULL);
  unhook(S, S->main, NULL);
  if (L != NULL)
    unhook(S, L, NULL);
  set_current(S, NULL);
  pm_functions_forget(&S->e); /* their sets go */
  pm_sets_free(&S->e);
  invalidate();
}

/* perfmon's hook is gone from a thread it monitors: a foreign hook took
** its place (debug.sethook through a reference kept from before the
** monitor opened, or from C), or it was removed from the main thread.  Lua
** has one hook per thread, so perfmon sees no more of that thread: its
** frames are dropped, so that their groups stop being charged, and the
** loss is reported (snapshot.hook_lost) until monitoring restarts. */
static void lose (pm_State *S, pm_Thread *t) {
  hook_lost(S);
  if (t != NULL)
    drop_frames(t);
}

/* must: the thread always has perfmon's hook while monitors are open (the
** main thread); others may have none yet (a coroutine not resumed since). */
static void check_hook (pm_State *S, lua_State *L, int must) {
  if (!is_monitors(S, lua_gethook(L)) && (must || is_foreign(S, L)))
    lose(S, record_of(S, L));
}

static int check_thread (uintptr_t v, void *arg) {
  pm_Thread *t = PM_PTR(v);
  (void)arg;
  if (PM_TAG(v) == PM_THREAD && is_foreign(t->S, t->L))
    lose(t->S, t);
  return 0;
}

int pm_hook_lost (lua_State *L, pm_State *S) {
  if (S->exact > 0) {
    check_hook(S, S->main, 1);
    check_hook(S, L, 0);
    pm_map_filter(&S->e.known, check_thread, NULL);
  }
  return S->hook_lost;
}

/* Whether L's shadow stack is known to be settled: it is the cached
** thread's (on the fast path), and its top frame is the one running.
** Every event boundary asks, and that is where it usually is. */
static int settled (pm_State *S, lua_State *L) {
  lua_Debug ar;
  return S->hook == hook_fast && cached(L) && last.t->n > 0 &&
         lua_getstack(L, 0, &ar) && last.t->f[last.t->n - 1].ci == ar.i_ci;
}

void pm_hook_restart (pm_State *S) {
  pm_Thread *t = S->current;
  pm_Engine *E = &S->e;
  pm_Ctx *c;
  const pm_Set *s;
  if (S->exact == 0 || t == NULL || t->n == 0 || t->blocking > 0 ||
      t->loops > 0)
    return;
  s = t->f[t->n - 1].set;
  /* no tick: the code was entered before */
  if (s->n > 0 && E->ctx == &E->root && (c = pm_ctx_child(E, E->ctx, s)))
    pm_sw_change(E, c);
}

void pm_hook_settle (lua_State *L, pm_State *S) {
  pm_Thread *t;
  if (S->exact == 0)
    return;
  check_hook(S, S->main, 1);
  check_hook(S, L, 0);
  if (!settled(S, L) && (t = thread_find(L, 0, S->hook == hook_fast)) != NULL)
    unwind_dead(t);
}

void pm_hook_boundary (lua_State *L, pm_State *S) {
  pm_Thread *t;
  if (S == NULL || S->exact == 0)
    return;
  pm_hook_settle(L, S);
  if ((t = S->current) != NULL && t->n > 0 && S->e.empty != NULL)
    t->f[t->n - 1].set = S->e.empty;
}

static void spare_ctx (pm_Engine *E, pm_Ctx *c, uint64_t iter) {
  pm_Ctx *v = pm_sw_valid(E, c, iter);
  if (v == c)
    pm_ctx_spare(c);
}

static int spare_thread (uintptr_t v, void *arg) {
  pm_Engine *E = arg;
  if (PM_TAG(v) == PM_THREAD) {
    const pm_Thread *t = PM_PTR(v);
    int i;
    /* only a thread that runs, or waits in a resume, goes back to its
    ** contexts: one that stopped has them made again when it runs
    ** (thread_run), and its resumer's groups must not outlive it there */
    for (i = 0; i < t->n; i++) {
      pm_set_spare(t->f[i].set);
      if (t->active)
        spare_ctx(E, t->f[i].left, t->f[i].iter);
    }
    if (t->active)
      spare_ctx(E, t->base, t->base_iter);
    if (t->active && !t->current) /* waits in a resume */
      spare_ctx(E, t->ctx, t->ctx_iter);
  }
  return 0;
}

/* A dead group on a shadow stack (a frame of a function detached while it
** ran, a coroutine suspended in it) stays until that frame is gone: its
** set, and the contexts that frames may go back to, still name it. */
void pm_hook_spare (void *ud) {
  pm_State *S = ud;
  pm_map_filter(&S->e.known, spare_thread, &S->e);
}

void pm_hook_sweep (pm_State *S, int due) {
  pm_Engine *E = &S->e;
  if (due && (E->ndead < 256 || 2 * E->ndead < E->ngroups))
    return;
  pm_sw_own(E, 1);
  pm_groups_sweep(E, pm_hook_spare, S);
  pm_sw_own(E, 0);
}

void pm_thread_forget (pm_Thread *t) {
  drop_frames(t);
  thread_free(t);
  invalidate();
}

/* }====================================================== */

/*
** {======================================================
** Memory
** =======================================================
*/

static int add_depth (uintptr_t v, void *arg) {
  int *maxdepth = arg;
  if (PM_TAG(v) == PM_THREAD) {
    const pm_Thread *t = PM_PTR(v);
    if (t->cap > *maxdepth)
      *maxdepth = t->cap;
  }
  return 0;
}

int pm_hook_capacity (pm_State *S) {
  int maxdepth = 0;
  pm_map_filter(&S->e.known, add_depth, &maxdepth);
  return maxdepth;
}

/* }====================================================== */
