/*
** lprofiler.c -- core.profiler_*, the Lua binding of the sampling
** profiler: the userdata, its argument checks, and the records read out
** into Lua tables (lua/perfmon/profiler.lua shapes them).
*/
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "largs.h"
#include "profiler.h"
#include "sample.h"

#define PROFILER_MT "perfmon.profiler"

static const char *const state_names[] = {"new", "running", "stopped", "forced",
                                          "collected"};

/* PM_TIMER_*, as p:start's option `timer` names them */
static const char *const timer_names[] = {"precise", "tick", "cpu", NULL};

static pm_Profiler *check_profiler (lua_State *L) {
  return luaL_checkudata(L, 1, PROFILER_MT);
}

static pm_State *live_state (lua_State *L) {
  pm_State *S = pm_state_get(L);
  if (S == NULL)
    luaL_error(L, "perfmon: the state is closing");
  return S;
}

/*
** {======================================================
** Start and stop
** =======================================================
*/

/*
** p:start's arguments are checked here, and only here.  profiler.lua's
** start calls core.profiler_start protected and raises the error again at
** its caller's line, so an argument is named as that caller counts them:
** the profiler (1 here) is its self.
*/
static int start_argerror (lua_State *L, int arg, const char *msg) {
  return pm_larg_error(L, arg - 1, "profiler:start", msg);
}

/* Argument arg, a whole number (1000.0 is one, "1000" is not) in [lo, hi],
** or def when it is nil; unit and range say what it counts. */
static lua_Integer check_whole (lua_State *L, int arg, lua_Integer def,
                                lua_Integer lo, lua_Integer hi,
                                const char *unit, const char *range) {
  int whole = 0;
  lua_Integer v = 0;
  if (lua_isnoneornil(L, arg))
    return def;
  if (lua_type(L, arg) == LUA_TNUMBER)
    v = lua_tointegerx(L, arg, &whole);
  if (!whole)
    start_argerror(L, arg,
                   lua_pushfstring(L, "integer number of %s expected, got %s",
                                   unit,
                                   lua_type(L, arg) == LUA_TNUMBER
                                       ? luaL_tolstring(L, arg, NULL)
                                       : luaL_typename(L, arg)));
  if (v < lo || v > hi)
    start_argerror(L, arg, lua_pushfstring(L, "%s expected, got %I", range, v));
  return v;
}

/* The timer (PM_TIMER_*) that the options table at arg names: "precise"
** without a table or a timer in it. */
static int check_timer (lua_State *L, int arg) {
  const char *name;
  int timer;
  if (lua_isnoneornil(L, arg))
    return PM_TIMER_PRECISE;
  if (!lua_istable(L, arg))
    start_argerror(L, arg,
                   lua_pushfstring(L, "table of options expected, got %s",
                                   luaL_typename(L, arg)));
  lua_pushliteral(L, "timer");
  lua_pushnil(L);
  while (lua_next(L, arg)) { /* "timer" key value */
    lua_pop(L, 1);
    if (!lua_rawequal(L, -1, -2))
      start_argerror(L, arg,
                     lua_pushfstring(L, "unknown option %s (options: timer)",
                                     pm_lpush_quoted(L, -1)));
  }
  lua_rawget(L, arg); /* options.timer, as given: no __index */
  if (lua_isnil(L, -1))
    timer = PM_TIMER_PRECISE;
  else {
    size_t len = 0;
    name = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : "";
    for (timer = 0; timer_names[timer] != NULL; timer++)
      if (strlen(timer_names[timer]) == len &&
          memcmp(name, timer_names[timer], len) == 0)
        break;
    if (timer_names[timer] == NULL)
      start_argerror(
          L, arg,
          lua_pushfstring(
              L, "timer \"precise\", \"tick\" or \"cpu\" expected, got %s",
              lua_type(L, -1) == LUA_TSTRING ? pm_lpush_quoted(L, -1)
                                             : luaL_typename(L, -1)));
  }
  lua_pop(L, 1);
  return timer;
}

/* l_start's work, protected: p and the arguments as l_start checked them */
static int start (lua_State *L) {
  pm_Profiler *P = lua_touserdata(L, 1);
  live_state(L); /* the state is not closing */
  if (P->state == PM_PROF_COLLECTED)
    return luaL_error(L, "the profiler was collected (a finalizer kept it "
                         "after its __gc ran): make a new one");
  pm_profiler_start(L, P, 1, (uint32_t)lua_tointeger(L, 2),
                    (int)lua_tointeger(L, 4), (uint32_t)lua_tointeger(L, 3),
                    lua_isnil(L, 5) ? 0 : 5);
  return 0;
}

