/*
** profiler.c -- the sampling profiler (see profiler.h, docs/profiler.md).
*/
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* SIGEV_THREAD_ID, syscall(SYS_gettid) */
#endif

#include "profiler.h"

#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include <lauxlib.h>
#include <lualib.h>

#include "frame.h"
#include "hook.h"

#if defined(__linux__) && defined(SIGEV_THREAD_ID)
#define PROF_TIMERS 1
#else
#define PROF_TIMERS 0
#endif

#define PROFILER_MT "perfmon.profiler"
#define PROF_SIGNAL SIGPROF
#define PROF_SLOTS 64 /* profilers running at once, in the process */
#define PROF_DEPTH 512 /* frames kept per sample, from the top */
#define PROF_NAME 48 /* bytes kept of a function's name */
#define PROF_RING0 1024 /* samples room made at first */

/* user values of the profiler userdata */
enum { UV_THREADS = 1, UV_ANCHOR, UV_N };

enum { P_NEW, P_RUNNING, P_STOPPED, P_FORCED };
static const char *const state_names[] = {"new", "running", "stopped",
                                          "forced"};

/* A running profiler anchors its userdata here, so that it is never
** collected while its timer runs; the address is the registry key. */
static const char running_key = 'P';

/*
** {======================================================
** Records
** =======================================================
*/

typedef struct Func { /* a function as samples show it */
  uint32_t hash;
  int line; /* where it is defined; -1 for a C function */
  pm_Group *group; /* its performance group, or NULL */
  char what; /* 'L' Lua, 'C' C, 'm' a main chunk */
  char src[LUA_IDSIZE]; /* short_src */
  char name[PROF_NAME]; /* how it was called; "" when Lua cannot tell */
} Func;

typedef struct Node { /* a stack: a node of the trie of all stacks seen */
  uint32_t parent; /* index + 1 of the caller's node; 0 for a root */
  uint32_t func;
  int line; /* the site: the line running, -1 for a C function */
  uint32_t hash;
  uint64_t self, total; /* periods with it on the top / on the stack */
} Node;

typedef struct Sample {
  double time_us; /* realtime, the clock of snapshots and alerts */
  uint32_t weight; /* sampling periods it stands for */
  uint32_t node, thread; /* thread: 1 the main thread, 2.. coroutines */
} Sample;

typedef struct Level { /* one frame of the stack being sampled */
  const void *fn, *ci; /* its function; its CallInfo, for lua_getinfo */
  int defined, line;
  char what;
  pm_Group *group;
  char src[LUA_IDSIZE];
  char name[PROF_NAME];
} Level;

/* Names of calls: lua_getinfo "n" reads the caller's code from its start
** to the call (findsetreg), which costs tens of µs under a big main chunk.
** A name depends only on the caller, where it is and the callee: cached
** by those three, as a copy (a stale entry can only mislabel, never
** point into freed memory). */
#define PROF_NAMES 1024
typedef struct Name {
  const void *callee, *caller;
  int line;
  char name[PROF_NAME];
} Name;

typedef struct Index { /* open addressing over an array: index + 1 */
  uint32_t *slot;
  uint32_t mask; /* capacity - 1, or 0 when empty */
} Index;

struct pm_Profiler {
  pm_State *S;
  lua_Alloc falloc; /* the state's own allocator, kept for __gc */
  void *fud;
  int state;
  int busy; /* its records are being read: samples wait */
  int fast; /* walk frames through CallInfo (frame.h verified it) */
  lua_State *volatile running; /* the coroutine running, as tracked */
  /* the timer (read by the signal handler) */
  int slot;
  int tag; /* slot + PROF_SLOTS * generation: the signal's value */
  uint64_t period_ns;
  uint64_t cpu_mark; /* thread CPU time whose periods were counted */
  atomic_uint pending; /* periods since the last sample */
#if PROF_TIMERS
  timer_t timer;
#endif
  int has_timer;
  /* records */
  Func *funcs;
  uint32_t nfuncs, capfuncs;
  Index fidx;
  Node *nodes;
  uint32_t nnodes, capnodes;
  Index nidx;
  Sample *ring;
  uint32_t cap, limit; /* limit: max_samples, 0 unlimited */
  uint32_t first, count;
  Level *levels; /* PROF_DEPTH of them */
  Name *names; /* PROF_NAMES of them */
  uint64_t total, gc; /* periods sampled; those the collector took */
  uint64_t cycles, cycles_seen; /* collections finished; at last sample */
  uint64_t dropped; /* samples pushed out of the ring, or lost */
  uint32_t nthreads;
  double since_us, micros; /* wall time running since reset */
  double start_realtime; /* of the first start since reset */
  double interval_us;
};

static void *raw_alloc (pm_Profiler *P, void *p, size_t o, size_t n) {
  return P->falloc(P->fud, p, o, n);
}

/* Grows an array of `size`-byte items to at least `need` of them. */
static int grow (pm_Profiler *P, void **a, uint32_t *cap, uint32_t need,
                 size_t size) {
  uint32_t n = *cap ? *cap : 64;
  void *b;
  while (n < need)
    n *= 2;
  if (n == *cap)
    return 1;
  b = raw_alloc(P, *a, (size_t)*cap * size, (size_t)n * size);
  if (b == NULL)
    return 0;
  *a = b;
  *cap = n;
  return 1;
}

