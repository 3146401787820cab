/*
** sample.c -- taking a sample: the walk of a stack into the records, the
** threads' numbers, the collections the sampler was held off by, and the
** running profiler they belong to (see sample.h).
*/
#include "sample.h"

#include <string.h>

#include <lauxlib.h>

#include "frame.h"
#include "hash.h"
#include "hook.h"
#include "resolve.h"

_Static_assert(LUA_IDSIZE <= PM_PROF_SRC, "records keep Lua's short_src");

/* A running profiler anchors its userdata here, so that it is never
** collected while its timer runs; the address is the registry key. */
static const char running_key = 'P';

pm_Profiler *pm_sample_running (lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &running_key) == LUA_TUSERDATA)
    return lua_touserdata(L, -1);
  return NULL;
}

void pm_sample_set_running (lua_State *L, int idx) {
  lua_pushvalue(L, idx);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &running_key);
}

/*
** {======================================================
** Walking a stack
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


int pm_sample_open (pm_Profiler *P) {
  pm_Engine *E = &P->S->e;
  if (P->levels == NULL &&
      (P->levels = pm_alloc(E, PM_PROF_DEPTH * sizeof(Level))) == NULL)
    return 0;
  if (P->names == NULL &&
      (P->names = pm_alloc(E, PROF_NAMES * sizeof(Name))) == NULL)
    return 0;
  return 1;
}

void pm_sample_forget_names (pm_Profiler *P) {
  memset(P->names, 0, PROF_NAMES * sizeof(Name));
}

void pm_sample_close (pm_Profiler *P) {
  pm_Engine *E = &P->S->e;
  if (P->levels != NULL)
    pm_free(E, P->levels, PM_PROF_DEPTH * sizeof(Level));
  if (P->names != NULL)
    pm_free(E, P->names, PROF_NAMES * sizeof(Name));
  P->levels = NULL;
  P->names = NULL;
}

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

/* The name of level i's call, from the cache or from lua_getinfo "n". */
static void name_of (pm_Profiler *P, lua_State *L, int i, int n) {
  Level *lv = &P->levels[i];
  const void *caller = i + 1 < n ? P->levels[i + 1].fn : NULL;
  int line = i + 1 < n ? P->levels[i + 1].line : -1;
  uint32_t h =
      pm_hash_word(pm_hash_word(pm_hash_word(PM_HASH_SEED, (uintptr_t)lv->fn),
                                (uintptr_t)caller),
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
  pm_records_copy_name(lv->name, ar.name);
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
    lv->group = group_of(pm_resolve_set(L, S));
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
    if ((f = pm_records_func(&P->r, lv->src, lv->name, lv->defined, lv->what,
                             lv->group)) < 0 ||
        (k = pm_records_node(&P->r, parent, (uint32_t)f, lv->line)) < 0)
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

void pm_sample_take (pm_Profiler *P, lua_State *L, unsigned weight) {
  pm_Sample s;
  int cut = 0, n = walk(P, L, 0, &cut);
  uint32_t top;
  if (n == 0 || (top = intern_path(P, n)) == 0) {
    P->r.dropped++;
    return;
  }
  P->truncated += cut;
  s.time_us = pm_realtime_us();
  s.weight = weight;
  s.node = top - 1;
  s.thread = thread_number(P, L);
  P->total += weight;
  if (P->cycles != P->cycles_seen) { /* a collection held the sampler off */
    P->cycles_seen = P->cycles;
    P->gc += weight - 1;
  }
  pm_records_sample(&P->r, top, &s);
}

/* No sample can come in between: no Lua code runs here (nothing below
** steps the collector, so no finalizer either).  A dump under way (a
** finalizer called frame() while its tables were made) sees only the
** records there were when it began: new ones are appended. */
int64_t pm_sample_frame (lua_State *L, pm_Profiler *P, int skip) {
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

void pm_sample_sentinel (lua_State *L) {
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
      pm_sample_sentinel(L); /* for the next collection */
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return 0;
}

/* }====================================================== */
