/*
** profiler.c -- the sampling profiler: its records, the samples taken in
** the hook, start and stop, and tracking the coroutine that runs (see
** profiler.h, docs/profiler.md).
*/
#include "profiler.h"

#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "frame.h"
#include "hook.h"
#include "sampler.h"

#define PROF_RING0 1024 /* samples room made at first */
/* functions or stacks at most: indices + 1 and 4 times the count (the
** index's room) must fit in 32 bits */
#define PROF_MAXRECORDS (1u << 28)

/* A running profiler anchors its userdata here, so that it is never
** collected while its timer runs; the address is the registry key. */
static const char running_key = 'P';

/*
** {======================================================
** Records
** =======================================================
*/

struct pm_Level { /* a frame of the stack sampled; P->levels: PM_PROF_DEPTH */
  const void *fn, *ci; /* its function; its CallInfo, for lua_getinfo */
  int defined, line;
  char what;
  pm_Group *group;
  char src[LUA_IDSIZE];
  char name[PM_PROF_NAME];
};
typedef struct pm_Level Level;

/* Names of calls: lua_getinfo "n" reads the caller's code from its start
** to the call (findsetreg), which costs tens of µs under a big main chunk.
** A name depends only on the caller, where it is and the callee: cached
** by those three, as a copy (a stale entry can only mislabel, never
** point into freed memory). */
#define PROF_NAMES 1024
struct pm_Name { /* P->names: PROF_NAMES of them */
  const void *callee, *caller;
  int line;
  char name[PM_PROF_NAME];
};
typedef struct pm_Name Name;

static void *raw_alloc (pm_Profiler *P, void *p, size_t o, size_t n) {
  return P->falloc(P->fud, p, o, n);
}