static void free_records (pm_Profiler *P) {
  raw_alloc(P, P->funcs, (size_t)P->capfuncs * sizeof(Func), 0);
  raw_alloc(P, P->nodes, (size_t)P->capnodes * sizeof(Node), 0);
  raw_alloc(P, P->ring, (size_t)P->cap * sizeof(Sample), 0);
  raw_alloc(P, P->fidx.slot,
            P->fidx.slot ? ((size_t)P->fidx.mask + 1) * sizeof(uint32_t) : 0,
            0);
  raw_alloc(P, P->nidx.slot,
            P->nidx.slot ? ((size_t)P->nidx.mask + 1) * sizeof(uint32_t) : 0,
            0);
  P->funcs = NULL;
  P->nodes = NULL;
  P->ring = NULL;
  P->fidx.slot = P->nidx.slot = NULL;
  P->fidx.mask = P->nidx.mask = 0;
  P->nfuncs = P->capfuncs = P->nnodes = P->capnodes = 0;
  P->cap = P->first = P->count = 0;
}

static uint32_t fnv (uint32_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  while (n--)
    h = (h ^ *s++) * 16777619u;
  return h;
}

static uint32_t mix (uint32_t h, uint64_t v) {
  return fnv(h, &v, sizeof(v));
}

/* Rebuilds an index for n entries at most a quarter full (it grows again
** at half full); hash_of gives the hash of entry i. */
static int index_grow (pm_Profiler *P, Index *x, uint32_t n,
                       uint32_t (*hash_of)(pm_Profiler *, uint32_t)) {
  uint32_t cap = 64, i;
  uint32_t *slot;
  while (cap < 4 * n)
    cap *= 2;
  slot = raw_alloc(P, NULL, 0, (size_t)cap * sizeof(uint32_t));
  if (slot == NULL)
    return 0;
  memset(slot, 0, (size_t)cap * sizeof(uint32_t));
  for (i = 0; i < n - 1; i++) { /* the entries there are, not the new one */
    uint32_t j = hash_of(P, i) & (cap - 1);
    while (slot[j] != 0)
      j = (j + 1) & (cap - 1);
    slot[j] = i + 1;
  }
  if (x->slot)
    raw_alloc(P, x->slot, ((size_t)x->mask + 1) * sizeof(uint32_t), 0);
  x->slot = slot;
  x->mask = cap - 1;
  return 1;
}

static uint32_t func_hash (pm_Profiler *P, uint32_t i) {
  return P->funcs[i].hash;
}

static uint32_t node_hash (pm_Profiler *P, uint32_t i) {
  return P->nodes[i].hash;
}

/* The index of the function of level lv, made on first sight; -1 when
** memory ran out. */
static int64_t func_intern (pm_Profiler *P, const Level *lv) {
  const char *name = lv->name;
  size_t nlen = strlen(name);
  uint32_t h = fnv(2166136261u, lv->src, strlen(lv->src)), j;
  Func *f;
  if (nlen >= PROF_NAME)
    nlen = PROF_NAME - 1;
  h = fnv(h, name, nlen);
  h = mix(h, (uint64_t)(uintptr_t)lv->group);
  h = mix(h, (uint64_t)(int64_t)lv->defined * 8 + (uint64_t)lv->what);
  if (P->fidx.slot != NULL) {
    for (j = h & P->fidx.mask; P->fidx.slot[j] != 0;
         j = (j + 1) & P->fidx.mask) {
      f = &P->funcs[P->fidx.slot[j] - 1];
      if (f->hash == h && f->line == lv->defined && f->group == lv->group &&
          f->what == lv->what && strncmp(f->name, name, nlen) == 0 &&
          f->name[nlen] == '\0' && strcmp(f->src, lv->src) == 0)
        return P->fidx.slot[j] - 1;
    }
  }
  if (!grow(P, (void **)&P->funcs, &P->capfuncs, P->nfuncs + 1, sizeof(Func)))
    return -1;
  if (2 * (P->nfuncs + 1) > P->fidx.mask + 1 &&
      !index_grow(P, &P->fidx, P->nfuncs + 1, func_hash))
    return -1;
  f = &P->funcs[P->nfuncs];
  f->hash = h;
  f->line = lv->defined;
  f->group = lv->group;
  f->what = lv->what;
  memcpy(f->src, lv->src, sizeof(f->src));
  memcpy(f->name, name, nlen);
  f->name[nlen] = '\0';
  for (j = h & P->fidx.mask; P->fidx.slot[j] != 0; j = (j + 1) & P->fidx.mask)
    ;
  P->fidx.slot[j] = ++P->nfuncs;
  return P->nfuncs - 1;
}

/* The index of the node (parent, func, line), made on first sight. */
static int64_t node_intern (pm_Profiler *P, uint32_t parent, uint32_t func,
                            int line) {
  uint32_t h = mix(mix(mix(2166136261u, parent), func), (uint64_t)line), j;
  Node *n;
  if (P->nidx.slot != NULL) {
    for (j = h & P->nidx.mask; P->nidx.slot[j] != 0;
         j = (j + 1) & P->nidx.mask) {
      n = &P->nodes[P->nidx.slot[j] - 1];
      if (n->hash == h && n->parent == parent && n->func == func &&
          n->line == line)
        return P->nidx.slot[j] - 1;
    }
  }
  if (!grow(P, (void **)&P->nodes, &P->capnodes, P->nnodes + 1, sizeof(Node)))
    return -1;
  if (2 * (P->nnodes + 1) > P->nidx.mask + 1 &&
      !index_grow(P, &P->nidx, P->nnodes + 1, node_hash))
    return -1;
  n = &P->nodes[P->nnodes];
  n->parent = parent;
  n->func = func;
  n->line = line;
  n->hash = h;
  n->self = n->total = 0;
  for (j = h & P->nidx.mask; P->nidx.slot[j] != 0; j = (j + 1) & P->nidx.mask)
    ;
  P->nidx.slot[j] = ++P->nnodes;
  return P->nnodes - 1;
}