/* core.profiler_start(p [, rate_us [, max_samples [, options [, after,
** arg]]]]), as p:start(rate_us, max_samples, options) is documented;
** after(arg) runs once p is running, if a monitor is open; if it raises, p
** stops again.  Any error but a bad argument names profiler:start, as
** profiler.lua reports it. */
static int l_start (lua_State *L) {
  lua_Integer rate, max;
  int timer;
  check_profiler(L);
  rate = check_whole(L, 2, 1000, 10, 60000000, "µs",
                     "sample rate of 10 to 60000000 µs");
  max = check_whole(L, 3, 0, 0, 0x7fffffff, "samples",
                    "0 (unlimited) to 2147483647 samples");
  timer = check_timer(L, 4);
  if (!lua_isnoneornil(L, 5))
    luaL_checktype(L, 5, LUA_TFUNCTION);
  lua_settop(L, 6); /* arg: nil when none */
  lua_pushcfunction(L, start);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, rate);
  lua_pushinteger(L, max);
  lua_pushinteger(L, timer);
  lua_pushvalue(L, 5);
  lua_pushvalue(L, 6);
  if (lua_pcall(L, 6, 0, 0) != LUA_OK) {
    if (lua_type(L, -1) == LUA_TSTRING) {
      lua_pushliteral(L, "profiler:start: ");
      lua_insert(L, -2);
      lua_concat(L, 2);
    }
    return lua_error(L);
  }
  return 0;
}

/* core.profiler_stop(p) */
static int l_stop (lua_State *L) {
  pm_Profiler *P = check_profiler(L);
  if (P->state == PM_PROF_RUNNING)
    pm_profiler_stop(L, P, 1, PM_PROF_STOPPED);
  return 0;
}

/* core.profiler_state(p) -> "new" | "running" | "stopped" | "forced" |
** "collected" */
static int l_state (lua_State *L) {
  lua_pushstring(L, state_names[check_profiler(L)->state]);
  return 1;
}

/* core.profiler_reset(p); not while a dump reads the records (from a
** finalizer run by the dump's allocations) */
static int l_reset (lua_State *L) {
  pm_Profiler *P = check_profiler(L);
  if (P->s.hold > 0)
    return luaL_error(L, "its records are being read (a finalizer ran "
                         "during results(), samples() or to_gecko())");
  pm_profiler_reset(P);
  return 0;
}

