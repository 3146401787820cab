/*
** lhooks.c -- sharing debug.sethook with Lua programs (lhooks.h).
*/
#include "lhooks.h"

#include <string.h>

#include <lauxlib.h>

#include "hook.h"
#include "largs.h"

/* core.owns_hook([thread]) -> whether the thread's debug hook is perfmon's
** (debug.gethook says "external hook" for it) */
static int l_owns_hook (lua_State *L) {
  lua_State *co = lua_isnoneornil(L, 1) ? L : lua_tothread(L, 1);
  luaL_argexpected(L, co != NULL, 1, "thread");
  lua_pushboolean(L, pm_hook_owns(pm_lstate(L), co));
  return 1;
}

/*
** {======================================================
** debug.sethook and debug.gethook while monitors are open
** =======================================================
*/

/* The debug library's table of Lua hooks by thread, as ldblib.c keeps it
** (pushed; made as ldblib.c makes it when absent). */
static void hook_table (lua_State *L) {
  if (!luaL_getsubtable(L, LUA_REGISTRYINDEX, "_HOOKKEY")) {
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_pushvalue(L, -1);
    lua_setmetatable(L, -2);
  }
}

/* Pushes co onto L's stack. */
static void push_thread (lua_State *L, lua_State *co) {
  if (co == L) {
    lua_pushthread(L);
  } else {
    luaL_checkstack(co, 1, "debug.sethook");
    lua_pushthread(co);
    lua_xmove(co, L, 1);
  }
}

/* The thread argument, which is optional (ldblib.c's getthread). */
static lua_State *hook_thread (lua_State *L, int *arg) {
  if (lua_isthread(L, 1)) {
    *arg = 1;
    return lua_tothread(L, 1);
  }
  *arg = 0;
  return L;
}

/* Calls upvalue i with the arguments; returns its results. */
static int call_raw (lua_State *L, int i) {
  lua_pushvalue(L, lua_upvalueindex(i));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* debug.sethook([thread,] hook, mask [, count]), as ldblib.c's, but the
** hook is chained behind perfmon's while monitors are open; upvalues: the
** debug library's sethook and gethook. */
static int hooks_set (lua_State *L) {
  pm_State *S = pm_lstate(L);
  int arg, mask = 0, count = 0;
  lua_State *co = hook_thread(L, &arg);
  if (S->exact == 0)
    return call_raw(L, 1);
  if (S->debug_hook == NULL)
    return luaL_error(L, "debug.sethook: perfmon is monitoring this Lua "
                         "state and cannot share its hook with this debug "
                         "library; close the monitors first");
  if (lua_isnoneornil(L, arg + 1)) {
    lua_settop(L, arg + 1);
  } else {
    const char *smask = luaL_checkstring(L, arg + 2);
    luaL_checktype(L, arg + 1, LUA_TFUNCTION);
    count = (int)luaL_optinteger(L, arg + 3, 0);
    mask = (strchr(smask, 'c') ? LUA_MASKCALL : 0) |
           (strchr(smask, 'r') ? LUA_MASKRET : 0) |
           (strchr(smask, 'l') ? LUA_MASKLINE : 0) |
           (count > 0 ? LUA_MASKCOUNT : 0);
  }
  hook_table(L);
  push_thread(L, co);
  lua_pushvalue(L, arg + 1);
  lua_rawset(L, -3);
  if (!pm_hook_chain(S, co, S->debug_hook, mask, count))
    pm_lnomem(L);
  return 0;
}

/* debug.gethook([thread]): the program's hook, never perfmon's.  With no
** exact monitor, perfmon's hook on a thread is a sample request's, which
** a program's hook keeps off (hook.h): the program has none.  A request
** may come at any instant, also inside the debug library's gethook: that
** one is called only for a program's hook, which no request replaces. */
static int hooks_get (lua_State *L) {
  pm_State *S = pm_lstate(L);
  int arg, mask, count, n = 0;
  lua_State *co = hook_thread(L, &arg);
  char smask[4];
  lua_Hook h;
  if (lua_gethook(co) == NULL) {
    luaL_pushfail(L);
    return 1;
  }
  if (!pm_hook_owns(S, co))
    return call_raw(L, 2);
  if (S->exact == 0) {
    luaL_pushfail(L);
    return 1;
  }
  if ((h = pm_hook_chained(S, co, &mask, &count)) == NULL) {
    luaL_pushfail(L);
    return 1;
  }
  if (h != S->debug_hook) {
    lua_pushliteral(L, "external hook");
  } else {
    hook_table(L);
    push_thread(L, co);
    lua_rawget(L, -2);
    lua_remove(L, -2);
  }
  if (mask & LUA_MASKCALL)
    smask[n++] = 'c';
  if (mask & LUA_MASKRET)
    smask[n++] = 'r';
  if (mask & LUA_MASKLINE)
    smask[n++] = 'l';
  lua_pushlstring(L, smask, (size_t)n);
  lua_pushinteger(L, count);
  return 3;
}

static int noop (lua_State *L) {
  (void)L;
  return 0;
}

/* The registry's record of the debug library: the library, its sethook and
** gethook, the two that share the hook, and the two fields' names. */
static const char hooks_key = 0;
enum { HOOKS_LIB = 1, HOOKS_RAW = 2, HOOKS_SHARED = 4, HOOKS_NAME = 6 };

/* debug.sethook and debug.gethook: the shared two while exact monitors are
** open or a sampler runs (shared: monitor.h), the debug library's own
** otherwise; two that a program
** put there stay.  Called where the count of exact monitors changes, and
** it neither allocates nor calls: a monitor closed deep in an error's
** handling, where no call can be made any more, still sets them right. */
void pm_lhooks_guard (lua_State *L, int shared) {
  int from = shared ? HOOKS_RAW : HOOKS_SHARED;
  int to = shared ? HOOKS_SHARED : HOOKS_RAW, i;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &hooks_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return; /* no debug library */
  }
  lua_rawgeti(L, -1, HOOKS_LIB); /* t lib */
  lua_rawgeti(L, -2, HOOKS_NAME);
  lua_rawget(L, -2); /* t lib lib.sethook */
  lua_rawgeti(L, -3, from); /* t lib lib.sethook from */
  if (lua_rawequal(L, -1, -2))
    for (i = 0; i < 2; i++) {
      lua_rawgeti(L, -4, HOOKS_NAME + i);
      lua_rawgeti(L, -5, to + i);
      lua_rawset(L, -5); /* an existing field: no allocation */
    }
  lua_pop(L, 4);
}