/* }====================================================== */

/*
** {======================================================
** Walking a stack
** =======================================================
*/

/* The group samples show for a function: the first of its set that is not
** a chunk group (those are finer than plugins), or its only one. */
static pm_Group *group_of (const pm_Set *set) {
  int i;
  if (set == NULL || set->n == 0)
    return NULL;
  for (i = 0; i < set->n; i++)
    if (set->g[i]->chunk_env == NULL && strcmp(set->g[i]->kind, "chunk") != 0)
      return set->g[i];
  return set->g[0];
}

static void copy_name (char *to, const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n >= PROF_NAME)
    n = PROF_NAME - 1;
  memcpy(to, name ? name : "", n);
  to[n] = '\0';
}

/* The name of level i's call, from the cache or from lua_getinfo "n". */
static void name_of (pm_Profiler *P, lua_State *L, int i, int n) {
  Level *lv = &P->levels[i];
  const void *caller = i + 1 < n ? P->levels[i + 1].fn : NULL;
  int line = i + 1 < n ? P->levels[i + 1].line : -1;
  uint32_t h = mix(mix(mix(2166136261u, (uintptr_t)lv->fn), (uintptr_t)caller),
                   (uint64_t)line);
  Name *c = &P->names[h % PROF_NAMES];
  lua_Debug ar;
  if (caller != NULL && c->callee == lv->fn && c->caller == caller &&
      c->line == line) {
    memcpy(lv->name, c->name, PROF_NAME);
    return;
  }
  ar.i_ci = (struct CallInfo *)lv->ci;
  lua_getinfo(L, "n", &ar);
  copy_name(lv->name, ar.name);
  if (caller != NULL) {
    c->callee = lv->fn;
    c->caller = caller;
    c->line = line;
    memcpy(c->name, lv->name, PROF_NAME);
  }
}

/* Fills P->levels with the frames of L from level `skip` up, the top
** first; returns how many. */
static int walk (pm_Profiler *P, lua_State *L, int skip) {
  pm_State *S = P->S;
  lua_Debug ar;
  int i, n = 0, level = skip;
  if (!lua_getstack(L, level, &ar))
    return 0;
  for (;;) {
    Level *lv = &P->levels[n];
    lua_getinfo(L, "Slf", &ar);
    lv->fn = lua_topointer(L, -1);
    lv->ci = ar.i_ci;
    lv->group = group_of(pm_hook_set(L, S));
    lua_pop(L, 1);
    lv->defined = ar.what[0] == 'C' ? -1 : ar.linedefined;
    lv->line = ar.currentline;
    lv->what = ar.what[0] == 'm' ? 'm' : (ar.what[0] == 'C' ? 'C' : 'L');
    memcpy(lv->src, ar.short_src, sizeof(lv->src));
    if (++n == PROF_DEPTH)
      break; /* the frames below are cut off */
    if (P->fast) { /* the caller's CallInfo; the bottom one is base_ci */
      const void *up = pm_frame_caller(ar.i_ci);
      if (up == NULL || pm_frame_caller(up) == NULL)
        break;
      ar.i_ci = (struct CallInfo *)up;
    } else if (!lua_getstack(L, ++level, &ar)) {
      break;
    }
  }
  for (i = 0; i < n; i++)
    name_of(P, L, i, n);
  return n;
}

/* Interns the n levels walked as a path of the trie, the bottom first; a C
** function shows its caller's group, as hook.c charges it.  Returns the
** index + 1 of the top's node, or 0 when memory ran out. */
static uint32_t intern_path (pm_Profiler *P, int n) {
  uint32_t parent = 0;
  pm_Group *g = NULL;
  int i;
  for (i = n - 1; i >= 0; i--) {
    Level *lv = &P->levels[i];
    int64_t f, k;
    if (lv->what == 'C')
      lv->group = g;
    if ((f = func_intern(P, lv)) < 0 ||
        (k = node_intern(P, parent, (uint32_t)f, lv->line)) < 0)
      return 0;
    parent = (uint32_t)k + 1;
    g = lv->group;
  }
  return parent;
}

/* }====================================================== */

/*
** {======================================================
** Samples
** =======================================================
*/

