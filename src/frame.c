/*
** frame.c -- the start-up check of frame.h's accessors.
*/
#include "frame.h"

#include <lauxlib.h>

static _Thread_local struct { int events, mismatches; } check;

static void check_hook (lua_State *L, lua_Debug *ar) {
  lua_Debug up;
  lua_getinfo(L, "f", ar);
  if (pm_frame_function(ar->i_ci) != lua_topointer(L, -1) ||
      pm_frame_is_c(ar->i_ci) != lua_iscfunction(L, -1))
    check.mismatches++;
  lua_pop(L, 1);
  if (lua_getstack(L, 1, &up) && pm_frame_caller(ar->i_ci) != up.i_ci)
    check.mismatches++;
  check.events++;
}

static int identity (lua_State *L) {
  return lua_gettop(L);
}

/* Protected: loading or running the check can raise a memory error. */
static int run_check (lua_State *L) {
  if (luaL_loadstring(L,
                      "local cclosure = ...\n"
                      "local function lua(x) return x end\n"
                      "local function tail(x) return lua(x) end\n"
                      "return cclosure(tail(select('#', cclosure)))") != LUA_OK)
    return lua_error(L);
  lua_pushinteger(L, 1);
  lua_pushcclosure(L, identity, 1);
  lua_sethook(L, check_hook, LUA_MASKCALL, 0);
  lua_call(L, 1, 0);
  return 0;
}

void pm_frame_run_check (lua_State *L, lua_CFunction run) {
  lua_Hook old = lua_gethook(L);
  int mask = lua_gethookmask(L), count = lua_gethookcount(L), status;
  lua_pushcfunction(L, run);
  status = lua_pcall(L, 0, 0, 0);
  /* whatever happened, the test hook goes: a failed check must not leave
     it behind to pass for a foreign hook */
  lua_sethook(L, old, mask, count);
  if (status != LUA_OK)
    lua_error(L); /* out of memory: perfmon cannot start */
}

int pm_frame_verify (lua_State *L) {
  check.events = check.mismatches = 0;
  pm_frame_run_check(L, run_check);
  /* main, tail, lua (a tail call), select, cclosure: at least 5 events */
  return check.events >= 5 && check.mismatches == 0;
}
