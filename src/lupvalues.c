/*
** lupvalues.c -- debug.setupvalue and debug.upvaluejoin that tell perfmon
** which functions they move to another environment (see lupvalues.h).
*/
#include "lupvalues.h"

#include <string.h>

#include <lauxlib.h>

#include "group.h"
#include "resolve.h"
#include "state.h"

/* Whether an upvalue of a Lua function named so may hold its environment:
** its _ENV, or any of stripped code's, which names none (and whose load
** set upvalue 1 to it). */
static int env_name (const char *name) {
  return strcmp(name, "_ENV") == 0 || strcmp(name, "(no name)") == 0;
}

/* The Lua function at 1 may be in another environment: it is resolved
** again now, so that a chunk's main function tells its chunk's new one,
** which the chunk's functions that touch no global follow. */
static void moved (lua_State *L, pm_State *S) {
  if (!pm_resolve_chunk(L, S, 1))
    luaL_error(L, "not enough memory");
}

/* debug.setupvalue(f, up, value), as ldblib.c's */
static int upvalues_set (lua_State *L) {
  pm_State *S;
  const char *name;
  int n;
  luaL_checkany(L, 3);
  n = (int)luaL_checkinteger(L, 2);
  luaL_checktype(L, 1, LUA_TFUNCTION);
  if ((name = lua_setupvalue(L, 1, n)) == NULL)
    return 0;
  lua_pushstring(L, name);
  if (!lua_iscfunction(L, 1) && env_name(name) &&
      (S = pm_state_get(L)) != NULL) {
    pm_functions_forget(&S->e);
    moved(L, S);
  }
  return 1;
}

/* The index of upvalue argnup of the function at argf, checked as
** ldblib.c's checkupval does. */
static int check_upvalue (lua_State *L, int argf, int argnup) {
  int n = (int)luaL_checkinteger(L, argnup);
  luaL_checktype(L, argf, LUA_TFUNCTION);
  luaL_argcheck(L, lua_upvalueid(L, argf, n) != NULL, argnup,
                "invalid upvalue index");
  return n;
}

/* debug.upvaluejoin(f1, n1, f2, n2), as ldblib.c's */
static int upvalues_join (lua_State *L) {
  pm_State *S;
  int n1 = check_upvalue(L, 1, 2), n2 = check_upvalue(L, 3, 4), env;
  luaL_argcheck(L, !lua_iscfunction(L, 1), 1, "Lua function expected");
  luaL_argcheck(L, !lua_iscfunction(L, 3), 3, "Lua function expected");
  env = env_name(lua_getupvalue(L, 1, n1));
  lua_pop(L, 1);
  lua_upvaluejoin(L, 1, n1, 3, n2);
  if (env && (S = pm_state_get(L)) != NULL) {
    pm_map_del(&S->e.fns, lua_topointer(L, 1));
    moved(L, S);
  }
  return 0;
}

/* Puts f in the field k of the table at 1, if that holds a function: a
** host that took one out of its debug library gets none back. */
static void replace (lua_State *L, const char *k, lua_CFunction f) {
  if (lua_getfield(L, 1, k) == LUA_TFUNCTION) {
    lua_pushcfunction(L, f);
    lua_setfield(L, 1, k);
  }
  lua_pop(L, 1);
}

/* core.upvalue_functions(debug): the library's setupvalue and upvaluejoin
** give way to perfmon's for good; they behave as the library's, whether
** monitors are open or not. */
static int l_upvalue_functions (lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  replace(L, "setupvalue", upvalues_set);
  replace(L, "upvaluejoin", upvalues_join);
  return 0;
}

void pm_upvalues_register (lua_State *L) {
  lua_pushcfunction(L, l_upvalue_functions);
  lua_setfield(L, -2, "upvalue_functions");
}