/* The number of L in the profiler's weak table of threads, given on first
** sight.  Its userdata is the anchored one at the registry's running_key. */
static uint32_t thread_number (pm_Profiler *P, lua_State *L) {
  uint32_t id = 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &running_key) == LUA_TUSERDATA) {
    if (lua_getiuservalue(L, -1, UV_THREADS) == LUA_TTABLE) {
      lua_pushthread(L);
      if (lua_rawget(L, -2) == LUA_TNUMBER) {
        id = (uint32_t)lua_tointeger(L, -1);
      } else {
        id = ++P->nthreads; /* lua_rawset does not run the collector */
        lua_pushthread(L);
        lua_pushinteger(L, id);
        lua_rawset(L, -4);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return id;
}

static int ring_push (pm_Profiler *P, const Sample *s) {
  if (P->count == P->cap && (P->limit == 0 || P->cap < P->limit)) {
    uint32_t need = P->cap ? P->cap * 2 : PROF_RING0;
    Sample *r;
    if (P->limit != 0 && need > P->limit)
      need = P->limit; /* the ring is never larger than max_samples */
    r = raw_alloc(P, P->ring, (size_t)P->cap * sizeof(Sample),
                  (size_t)need * sizeof(Sample));
    if (r != NULL) { /* else: the oldest go, or this one when there is none */
      P->ring = r;
      P->cap = need;
    } else if (P->cap == 0) {
      return 0;
    }
  }
  if (P->count < P->cap) {
    P->ring[(P->first + P->count++) % P->cap] = *s;
  } else { /* full: the oldest goes */
    P->ring[P->first] = *s;
    P->first = (P->first + 1) % P->cap;
    P->dropped++;
  }
  return 1;
}

static void take (pm_Profiler *P, lua_State *L, unsigned weight) {
  Sample s;
  int n = walk(P, L, 0);
  uint32_t k, top;
  if (n == 0 || (top = intern_path(P, n)) == 0) {
    P->dropped++;
    return;
  }
  s.time_us = pm_realtime_us();
  s.weight = weight;
  s.node = top - 1;
  s.thread = thread_number(P, L);
  P->nodes[top - 1].self += weight;
  for (k = top; k != 0; k = P->nodes[k - 1].parent)
    P->nodes[k - 1].total += weight;
  P->total += weight;
  if (P->cycles != P->cycles_seen) { /* a collection held the sampler off */
    P->cycles_seen = P->cycles;
    P->gc += weight - 1;
  }
  if (!ring_push(P, &s))
    P->dropped++;
}

/* Lua 5.4 runs finalizers with hooks off and the collector in C: no sample
** is ever taken inside either.  A sentinel, garbage from birth, tells the
** profiler when a collection finished; the periods the sample after it
** was held off for count as the collector's (gc_samples). */
static int sentinel_gc (lua_State *L);

static void sentinel_new (lua_State *L) {
  lua_newuserdatauv(L, 1, 0);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, sentinel_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
}

static int sentinel_gc (lua_State *L) {
  pm_Profiler *P;
  if (pm_state_get(L) == NULL)
    return 0; /* the state closes */
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &running_key) == LUA_TUSERDATA) {
    P = lua_touserdata(L, -1);
    if (P->state == P_RUNNING) {
      P->cycles++;
      sentinel_new(L); /* for the next collection */
    }
  }
  lua_pop(L, 1);
  return 0;
}

/* }====================================================== */

/*
** {======================================================
** Count requests: the one hook
** =======================================================
*/

static void request (pm_State *S, lua_State *L) {
  lua_Hook h = lua_gethook(L);
  if (h == NULL)
    lua_sethook(L, pm_profiler_hook, LUA_MASKCOUNT, 1);
  else if (h == pm_profiler_hook || h == S->hook)
    lua_sethook(L, h, lua_gethookmask(L) | LUA_MASKCOUNT, 1);
  /* a foreign hook (debug.sethook) is left alone: no sample */
}

static void unrequest (lua_State *L) {
  int mask = lua_gethookmask(L);
  if (mask & LUA_MASKCOUNT) {
    mask &= ~LUA_MASKCOUNT;
    lua_sethook(L, mask ? lua_gethook(L) : NULL, mask, 0);
  }
}

/* The coroutine running: the monitor's hook knows it exactly; without a
** monitor, the profiler's own tracking of resume and wrap. */
static lua_State *target (pm_Profiler *P) {
  pm_State *S = P->S;
  pm_Thread *t = S->monitors > 0 ? S->current : NULL;
  return t != NULL ? t->L : P->running;
}

static void unrequest_all (pm_Profiler *P, lua_State *L) {
  lua_State *t = target(P);
  unrequest(L);
  if (t != L)
    unrequest(t);
  if (P->running != L && P->running != t)
    unrequest(P->running);
  if (P->S->main != L && P->S->main != t)
    unrequest(P->S->main);
}

void pm_profiler_hook (lua_State *L, lua_Debug *ar) {
  pm_State *S = pm_state_get(L);
  pm_Profiler *P;
  unsigned w;
  if (S == NULL) {
    lua_sethook(L, NULL, 0, 0);
    return;
  }
  if (ar->event != LUA_HOOKCOUNT) { /* a monitor installed meanwhile */
    if (S->monitors > 0 && S->hook != NULL)
      S->hook(L, ar);
    return;
  }
  P = S->profiler;
  if (P == NULL) {
    unrequest(L);
    return;
  }
  unrequest_all(P, L);
  if (P->busy || (w = atomic_exchange(&P->pending, 0)) == 0)
    return; /* a request another thread answered, or records being read */
  take(P, L, w);
}

void pm_profiler_sethook (pm_State *S, lua_State *L, lua_Hook h, int mask) {
  if (S->profiler != NULL && (lua_gethookmask(L) & LUA_MASKCOUNT)) {
    lua_sethook(L, h != NULL ? h : pm_profiler_hook, mask | LUA_MASKCOUNT, 1);
  } else {
    lua_sethook(L, h, mask, 0);
  }
}

/* }====================================================== */

/*
** {======================================================
** The timer and its signal
** =======================================================
*/

static _Atomic(pm_Profiler *) slots[PROF_SLOTS];
static atomic_uint generation;
static atomic_flag handler_lock = ATOMIC_FLAG_INIT;
static int handler_users; /* running profilers; under handler_lock */
static struct sigaction old_action; /* what the first start replaced */

static uint64_t thread_cpu_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A signal that is not one of ours goes where it went before. */
static void chain (int sig, siginfo_t *si, void *uc) {
  if (old_action.sa_flags & SA_SIGINFO) {
    if (old_action.sa_sigaction != NULL)
      old_action.sa_sigaction(sig, si, uc);
  } else if (old_action.sa_handler != SIG_DFL &&
             old_action.sa_handler != SIG_IGN) {
    old_action.sa_handler(sig);
  }
}

