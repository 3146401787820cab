/*
** noophook.c -- a call/return hook that does nothing, for bench/run.lua.
**
** require("noophook").set() installs it on the calling thread, clear()
** removes it.  Coroutines created while it is set inherit it from their
** creator (lua_newthread copies the hook), which is how the coroutine
** workloads get it: set it before they create their coroutines.  This is
** the floor any call/return hook pays: Lua's own cost of calling a C hook
** on every call and return, with nothing done inside.
*/
#include <lua.h>
#include <lauxlib.h>

static void noop (lua_State *L, lua_Debug *ar) {
  (void)L;
  (void)ar;
}

static int l_set (lua_State *L) {
  lua_sethook(L, noop, LUA_MASKCALL | LUA_MASKRET, 0);
  return 0;
}

static int l_clear (lua_State *L) {
  lua_sethook(L, NULL, 0, 0);
  return 0;
}

/* Whether the calling thread has this hook. */
static int l_isset (lua_State *L) {
  lua_pushboolean(L, lua_gethook(L) == noop);
  return 1;
}

static const luaL_Reg funcs[] = {
    {"set", l_set}, {"clear", l_clear}, {"isset", l_isset}, {NULL, NULL}};

LUAMOD_API int luaopen_noophook (lua_State *L) {
  luaL_newlib(L, funcs);
  lua_pushliteral(L, LUA_RELEASE); /* the headers it was built against */
  lua_setfield(L, -2, "release");
  return 1;
}
