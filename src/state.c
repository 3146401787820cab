/*
** state.c -- making and finding the pm_State of a Lua universe (luaopen
** opens it and lua_close closes it: lperfmon.c).
*/
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* dladdr */
#endif

#include "state.h"

#include <string.h>
#if defined(__linux__)
#include <dlfcn.h>
#endif

#include <lauxlib.h>
#include <lualib.h>

#include "watch.h"

static const char state_key = 'S'; /* its address keys the registry */

pm_State *pm_state_get (lua_State *L) {
  pm_State *S = pm_watch_state(L);
  if (S == NULL) { /* not wrapped (yet, or the check failed), or closing */
    lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key);
    S = lua_touserdata(L, -1);
    lua_pop(L, 1);
  }
  return (S != NULL && !S->closed) ? S : NULL;
}

/*
** {======================================================
** One copy of perfmon per Lua state
** =======================================================
*/

/* Two copies of perfmon's code in one process (a host linking perfmon
** while require loads core.so, or two differently named core.so files)
** each have their own state_key, and neither finds the other's pm_State.
** So the registry also holds, under a name every copy knows, the address
** of the state_key of the copy that owns the state: a copy that finds no
** state of its own tells "never loaded" from "loaded by another copy". */
#define STATE_MARK "perfmon.state"

static int is_mark_name (lua_State *L, int idx) {
  size_t len;
  const char *s;
  if (lua_type(L, idx) != LUA_TSTRING)
    return 0;
  s = lua_tolstring(L, idx, &len);
  return len == sizeof(STATE_MARK) - 1 && memcmp(s, STATE_MARK, len) == 0;
}

/* The mark, found without making its name: a lookup by name may allocate
** the string, and the C API must not raise.  NULL when no copy owns the
** state (or one is still making it). */
static const void *find_mark (lua_State *L) {
  const void *owner = NULL;
  if (!lua_checkstack(L, 2)) /* which never raises */
    return NULL;
  lua_pushnil(L);
  while (lua_next(L, LUA_REGISTRYINDEX)) {
    if (is_mark_name(L, -2)) {
      owner = lua_touserdata(L, -1);
      lua_pop(L, 2);
      break;
    }
    lua_pop(L, 1);
  }
  return owner;
}

const void *pm_state_other (lua_State *L) {
  const void *owner = find_mark(L);
  return owner != &state_key ? owner : NULL;
}

/* The file a copy of perfmon was loaded from, by the address of its key:
** the host program, or a core.so. */
static const char *copy_file (const void *key) {
#if defined(__linux__)
  Dl_info info;
  if (dladdr(key, &info) != 0 && info.dli_fname != NULL &&
      info.dli_fname[0] != '\0')
    return info.dli_fname;
#endif
  (void)key;
  return "an unknown file";
}

/* A second copy makes no second pm_State: its hook would take the first
** one's place on every thread it sees, and the two would each lose what
** the other measures.  The error names both files. */
static void refuse_second_copy (lua_State *L, const void *owner) {
  luaL_error(L,
             "perfmon: another copy of perfmon (%s) already runs in this "
             "lua_State; this copy (%s) will not start a second one: load "
             "perfmon.core from one file only, and link a C host against "
             "the library that require loads",
             copy_file(owner), copy_file(&state_key));
}

/* The slot is claimed (false) before anything is made, so that setting the
** mark once the state is whole finds its name interned and its slot in
** the registry: that cannot fail, and a state that failed on the way is
** marked as nobody's. */
static void claim_mark (lua_State *L) {
  lua_pushboolean(L, 0);
  lua_setfield(L, LUA_REGISTRYINDEX, STATE_MARK);
}

static void set_mark (lua_State *L) {
  lua_pushlightuserdata(L, (void *)&state_key);
  lua_setfield(L, LUA_REGISTRYINDEX, STATE_MARK);
}

/* }====================================================== */

/* The C functions perfmon recognises in the hook. */
static void find_coroutine_functions (lua_State *L, pm_State *S) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, LUA_COLIBNAME) == LUA_TTABLE) {
    lua_getfield(L, -1, "resume");
    S->co_f[0] = lua_tocfunction(L, -1);
    lua_getfield(L, -2, "wrap");
    lua_pushcfunction(L, lua_error); /* any function will do */
    if (lua_pcall(L, 1, 1, 0) == LUA_OK)
      S->co_f[1] = lua_tocfunction(L, -1);
    lua_pop(L, 2);
  }
  lua_pop(L, 2);
}

/* The state is anchored, with its finalizer, before anything can be
** allocated for it or the allocator wrapped, and marked closed until it is
** whole (pm_state_ready): a memory error on the way leaves nothing to tear
** down and no wrapper around the allocator that points at a collected
** pm_State.  A later require makes a new one. */
pm_State *pm_state_new (lua_State *L, lua_CFunction close) {
  pm_State *S;
  void *ud;
  lua_Alloc f;
  const void *other = pm_state_other(L);
  if (other != NULL)
    refuse_second_copy(L, other);
  claim_mark(L);
  pm_clock_init();
  S = lua_newuserdatauv(L, sizeof(*S), 0);
  memset(S, 0, sizeof(*S));
  S->closed = 1;
  lua_newtable(L); /* metatable */
  lua_pushcfunction(L, close);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &state_key);
  f = lua_getallocf(L, &ud);
  pm_engine_init(&S->e, f, ud);
  pm_ctx_init(&S->e);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  S->main = lua_tothread(L, -1);
  lua_pop(L, 1);
  find_coroutine_functions(L, S);
  return S;
}

void pm_state_ready (lua_State *L, pm_State *S) {
  S->closed = 0;
  set_mark(L);
}