/* Async-signal-safe: atomics, clock_gettime, lua_sethook.  The periods
** counted are the thread's CPU time: a thread blocked or idle asks for no
** sample, and one held up in C code gets a heavier sample later. */
static void on_signal (int sig, siginfo_t *si, void *uc) {
  int saved = errno;
  int tag = si->si_value.sival_int;
  pm_Profiler *P = NULL;
  if (si->si_code == SI_TIMER && tag >= 0)
    P = atomic_load(&slots[tag % PROF_SLOTS]);
  if (P != NULL && P->tag == tag) {
    uint64_t now = thread_cpu_ns();
    uint64_t k = now > P->cpu_mark ? (now - P->cpu_mark) / P->period_ns : 0;
    if (k > 0) {
      lua_State *t = target(P);
      P->cpu_mark += k * P->period_ns;
      atomic_fetch_add(&P->pending, (unsigned)k);
      request(P->S, t);
      if (t != P->S->main)
        request(P->S, P->S->main);
    }
  } else {
    chain(sig, si, uc);
  }
  errno = saved;
}

static void handler_acquire (void) {
  while (atomic_flag_test_and_set(&handler_lock))
    ;
  if (handler_users++ == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(PROF_SIGNAL, &sa, &old_action);
  }
  atomic_flag_clear(&handler_lock);
}

static void handler_release (void) {
  while (atomic_flag_test_and_set(&handler_lock))
    ;
  if (--handler_users == 0)
    sigaction(PROF_SIGNAL, &old_action, NULL);
  atomic_flag_clear(&handler_lock);
}

/* Returns an error message, or NULL. */
static const char *timer_on (pm_Profiler *P) {
#if PROF_TIMERS
  struct sigevent ev;
  struct itimerspec it;
  int i;
  for (i = 0; i < PROF_SLOTS; i++) {
    pm_Profiler *none = NULL;
    if (atomic_compare_exchange_strong(&slots[i], &none, P))
      break;
  }
  if (i == PROF_SLOTS)
    return "too many profilers running in this process";
  P->slot = i;
  P->tag =
      (int)(((atomic_fetch_add(&generation, 1) + 1) % 1000000u) * PROF_SLOTS +
            (unsigned)i);
  memset(&ev, 0, sizeof(ev));
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = PROF_SIGNAL;
  ev.sigev_value.sival_int = P->tag;
#ifdef sigev_notify_thread_id
  ev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
#else
  ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
#endif
  handler_acquire();
  if (timer_create(CLOCK_MONOTONIC, &ev, &P->timer) != 0) {
    handler_release();
    atomic_store(&slots[i], NULL);
    return "timer_create failed";
  }
  P->has_timer = 1;
  P->cpu_mark = thread_cpu_ns();
  it.it_interval.tv_sec = (time_t)(P->period_ns / 1000000000u);
  it.it_interval.tv_nsec = (long)(P->period_ns % 1000000000u);
  it.it_value = it.it_interval;
  timer_settime(P->timer, 0, &it, NULL);
  return NULL;
#else
  (void)P;
  return "the profiler needs POSIX timers with SIGEV_THREAD_ID (Linux)";
#endif
}

/* With the signal blocked, the timer goes and a tick still pending is
** taken, so that the handler can be restored with none in flight. */
static void timer_off (pm_Profiler *P) {
#if PROF_TIMERS
  sigset_t set, old;
  siginfo_t si;
  struct timespec zero = {0, 0};
  if (!P->has_timer)
    return;
  sigemptyset(&set);
  sigaddset(&set, PROF_SIGNAL);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  atomic_store(&slots[P->slot], NULL);
  timer_delete(P->timer);
  P->has_timer = 0;
  while (sigtimedwait(&set, &si, &zero) == PROF_SIGNAL)
    if (si.si_code != SI_TIMER)
      chain(PROF_SIGNAL, &si, NULL); /* not ours: hand it on */
  handler_release();
  pthread_sigmask(SIG_SETMASK, &old, NULL);
#else
  (void)P;
#endif
}

/* }====================================================== */

/*
** {======================================================
** Tracking the running coroutine without a monitor
** =======================================================
*/

/* While a profiler runs, coroutine.resume and coroutine.wrap are replaced
** by these, which tell it which coroutine runs.  A coroutine resumed by C
** code or through a resume saved before start() is not tracked: its
** samples land in its resumer when it yields (see docs/profiler.md). */

static pm_Profiler *profiler_of (lua_State *L, int up) {
  pm_State *S = lua_touserdata(L, lua_upvalueindex(up));
  return (S != NULL && !S->closed) ? S->profiler : NULL;
}

/* coroutine.resume; upvalues: the original, the pm_State */
static int co_resume (lua_State *L) {
  pm_Profiler *P = profiler_of(L, 2);
  lua_State *co = lua_tothread(L, 1), *prev = NULL;
  int track = P != NULL && co != NULL;
  if (track) {
    prev = P->running;
    P->running = co;
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET); /* reports, never raises */
  if (track && profiler_of(L, 2) == P)
    P->running = prev;
  return lua_gettop(L);
}

/* lcorolib's auxresume: n arguments on the top go to co. */
static int resume_n (lua_State *L, lua_State *co, int n) {
  int status, nres;
  if (!lua_checkstack(co, n)) {
    lua_pushliteral(L, "too many arguments to resume");
    return -1;
  }
  lua_xmove(L, co, n);
  status = lua_resume(co, L, n, &nres);
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) {
      lua_pop(co, nres);
      lua_pushliteral(L, "too many results to resume");
      return -1;
    }
    lua_xmove(co, L, nres);
    return nres;
  }
  lua_xmove(co, L, 1); /* the error */
  return -1;
}

