/*
** frame.c -- the start-up check of frame.h's accessors.
*/
#include "frame.h"

#include <lauxlib.h>

static _Thread_local struct { int events, mismatches; } check;

static void check_hook (lua_State *L, lua_Debug *ar) {
  lua_Debug up;
  lua_getinfo(L, "f", ar);
  if (pm_frame_function(ar->i_ci) != lua_topointer(L, -1))
    check.mismatches++;
  lua_pop(L, 1);
  if (lua_getstack(L, 1, &up) && pm_frame_caller(ar->i_ci) != up.i_ci)
    check.mismatches++;
  check.events++;
}

static int identity (lua_State *L) {
  return lua_gettop(L);
}

int pm_frame_verify (lua_State *L) {
  lua_Hook old = lua_gethook(L);
  int mask = lua_gethookmask(L), count = lua_gethookcount(L);
  check.events = check.mismatches = 0;
  luaL_loadstring(L, "local cclosure = ...\n"
                     "local function lua(x) return x end\n"
                     "local function tail(x) return lua(x) end\n"
                     "return cclosure(tail(select('#', cclosure)))");
  lua_pushinteger(L, 1);
  lua_pushcclosure(L, identity, 1);
  lua_sethook(L, check_hook, LUA_MASKCALL, 0);
  lua_call(L, 1, 0);
  lua_sethook(L, old, mask, count);
  /* main, tail, lua (a tail call), select, cclosure: at least 5 events */
  return check.events >= 5 && check.mismatches == 0;
}