/* Grows an array of `size`-byte items to at least `need` of them. */
static int grow (pm_Profiler *P, void **a, uint32_t *cap, uint32_t need,
                 size_t size) {
  uint32_t n = *cap ? *cap : 64;
  void *b;
  if (need > PROF_MAXRECORDS)
    return 0; /* as if memory ran out */
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
  uint32_t i;
  for (i = 0; i < P->nfuncs; i++)
    if (P->funcs[i].group != NULL)
      raw_alloc(P, P->funcs[i].group, strlen(P->funcs[i].group) + 1, 0);
  raw_alloc(P, P->funcs, (size_t)P->capfuncs * sizeof(pm_Func), 0);
  raw_alloc(P, P->nodes, (size_t)P->capnodes * sizeof(pm_Node), 0);
  raw_alloc(P, P->ring, (size_t)P->cap * sizeof(pm_Sample), 0);
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
static int index_grow (pm_Profiler *P, pm_Index *x, uint32_t n,
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
** memory ran out.  lv->name fits f->name: copy_name cut it (at a
** character boundary, which a second cut here could split). */
static int64_t func_intern (pm_Profiler *P, const Level *lv) {
  const char *name = lv->name;
  size_t nlen = strlen(name);
  uint32_t h = fnv(2166136261u, lv->src, strlen(lv->src)), j;
  pm_Func *f;
  h = fnv(h, name, nlen);
  int gid = lv->group != NULL ? lv->group->id : 0;
  h = mix(h, (uint64_t)gid);
  h = mix(h, (uint64_t)(int64_t)lv->defined * 8 + (uint64_t)lv->what);
  if (P->fidx.slot != NULL) {
    for (j = h & P->fidx.mask; P->fidx.slot[j] != 0;
         j = (j + 1) & P->fidx.mask) {
      f = &P->funcs[P->fidx.slot[j] - 1];
      if (f->hash == h && f->line == lv->defined && f->group_id == gid &&
          f->what == lv->what && strncmp(f->name, name, nlen) == 0 &&
          f->name[nlen] == '\0' && strcmp(f->src, lv->src) == 0)
        return P->fidx.slot[j] - 1;
    }
  }
  if (!grow(P, (void **)&P->funcs, &P->capfuncs, P->nfuncs + 1,
            sizeof(pm_Func)))
    return -1;
  if (2 * (P->nfuncs + 1) > P->fidx.mask + 1 &&
      !index_grow(P, &P->fidx, P->nfuncs + 1, func_hash))
    return -1;
  f = &P->funcs[P->nfuncs];
  f->hash = h;
  f->line = lv->defined;
  f->group_id = gid;
  f->group = NULL;
  if (lv->group != NULL) {
    size_t glen = strlen(lv->group->name) + 1;
    if ((f->group = raw_alloc(P, NULL, 0, glen)) == NULL)
      return -1;
    memcpy(f->group, lv->group->name, glen);
  }
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
  pm_Node *n;
  if (P->nidx.slot != NULL) {
    for (j = h & P->nidx.mask; P->nidx.slot[j] != 0;
         j = (j + 1) & P->nidx.mask) {
      n = &P->nodes[P->nidx.slot[j] - 1];
      if (n->hash == h && n->parent == parent && n->func == func &&
          n->line == line)
        return P->nidx.slot[j] - 1;
    }
  }
  if (!grow(P, (void **)&P->nodes, &P->capnodes, P->nnodes + 1,
            sizeof(pm_Node)))
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

/* Copies a call's name into a PM_PROF_NAME buffer.  A long one is cut at
** a UTF-8 character boundary, since half a character is not UTF-8 and the
** Gecko export is JSON: where the first byte cut is a continuation byte
** (10xxxxxx), its character began before the cut and is dropped whole
** (3 bytes back at most: no character is longer than 4). */
static void copy_name (char *to, const char *name) {
  size_t n = name ? strlen(name) : 0;
  int k;
  if (n >= PM_PROF_NAME) {
    n = PM_PROF_NAME - 1;
    for (k = 0; k < 3 && ((unsigned char)name[n] & 0xC0) == 0x80; k++)
      n--;
  }
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
    memcpy(lv->name, c->name, PM_PROF_NAME);
    return;
  }
  ar.i_ci = (struct CallInfo *)lv->ci;
  lua_getinfo(L, "n", &ar);
  copy_name(lv->name, ar.name);
  if (caller != NULL) {
    c->callee = lv->fn;
    c->caller = caller;
    c->line = line;
    memcpy(c->name, lv->name, PM_PROF_NAME);
  }
}

/* Fills P->levels with the frames of L from level `skip` up, the top
** first, PM_PROF_DEPTH at most (so that a sample costs no more in a deeper
** stack); returns how many, and sets *cut when frames below were left. */
static int walk (pm_Profiler *P, lua_State *L, int skip, int *cut) {
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
    n++;
    if (P->fast) { /* the caller's CallInfo; the bottom one is base_ci */
      const void *up = pm_frame_caller(ar.i_ci);
      if (up == NULL || pm_frame_caller(up) == NULL)
        break;
      ar.i_ci = (struct CallInfo *)up;
    } else if (!lua_getstack(L, ++level, &ar)) {
      break;
    }
    if (n == PM_PROF_DEPTH) {
      *cut = 1;
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
    if (lua_getiuservalue(L, -1, PM_PROF_THREADS) == LUA_TTABLE) {
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

static int ring_push (pm_Profiler *P, const pm_Sample *s) {
  if (P->count == P->cap && (P->limit == 0 || P->cap < P->limit) &&
      P->cap <= UINT32_MAX / 2) { /* doubling cap must not wrap to 0 */
    uint32_t need = P->cap ? P->cap * 2 : PROF_RING0;
    pm_Sample *r;
    if (P->limit != 0 && need > P->limit)
      need = P->limit; /* the ring is never larger than max_samples */
    r = raw_alloc(P, P->ring, (size_t)P->cap * sizeof(pm_Sample),
                  (size_t)need * sizeof(pm_Sample));
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

void pm_profiler_sample (pm_Profiler *P, lua_State *L, unsigned weight) {
  pm_Sample s;
  int cut = 0, n = walk(P, L, 0, &cut);
  uint32_t k, top;
  if (n == 0 || (top = intern_path(P, n)) == 0) {
    P->dropped++;
    return;
  }
  P->truncated += cut;
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

/* No sample can come in between: no Lua code runs here (nothing below
** steps the collector, so no finalizer either).  A dump under way (a
** finalizer called frame() while its tables were made) sees only the
** records there were when it began: new ones are appended. */
int64_t pm_profiler_frame (lua_State *L, pm_Profiler *P, int skip) {
  int cut = 0, n = walk(P, L, skip, &cut);
  uint32_t node = n > 0 ? intern_path(P, n) : 0;
  if (n == 0)
    return 0;
  return node == 0 ? -1 : (int64_t)node;
}

/* Lua 5.4 runs finalizers with hooks off and the collector in C: no sample
** is ever taken inside either.  A sentinel, garbage from birth, tells the
** profiler when a collection finished; the periods the sample after it
** was held off for count as the collector's (gc_samples). */
static int sentinel_gc (lua_State *L);

/* Pushes a new sentinel: garbage once it is popped. */
static void sentinel_push (lua_State *L) {
  lua_newuserdatauv(L, 1, 0);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, sentinel_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
}

static int sentinel_gc (lua_State *L) {
  pm_Profiler *P;
  if (pm_state_get(L) == NULL)
    return 0; /* the state closes */
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &running_key) == LUA_TUSERDATA) {
    P = lua_touserdata(L, -1);
    if (P->state == PM_PROF_RUNNING) {
      P->cycles++;
      sentinel_push(L); /* for the next collection */
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return 0;
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

/* The running profiler's userdata from the registry, or NULL. */
static pm_Profiler *push_running (lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &running_key) == LUA_TUSERDATA)
    return lua_touserdata(L, -1);
  return NULL;
}

/* Makes co (at index idx of L, or L itself when idx is 0) the coroutine P
** samples, and anchors it there for as long as it is: the signal handler
** sets hooks on P->running, so it must not be collected meanwhile, however
** the profiler was stopped and started in between.  Allocates nothing (the
** anchor has the slot); where the stack has no room left, the main thread
** stands in, which is always alive. */
static void set_running (lua_State *L, pm_Profiler *P, int idx) {
  lua_State *co = idx != 0 ? lua_tothread(L, idx) : L;
  if (!lua_checkstack(L, 3)) {
    P->running = P->S->main;
    return;
  }
  idx = idx != 0 ? lua_absindex(L, idx) : 0;
  if (push_running(L) == P &&
      lua_getiuservalue(L, -1, PM_PROF_ANCHOR) == LUA_TTABLE) {
    if (idx != 0)
      lua_pushvalue(L, idx);
    else
      lua_pushthread(L);
    lua_rawseti(L, -2, PM_ANCHOR_THREAD);
    P->running = co;
  } else { /* not the running profiler: nothing samples */
    P->running = P->S->main;
  }
  lua_pop(L, 2);
}

/* coroutine.resume; upvalues: the original, the pm_State.  The original
** reports the coroutine's errors, but calling it can still raise (C stack
** overflow, memory): a tracked call runs protected, since P->running must
** be set back to L whatever happens.  Once it returns, L runs again: the
** profiler running then (it may have been stopped, or another started,
** in co) samples L. */
static int co_resume (lua_State *L) {
  pm_Profiler *P = profiler_of(L, 2);
  lua_State *co = lua_tothread(L, 1);
  int status;
  if (P != NULL && co != NULL)
    set_running(L, P, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  if (P == NULL || co == NULL) { /* not tracked: the original's errors */
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
  }
  status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  if ((P = profiler_of(L, 2)) != NULL)
    set_running(L, P, 0);
  return status == LUA_OK ? lua_gettop(L) : lua_error(L);
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
  int r;
  if (!S->closed && S->e.monitors > 0)
    pm_hook_give(S, co);
  if (P != NULL)
    set_running(L, P, lua_upvalueindex(1));
  r = resume_n(L, co, lua_gettop(L));
  if ((P = profiler_of(L, 2)) != NULL)
    set_running(L, P, 0);
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

static const char *const co_names[] = {"resume", "wrap"};

/* Makes our resume and wrap into the anchor, with the library and the
** originals they stand for: what the library will hold once `other` (the
** profiler running, at index other, or 0) is stopped.  Allocates, and
** changes nothing outside the anchor; patch() then needs no allocation. */
static void prepare_patch (lua_State *L, pm_State *S, int anchor, int other) {
  int i;
  for (i = PM_ANCHOR_COLIB; i < PM_ANCHOR_THREAD; i++) {
    lua_pushnil(L);
    lua_rawseti(L, anchor, i);
  }
  if (other != 0)
    lua_getiuservalue(L, other, PM_PROF_ANCHOR);
  else
    lua_pushnil(L);
  if (!push_colib(L)) { /* ... other_anchor colib */
    lua_pop(L, 2);
    return;
  }
  lua_pushvalue(L, -1);
  lua_rawseti(L, anchor, PM_ANCHOR_COLIB);
  for (i = 0; i < 2; i++) {
    lua_CFunction f, mine = i == 0 ? co_resume : co_wrap;
    lua_pushstring(L, co_names[i]);
    lua_rawseti(L, anchor, PM_ANCHOR_NAME_RESUME + i);
    lua_rawgeti(L, anchor, PM_ANCHOR_NAME_RESUME + i);
    lua_rawget(L, -2); /* ... other_anchor colib current */
    if (lua_istable(L, -3)) { /* other's stop puts back its original */
      lua_rawgeti(L, -3, PM_ANCHOR_MY_RESUME + i);
      if (!lua_isnil(L, -1) && lua_rawequal(L, -1, -2)) {
        lua_pop(L, 2);
        lua_rawgeti(L, -2, PM_ANCHOR_RESUME + i);
      } else {
        lua_pop(L, 1);
      }
    }
    f = lua_tocfunction(L, -1);
    if (f == NULL || f == mine) { /* not a C function, or not ours to wrap */
      lua_pop(L, 1);
      continue;
    }
    lua_pushvalue(L, -1);
    lua_rawseti(L, anchor, PM_ANCHOR_RESUME + i); /* ... original */
    if (i == 0) {
      lua_pushlightuserdata(L, S);
      lua_pushcclosure(L, co_resume, 2); /* upvalues: the original, S */
    } else {
      lua_pop(L, 1);
      lua_pushlightuserdata(L, S);
      lua_pushcclosure(L, co_wrap, 1);
    }
    lua_rawseti(L, anchor, PM_ANCHOR_MY_RESUME + i);
  }
  lua_pop(L, 2);
}

/* Sets each of resume and wrap in the library to its value in anchor slot
** put + i, where it still is the one in slot expect + i (no allocation:
** the keys are there, and so are their strings). */
static void replace (lua_State *L, int anchor, int expect, int put) {
  int i;
  if (lua_rawgeti(L, anchor, PM_ANCHOR_COLIB) != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  for (i = 0; i < 2; i++) {
    lua_rawgeti(L, anchor, PM_ANCHOR_NAME_RESUME + i); /* ... colib name */
    lua_pushvalue(L, -1);
    lua_rawget(L, -3); /* ... colib name current */
    lua_rawgeti(L, anchor, expect + i);
    if (!lua_isnil(L, -1) && lua_rawequal(L, -1, -2)) {
      lua_pop(L, 2);
      lua_rawgeti(L, anchor, put + i);
      lua_rawset(L, -3);
    } else {
      lua_pop(L, 3);
    }
  }
  lua_pop(L, 1);
}

/* Puts ours in the library where the originals are. */
static void patch (lua_State *L, int anchor) {
  replace(L, anchor, PM_ANCHOR_RESUME, PM_ANCHOR_MY_RESUME);
}

/* Puts the originals back where ours still are. */
static void unpatch (lua_State *L, int anchor) {
  replace(L, anchor, PM_ANCHOR_MY_RESUME, PM_ANCHOR_RESUME);
}

/* }====================================================== */

/*
** {======================================================
** Start, stop, reset
** =======================================================
*/

void pm_profiler_init (pm_Profiler *P, pm_State *S) {
  memset(P, 0, sizeof(*P));
  P->S = S;
  P->falloc = S->e.falloc;
  P->fud = S->e.fud;
  P->state = PM_PROF_NEW;
  P->slot = -1;
  P->interval_us = 1000;
  P->timer = PM_TIMER_PRECISE;
  atomic_init(&P->pending, 0);
  atomic_init(&P->tag, -1);
  atomic_init(&P->sampling, 0);
}

/* Allocation-free: the registry's key is there (start made it), and the
** anchor has the originals.  The registry's value becomes false, never
** nil, so that the key stays for the next start. */
void pm_profiler_stop (lua_State *L, pm_Profiler *P, int idx, int state) {
  pm_State *S = P->S;
  pm_sampler_stop(P);
  if (!S->closed && idx != 0) {
    if (lua_getiuservalue(L, idx, PM_PROF_ANCHOR) == LUA_TTABLE)
      unpatch(L, lua_gettop(L));
    lua_pop(L, 1);
    pm_hook_unrequest(S, S->main);
    if (P->running != NULL)
      pm_hook_unrequest(S, P->running);
    if (S->e.monitors > 0 && S->current != NULL)
      pm_hook_unrequest(S, S->current->L);
  }
  if (S->profiler == P)
    S->profiler = NULL;
  if (push_running(L) == P) {
    lua_pushboolean(L, 0);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &running_key);
  }
  lua_pop(L, 1);
  P->micros += pm_wall_us() - P->since_us;
  P->running = NULL;
  P->state = state;
}

/* Everything that allocates or can fail comes first, and changes nothing
** anyone else sees (the buffers, the registry's key, the anchor's
** contents, the sentinel, the timer); what follows the timer neither
** allocates nor raises.  A memory error can then only leave P as it was. */
static void start (lua_State *L, pm_Profiler *P, int idx, uint32_t rate_us,
                   int timer, uint32_t max_samples) {
  pm_State *S = P->S;
  pm_Profiler *other;
  const char *err;
  int anchor, top = lua_gettop(L);
  luaL_checkstack(L, 12, NULL);
  if (P->levels == NULL &&
      (P->levels = raw_alloc(P, NULL, 0, PM_PROF_DEPTH * sizeof(Level))) ==
          NULL)
    luaL_error(L, "not enough memory");
  if (P->names == NULL &&
      (P->names = raw_alloc(P, NULL, 0, PROF_NAMES * sizeof(Name))) == NULL)
    luaL_error(L, "not enough memory");
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &running_key) == LUA_TNIL) {
    lua_pushboolean(L, 0); /* the key, so that stop and start can set it */
    lua_rawsetp(L, LUA_REGISTRYINDEX, &running_key);
  }
  lua_pop(L, 1);
  lua_getiuservalue(L, idx, PM_PROF_ANCHOR); /* ... anchor */
  anchor = lua_gettop(L);
  lua_pushthread(L);
  lua_rawseti(L, anchor, PM_ANCHOR_THREAD); /* P->running must stay alive */
  other = push_running(L); /* ... anchor other */
  prepare_patch(L, S, anchor, other != NULL ? lua_gettop(L) : 0);
  sentinel_push(L); /* ... anchor other sentinel */
  P->period_ns = (uint64_t)rate_us * 1000u;
  P->timer = timer;
  P->running = L;
  atomic_store(&P->pending, 0);
  if ((err = pm_sampler_start(P)) != NULL) {
    P->running = NULL;
    luaL_error(L, "%s", err);
  }
  /* committed: no allocation, no error from here on */
  memset(P->names, 0, PROF_NAMES * sizeof(Name)); /* functions may be gone */
  if (other != NULL && other != P) /* forcibly stopped */
    pm_profiler_stop(L, other, anchor + 1, PM_PROF_FORCED);
  if (max_samples != P->limit) { /* a new maximum: the ring starts over */
    raw_alloc(P, P->ring, (size_t)P->cap * sizeof(pm_Sample), 0);
    P->ring = NULL;
    P->cap = P->first = P->count = 0;
    P->limit = max_samples;
  }
  lua_pushvalue(L, idx);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &running_key); /* an existing key */
  patch(L, anchor);
  P->fast = S->frame_direct;
  P->interval_us = (double)rate_us;
  S->answer = pm_sampler_answer;
  S->profiler = P;
  P->state = PM_PROF_RUNNING;
  P->cycles_seen = P->cycles;
  P->since_us = pm_wall_us();
  if (P->start_realtime == 0)
    P->start_realtime = pm_realtime_us();
  lua_settop(L, top); /* the sentinel is garbage */
}

void pm_profiler_start (lua_State *L, pm_Profiler *P, int idx, uint32_t rate_us,
                        int timer, uint32_t max_samples, int after) {
  pm_State *S = P->S;
  int state = P->state;
  double micros = P->micros, realtime = P->start_realtime;
  idx = lua_absindex(L, idx);
  if (P->state == PM_PROF_RUNNING)
    luaL_error(L, "the profiler is already running");
  if (P->reading > 0)
    luaL_error(L, "its records are being read (a finalizer ran during "
                  "results(), samples() or to_gecko())");
  if (pm_hook_foreign(S, L) || pm_hook_foreign(S, S->main))
    luaL_error(L, "a debug hook is already set (debug.sethook); the "
                  "profiler needs the count hook");
  start(L, P, idx, rate_us, timer, max_samples);
  if (after != 0 && S->e.monitors > 0) {
    after = lua_absindex(L, after);
    lua_pushvalue(L, after);
    lua_pushvalue(L, after + 1);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
      if (P->state == PM_PROF_RUNNING) { /* as if it never started */
        pm_profiler_stop(L, P, idx, state);
        P->micros = micros;
        P->start_realtime = realtime;
      }
      lua_error(L);
    }
  }
}

void pm_profiler_reset (pm_Profiler *P) {
  uint32_t limit = P->limit;
  free_records(P);
  P->limit = limit;
  P->total = P->gc = P->dropped = P->truncated = P->throttled = 0;
  P->micros = 0;
  P->since_us = pm_wall_us();
  P->start_realtime = P->state == PM_PROF_RUNNING ? pm_realtime_us() : 0;
}

void pm_profiler_free (pm_Profiler *P) {
  free_records(P);
  if (P->levels != NULL)
    raw_alloc(P, P->levels, PM_PROF_DEPTH * sizeof(Level), 0);
  if (P->names != NULL)
    raw_alloc(P, P->names, PROF_NAMES * sizeof(Name), 0);
  P->levels = NULL;
  P->names = NULL;
}

/* }====================================================== */