/* A function coroutine.wrap made; upvalues: the thread, the pm_State.
** As lcorolib's, plus the tracking, plus the monitor's hook for the
** coroutine, which hook.c gives the coroutines of the original wrap. */
static int co_wrapped (lua_State *L) {
  lua_State *co = lua_tothread(L, lua_upvalueindex(1));
  pm_State *S = lua_touserdata(L, lua_upvalueindex(2));
  pm_Profiler *P = profiler_of(L, 2);
  lua_State *prev = NULL;
  int r;
  if (!S->closed && S->monitors > 0 && lua_gethook(co) != S->hook)
    pm_profiler_sethook(S, co, S->hook, LUA_MASKCALL | LUA_MASKRET);
  if (P != NULL) {
    prev = P->running;
    P->running = co;
  }
  r = resume_n(L, co, lua_gettop(L));
  if (P != NULL && profiler_of(L, 2) == P)
    P->running = prev;
  if (r < 0) {
    int status = lua_status(co);
    if (status != LUA_OK && status != LUA_YIELD) { /* an error in co */
#if LUA_VERSION_RELEASE_NUM >= 50406
      status = lua_closethread(co, L);
#else
      status = lua_resetthread(co);
#endif
      lua_xmove(co, L, 1);
    }
    if (status != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
      luaL_where(L, 1); /* the caller's position, as lcorolib adds */
      lua_insert(L, -2);
      lua_concat(L, 2);
    }
    return lua_error(L);
  }
  return r;
}

/* coroutine.wrap; upvalue: the pm_State */
static int co_wrap (lua_State *L) {
  lua_State *co;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushcclosure(L, co_wrapped, 2);
  return 1;
}

/* Pushes the coroutine library table, or nil. */
static int push_colib (lua_State *L) {
  int t;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  t = lua_getfield(L, -1, LUA_COLIBNAME);
  lua_remove(L, -2);
  return t == LUA_TTABLE;
}

/* anchor: { resume = original, wrap = original, my_resume, my_wrap } */
static void patch (lua_State *L, pm_State *S, int anchor) {
  if (!push_colib(L)) {
    lua_pop(L, 1);
    return;
  }
  lua_getfield(L, -1, "resume"); /* ... colib resume */
  if (lua_tocfunction(L, -1) != NULL && lua_tocfunction(L, -1) != co_resume) {
    lua_pushvalue(L, -1);
    lua_setfield(L, anchor, "resume");
    lua_pushlightuserdata(L, S);
    lua_pushcclosure(L, co_resume, 2);
    lua_pushvalue(L, -1);
    lua_setfield(L, anchor, "my_resume");
    lua_setfield(L, -2, "resume");
  } else {
    lua_pop(L, 1);
  }
  lua_getfield(L, -1, "wrap");
  if (lua_tocfunction(L, -1) != NULL && lua_tocfunction(L, -1) != co_wrap) {
    lua_setfield(L, anchor, "wrap");
    lua_pushlightuserdata(L, S);
    lua_pushcclosure(L, co_wrap, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, anchor, "my_wrap");
    lua_setfield(L, -2, "wrap");
  } else {
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* Puts the originals back where ours still are. */
static void unpatch (lua_State *L, int anchor) {
  static const char *const names[] = {"resume", "wrap"};
  int i;
  if (!push_colib(L)) {
    lua_pop(L, 1);
    return;
  }
  for (i = 0; i < 2; i++) {
    lua_getfield(L, -1, names[i]);
    lua_pushfstring(L, "my_%s", names[i]);
    lua_rawget(L, anchor);
    if (!lua_isnil(L, -1) && lua_rawequal(L, -1, -2)) {
      lua_getfield(L, anchor, names[i]);
      lua_setfield(L, -4, names[i]);
    }
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
}

/* }====================================================== */

/*
** {======================================================
** Start and stop
** =======================================================
*/

static pm_Profiler *check_profiler (lua_State *L) {
  return luaL_checkudata(L, 1, PROFILER_MT);
}

static pm_State *live_state (lua_State *L) {
  pm_State *S = pm_state_get(L);
  if (S == NULL)
    luaL_error(L, "perfmon: the state is closing");
  return S;
}

/* Stops P; the userdata is at index idx.  Works while the state closes. */
static void stop (lua_State *L, pm_Profiler *P, int idx, int how) {
  pm_State *S = P->S;
  timer_off(P);
  if (!S->closed) {
    lua_getiuservalue(L, idx, UV_ANCHOR);
    unpatch(L, lua_gettop(L));
    lua_pop(L, 1);
    unrequest(S->main);
    if (P->running != NULL)
      unrequest(P->running);
    if (S->monitors > 0 && S->current != NULL)
      unrequest(S->current->L);
  }
  if (S->profiler == P)
    S->profiler = NULL;
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &running_key);
  P->micros += pm_wall_us() - P->since_us;
  P->running = NULL;
  P->state = how;
}

/* The running profiler's userdata from the registry, or NULL. */
static pm_Profiler *push_running (lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &running_key) == LUA_TUSERDATA)
    return lua_touserdata(L, -1);
  return NULL;
}

static int is_foreign (pm_State *S, lua_State *L) {
  lua_Hook h = lua_gethook(L);
  return h != NULL && h != S->hook && h != pm_profiler_hook;
}