/* core.profiler_frame(p, skip) -> the node of the stack `skip` levels up */
static int l_frame (lua_State *L) {
  pm_Profiler *P = check_profiler(L);
  lua_Integer skip = luaL_checkinteger(L, 2);
  int64_t node;
  luaL_argcheck(L, skip >= 0 && skip <= INT_MAX, 2, "out of range");
  if (P->state != PM_PROF_RUNNING)
    return luaL_error(L, "the profiler is not running");
  node = pm_sample_frame(L, P, (int)skip);
  if (node == 0)
    return luaL_error(L, "no Lua stack at that level");
  if (node < 0)
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

/*
** The tables below allocate, so the collector may run finalizers in the
** middle of a dump, and one may call frame(), which appends functions and
** stacks and may move the arrays (reset() and start() refuse, samples
** wait).  A dump therefore reads the counts once, when it begins, and
** every record by its index, after the allocation before it.
*/

/* ... -> ... { file, line, name, what, group, group_id } per function */
static void push_funcs (lua_State *L, pm_Profiler *P, uint32_t n) {
  uint32_t i;
  lua_createtable(L, (int)n, 0);
  for (i = 0; i < n; i++) {
    pm_Func f = P->r.funcs[i]; /* a copy: the tables below allocate */
    lua_createtable(L, 0, 6);
    lua_pushstring(L, f.src);
    lua_setfield(L, -2, "file");
    set_int(L, "line", f.line);
    if (f.name[0] != '\0') {
      lua_pushstring(L, f.name);
      lua_setfield(L, -2, "name");
    }
    lua_pushstring(L, f.what == 'C' ? "C" : (f.what == 'm' ? "main" : "Lua"));
    lua_setfield(L, -2, "what");
    if (f.group_id != 0) {
      lua_pushstring(L, f.group);
      lua_setfield(L, -2, "group");
      set_int(L, "group_id", f.group_id);
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

enum { COL_PARENT, COL_FUNC, COL_LINE, COL_SELF, COL_TOTAL };

/* ... -> ... { column col of nodes 1..n } (1-based function indices) */
static void push_column (lua_State *L, pm_Profiler *P, uint32_t n, int col) {
  uint32_t i;
  lua_createtable(L, (int)n, 0);
  for (i = 0; i < n; i++) {
    const pm_Node *nd = &P->r.nodes[i];
    lua_Integer v;
    switch (col) {
      case COL_PARENT: v = nd->parent; break; /* index, 0 for a root */
      case COL_FUNC: v = (lua_Integer)nd->func + 1; break;
      case COL_LINE: v = nd->line; break;
      case COL_SELF: v = (lua_Integer)nd->self; break;
      default: v = (lua_Integer)nd->total; break;
    }
    lua_pushinteger(L, v);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* The table of core.profiler_dump, made under l_dump's protection; the
** argument is the profiler, as a light userdata. */
static int dump (lua_State *L) {
  static const char *const columns[] = {"parent", "func", "line", "self",
                                        "total"};
  pm_Profiler *P = lua_touserdata(L, 1);
  uint32_t nfuncs = (uint32_t)P->r.nfuncs, nnodes = (uint32_t)P->r.nnodes, i;
  int col;
  lua_createtable(L, 0, 12);
  push_funcs(L, P, nfuncs);
  lua_setfield(L, -2, "funcs");
  lua_createtable(L, 0, 5);
  for (col = COL_PARENT; col <= COL_TOTAL; col++) {
    push_column(L, P, nnodes, col);
    lua_setfield(L, -2, columns[col]);
  }
  lua_setfield(L, -2, "nodes");
  lua_createtable(L, 0, 4); /* samples, oldest first: the ring waits */
  lua_createtable(L, P->r.count, 0);
  lua_createtable(L, P->r.count, 0);
  lua_createtable(L, P->r.count, 0);
  lua_createtable(L, P->r.count, 0);
  for (i = 0; (int)i < P->r.count; i++) {
    const pm_Sample *s = pm_records_at(&P->r, (int)i);
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
  set_int(L, "dropped", (lua_Integer)P->r.dropped);
  set_int(L, "truncated", (lua_Integer)P->truncated);
  set_int(L, "throttled", (lua_Integer)P->s.throttled);
  set_int(L, "max_depth", PM_PROF_DEPTH);
  set_int(L, "limit", P->r.limit);
  set_num(L, "micros",
          P->micros +
              (P->state == PM_PROF_RUNNING ? pm_wall_us() - P->since_us : 0));
  set_num(L, "start_time_us",
          P->start_realtime != 0 ? P->start_realtime : pm_realtime_us());
  set_num(L, "interval_us", P->interval_us);
  lua_pushstring(L, timer_names[P->s.timer]); /* "tick" where "cpu" fell back */
  lua_setfield(L, -2, "timer");
  set_int(L, "pid", (lua_Integer)getpid());
  lua_pushstring(L, state_names[P->state]);
  lua_setfield(L, -2, "state");
  return 1;
}

/* core.profiler_dump(p) -> everything recorded since the last reset, as
** flat arrays (1-based indices); lua/perfmon/profiler.lua shapes it.
** Dumps nest (a finalizer may read the records too): P->s.hold counts. */
static int l_dump (lua_State *L) {
  pm_Profiler *P = check_profiler(L);
  int status;
  P->s.hold++; /* samples wait, reset() and start() refuse */
  lua_pushcfunction(L, dump); /* protected: the count must come back */
  lua_pushlightuserdata(L, P);
  status = lua_pcall(L, 1, 1, 0);
  P->s.hold--;
  return status == LUA_OK ? 1 : lua_error(L);
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
  pm_Profiler *P = lua_newuserdatauv(L, sizeof(*P), PM_PROF_NUV - 1);
  pm_profiler_init(P, S);
  luaL_setmetatable(L, PROFILER_MT);
  lua_createtable(L, 0, 1); /* threads: weak keys */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_pushinteger(L, ++P->nthreads); /* the main thread is 1 */
  lua_rawset(L, -3);
  lua_setiuservalue(L, -2, PM_PROF_THREADS);
  lua_createtable(L, PM_ANCHOR_SLOTS, 0); /* room for every slot */
  lua_setiuservalue(L, -2, PM_PROF_ANCHOR);
  return 1;
}

/* A running profiler stops when it is collected, which only happens as the
** state closes (it is anchored while it runs): the timer and the signal
** handler go with it.  A finalizer may still hold it afterwards: it stays
** COLLECTED, which start refuses. */
static int profiler_gc (lua_State *L) {
  pm_Profiler *P = lua_touserdata(L, 1);
  if (P->state == PM_PROF_RUNNING)
    pm_profiler_stop(L, P, 1, PM_PROF_STOPPED);
  pm_profiler_free(P);
  P->state = PM_PROF_COLLECTED;
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