/* core.hook_functions(debug): from now on the debug library's sethook and
** gethook give way to two that share the hook while exact monitors are
** open (pm_lhooks_guard).  Once a state: perfmon required again (a host that
** reloads its modules) may find the shared two in the library, which are
** not its own.  Learns the debug library's hook (a Lua hook set on a
** thread that is not running, which sees no event), if its table is where
** ldblib.c keeps it. */
static int l_hook_functions (lua_State *L) {
  pm_State *S = pm_lstate(L);
  lua_State *co;
  lua_Hook h;
  int i;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_createtable(L, HOOKS_NAME + 1, 0); /* 2: the record */
  lua_pushvalue(L, 1);
  lua_rawseti(L, 2, HOOKS_LIB);
  lua_pushliteral(L, "sethook");
  lua_rawseti(L, 2, HOOKS_NAME);
  lua_pushliteral(L, "gethook");
  lua_rawseti(L, 2, HOOKS_NAME + 1);
  for (i = 0; i < 2; i++) {
    lua_rawgeti(L, 2, HOOKS_NAME + i);
    if (lua_rawget(L, 1) != LUA_TFUNCTION)
      luaL_argerror(L, 1,
                    i == 0 ? "no function sethook in it"
                           : "no function gethook in it");
    lua_rawseti(L, 2, HOOKS_RAW + i);
  }
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &hooks_key) == LUA_TTABLE)
    return 0;
  lua_pop(L, 1);
  co = lua_newthread(L); /* 3 */
  lua_rawgeti(L, 2, HOOKS_RAW);
  lua_pushvalue(L, 3);
  lua_pushcfunction(L, noop);
  lua_pushliteral(L, "c");
  lua_call(L, 3, 0);
  h = lua_gethook(co);
  hook_table(L);
  lua_pushvalue(L, 3);
  lua_rawget(L, -2);
  S->debug_hook = lua_tocfunction(L, -1) == noop ? h : NULL;
  lua_pop(L, 2);
  lua_rawgeti(L, 2, HOOKS_RAW);
  lua_pushvalue(L, 3);
  lua_call(L, 1, 0); /* the thread's hook and its table entry go */
  for (i = 0; i < 2; i++) {
    lua_rawgeti(L, 2, HOOKS_RAW);
    lua_rawgeti(L, 2, HOOKS_RAW + 1);
    lua_pushcclosure(L, i == 0 ? hooks_set : hooks_get, 2);
    lua_rawseti(L, 2, HOOKS_SHARED + i);
  }
  lua_pushvalue(L, 2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &hooks_key);
  pm_lhooks_guard(L, S->exact > 0);
  return 0;
}

/* }====================================================== */

static const luaL_Reg hooks_funcs[] = {{"owns_hook", l_owns_hook},
                                       {"hook_functions", l_hook_functions},
                                       {NULL, NULL}};

void pm_lhooks_register (lua_State *L) {
  luaL_setfuncs(L, hooks_funcs, 0);
}