/* core.profiler_start(p, rate_us, max_samples) */
static int l_start (lua_State *L) {
  pm_Profiler *P = check_profiler(L), *other;
  lua_Integer rate = luaL_checkinteger(L, 2);
  lua_Integer max = luaL_checkinteger(L, 3);
  pm_State *S = live_state(L);
  const char *err;
  luaL_argcheck(L, rate > 0 && rate <= 60000000, 2, "out of range");
  luaL_argcheck(L, max >= 0 && max <= 0x7fffffff, 3, "out of range");
  if (P->state == P_RUNNING)
    return luaL_error(L, "the profiler is already running");
  if (is_foreign(S, L) || is_foreign(S, S->main))
    return luaL_error(L, "a debug hook is already set (debug.sethook); the "
                         "profiler needs the count hook");
  if (P->levels == NULL &&
      (P->levels = raw_alloc(P, NULL, 0, PROF_DEPTH * sizeof(Level))) == NULL)
    return luaL_error(L, "not enough memory");
  if (P->names == NULL &&
      (P->names = raw_alloc(P, NULL, 0, PROF_NAMES * sizeof(Name))) == NULL)
    return luaL_error(L, "not enough memory");
  memset(P->names, 0, PROF_NAMES * sizeof(Name)); /* functions may be gone */
  if ((other = push_running(L)) != NULL) /* forcibly stopped */
    stop(L, other, lua_gettop(L), P_FORCED);
  lua_pop(L, 1);
  if ((uint32_t)max != P->limit) { /* a new maximum: the ring starts over */
    raw_alloc(P, P->ring, (size_t)P->cap * sizeof(Sample), 0);
    P->ring = NULL;
    P->cap = P->first = P->count = 0;
    P->limit = (uint32_t)max;
  }
  P->fast = strcmp(pm_hook_path(S), "fast") == 0;
  P->period_ns = (uint64_t)rate * 1000u;
  P->interval_us = (double)rate;
  atomic_store(&P->pending, 0);
  lua_settop(L, 1);
  lua_pushvalue(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &running_key);
  lua_getiuservalue(L, 1, UV_ANCHOR); /* 2: anchor */
  lua_pushthread(L);
  lua_setfield(L, 2, "started_in"); /* P->running must stay alive */
  patch(L, S, 2);
  P->running = L;
  S->profiler = P;
  P->state = P_RUNNING;
  P->cycles_seen = P->cycles;
  sentinel_new(L);
  P->since_us = pm_wall_us();
  if (P->start_realtime == 0)
    P->start_realtime = pm_realtime_us();
  if ((err = timer_on(P)) != NULL) {
    stop(L, P, 1, P_STOPPED);
    return luaL_error(L, "%s", err);
  }
  return 0;
}

/* core.profiler_stop(p) */
static int l_stop (lua_State *L) {
  pm_Profiler *P = check_profiler(L);
  if (P->state == P_RUNNING)
    stop(L, P, 1, P_STOPPED);
  return 0;
}

/* core.profiler_state(p) -> "new" | "running" | "stopped" | "forced" */
static int l_state (lua_State *L) {
  lua_pushstring(L, state_names[check_profiler(L)->state]);
  return 1;
}

static void reset (pm_Profiler *P) {
  uint32_t limit = P->limit;
  free_records(P);
  P->limit = limit;
  P->total = P->gc = P->dropped = 0;
  P->micros = 0;
  P->since_us = pm_wall_us();
  P->start_realtime = P->state == P_RUNNING ? pm_realtime_us() : 0;
}

/* core.profiler_reset(p) */
static int l_reset (lua_State *L) {
  reset(check_profiler(L));
  return 0;
}

/* core.profiler_frame(p, skip) -> the node of the stack `skip` levels up */
static int l_frame (lua_State *L) {
  pm_Profiler *P = check_profiler(L);
  int skip = (int)luaL_checkinteger(L, 2), n;
  uint32_t node;
  luaL_argcheck(L, skip >= 0, 2, "out of range");
  if (P->state != P_RUNNING)
    return luaL_error(L, "the profiler is not running");
  P->busy = 1; /* no sample may run in between (finalizers) */
  n = walk(P, L, skip);
  node = n > 0 ? intern_path(P, n) : 0;
  P->busy = 0;
  if (n == 0)
    return luaL_error(L, "no Lua stack at that level");
  if (node == 0)
    return luaL_error(L, "not enough memory");
  lua_pushinteger(L, node);
  return 1;
}

/* }====================================================== */

/*
** {======================================================
** Reading the records out
** =======================================================
*/

static void set_int (lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

static void set_num (lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

/* ... -> ... { file, line, name, what, group, group_id } per function */
static void push_funcs (lua_State *L, pm_Profiler *P) {
  uint32_t i;
  lua_createtable(L, (int)P->nfuncs, 0);
  for (i = 0; i < P->nfuncs; i++) {
    const Func *f = &P->funcs[i];
    lua_createtable(L, 0, 6);
    lua_pushstring(L, f->src);
    lua_setfield(L, -2, "file");
    set_int(L, "line", f->line);
    if (f->name[0] != '\0') {
      lua_pushstring(L, f->name);
      lua_setfield(L, -2, "name");
    }
    lua_pushstring(L, f->what == 'C' ? "C" : (f->what == 'm' ? "main" : "Lua"));
    lua_setfield(L, -2, "what");
    if (f->group != NULL) {
      lua_pushstring(L, f->group->name);
      lua_setfield(L, -2, "group");
      set_int(L, "group_id", f->group->id);
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static void push_column (lua_State *L, uint32_t n, const void *base,
                         size_t stride, size_t offset, int wide, int plus) {
  uint32_t i;
  lua_createtable(L, (int)n, 0);
  for (i = 0; i < n; i++) {
    const char *p = (const char *)base + (size_t)i * stride + offset;
    lua_Integer v;
    if (wide) {
      uint64_t u;
      memcpy(&u, p, sizeof(u));
      v = (lua_Integer)u;
    } else {
      int32_t s;
      memcpy(&s, p, sizeof(s));
      v = s;
    }
    lua_pushinteger(L, v + plus);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* core.profiler_dump(p) -> everything recorded since the last reset, as
** flat arrays (1-based indices); lua/perfmon/profiler.lua shapes it. */
static int l_dump (lua_State *L) {
  pm_Profiler *P = check_profiler(L);
  uint32_t i;
  P->busy = 1; /* samples wait: the tables below allocate */
  lua_createtable(L, 0, 12);
  push_funcs(L, P);
  lua_setfield(L, -2, "funcs");
  lua_createtable(L, 0, 5);
  push_column(L, P->nnodes, P->nodes, sizeof(Node), offsetof(Node, parent), 0,
              0);
  lua_setfield(L, -2, "parent"); /* index, 0 for a root */
  push_column(L, P->nnodes, P->nodes, sizeof(Node), offsetof(Node, func), 0, 1);
  lua_setfield(L, -2, "func");
  push_column(L, P->nnodes, P->nodes, sizeof(Node), offsetof(Node, line), 0, 0);
  lua_setfield(L, -2, "line");
  push_column(L, P->nnodes, P->nodes, sizeof(Node), offsetof(Node, self), 1, 0);
  lua_setfield(L, -2, "self");
  push_column(L, P->nnodes, P->nodes, sizeof(Node), offsetof(Node, total), 1,
              0);
  lua_setfield(L, -2, "total");
  lua_setfield(L, -2, "nodes");
  lua_createtable(L, 0, 4); /* samples, oldest first */
  lua_createtable(L, (int)P->count, 0);
  lua_createtable(L, (int)P->count, 0);
  lua_createtable(L, (int)P->count, 0);
  lua_createtable(L, (int)P->count, 0);
  for (i = 0; i < P->count; i++) {
    const Sample *s = &P->ring[(P->first + i) % P->cap];
    lua_pushnumber(L, s->time_us);
    lua_rawseti(L, -5, (lua_Integer)i + 1);
    lua_pushinteger(L, s->weight);
    lua_rawseti(L, -4, (lua_Integer)i + 1);
    lua_pushinteger(L, (lua_Integer)s->node + 1);
    lua_rawseti(L, -3, (lua_Integer)i + 1);
    lua_pushinteger(L, s->thread);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -5, "thread");
  lua_setfield(L, -4, "node");
  lua_setfield(L, -3, "weight");
  lua_setfield(L, -2, "time");
  lua_setfield(L, -2, "samples");
  set_int(L, "total", (lua_Integer)P->total);
  set_int(L, "gc", (lua_Integer)P->gc);
  set_int(L, "dropped", (lua_Integer)P->dropped);
  set_int(L, "limit", P->limit);
  set_num(L, "micros",
          P->micros + (P->state == P_RUNNING ? pm_wall_us() - P->since_us : 0));
  set_num(L, "start_time_us",
          P->start_realtime != 0 ? P->start_realtime : pm_realtime_us());
  set_num(L, "interval_us", P->interval_us);
  set_int(L, "pid", (lua_Integer)getpid());
  lua_pushstring(L, state_names[P->state]);
  lua_setfield(L, -2, "state");
  P->busy = 0;
  return 1;
}

/* }====================================================== */

/*
** {======================================================
** The userdata
** =======================================================
*/

/* core.profiler_new() */
static int l_new (lua_State *L) {
  pm_State *S = live_state(L);
  pm_Profiler *P = lua_newuserdatauv(L, sizeof(*P), UV_N - 1);
  memset(P, 0, sizeof(*P));
  P->S = S;
  P->falloc = S->falloc;
  P->fud = S->fud;
  P->state = P_NEW;
  P->slot = -1;
  P->interval_us = 1000;
  atomic_init(&P->pending, 0);
  luaL_setmetatable(L, PROFILER_MT);
  lua_createtable(L, 0, 1); /* threads: weak keys */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_pushinteger(L, ++P->nthreads); /* the main thread is 1 */
  lua_rawset(L, -3);
  lua_setiuservalue(L, -2, UV_THREADS);
  lua_newtable(L);
  lua_setiuservalue(L, -2, UV_ANCHOR);
  return 1;
}

/* A running profiler stops when it is collected, which only happens as the
** state closes (it is anchored while it runs): the timer and the signal
** handler go with it. */
static int profiler_gc (lua_State *L) {
  pm_Profiler *P = lua_touserdata(L, 1);
  if (P->state == P_RUNNING)
    stop(L, P, 1, P_STOPPED);
  free_records(P);
  if (P->levels != NULL)
    raw_alloc(P, P->levels, PROF_DEPTH * sizeof(Level), 0);
  if (P->names != NULL)
    raw_alloc(P, P->names, PROF_NAMES * sizeof(Name), 0);
  P->levels = NULL;
  P->names = NULL;
  return 0;
}

static const luaL_Reg profiler_funcs[] = {
    {"profiler_new", l_new},     {"profiler_start", l_start},
    {"profiler_stop", l_stop},   {"profiler_state", l_state},
    {"profiler_reset", l_reset}, {"profiler_frame", l_frame},
    {"profiler_dump", l_dump},   {NULL, NULL}};

void pm_profiler_register (lua_State *L) {
  if (luaL_newmetatable(L, PROFILER_MT)) {
    lua_pushcfunction(L, profiler_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_setfuncs(L, profiler_funcs, 0);
}

/* }====================================================== */
