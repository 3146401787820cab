/*
** state.c -- making, finding and closing the pm_State of a Lua universe.
*/
#include "state.h"

#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "hook.h"
#include "profiler.h"
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

void *pm_alloc (pm_State *S, size_t n) {
  return S->falloc(S->fud, NULL, 0, n);
}

void pm_free (pm_State *S, void *p, size_t n) {
  S->falloc(S->fud, p, n, 0);
}

char *pm_strdup (pm_State *S, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = pm_alloc(S, n);
  if (d != NULL)
    memcpy(d, s, n);
  return d;
}

void pm_strfree (pm_State *S, char *s) {
  if (s != NULL)
    pm_free(S, s, strlen(s) + 1);
}

static int drop_record (uintptr_t v, void *arg) {
  pm_State *S = arg;
  if (PM_TAG(v) == PM_CHUNK)
    pm_chunk_forget(S, PM_PTR(v));
  return 1;
}

/* lua_close: finalizers run before any memory is freed, so perfmon lets go
** of everything here and hands the allocator back before the sweep. */
static int state_gc (lua_State *L) {
  pm_State *S = lua_touserdata(L, 1);
  if (S->closed)
    return 0;
  if (S->profiler != NULL) /* one whose __gc ran and that was restarted */
    pm_profiler_stop(L, S->profiler, 0, PM_PROF_STOPPED);
  pm_hook_close(S);
  pm_map_filter(&S->known, drop_record, S);
  pm_map_free(&S->known, S->falloc, S->fud);
  pm_groups_free(S);
  pm_watch_close(L, S);
  S->closed = 1;
  return 0;
}

/* The C functions perfmon recognises in the hook. */
static void find_coroutine_functions (lua_State *L, pm_State *S) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, LUA_COLIBNAME) == LUA_TTABLE) {
    lua_getfield(L, -1, "resume");
    S->resume_f = lua_tocfunction(L, -1);
    lua_getfield(L, -2, "wrap");
    lua_pushcfunction(L, lua_error); /* any function will do */
    if (lua_pcall(L, 1, 1, 0) == LUA_OK)
      S->wrap_f = lua_tocfunction(L, -1);
    lua_pop(L, 2);
  }
  lua_pop(L, 2);
}

/* The state is anchored, with its finalizer, before anything can be
** allocated for it or the allocator wrapped, and marked closed until it is
** whole: a memory error on the way leaves nothing to tear down and no
** wrapper around the allocator that points at a collected pm_State.  A
** later require makes a new one. */
pm_State *pm_state_open (lua_State *L) {
  pm_State *S = pm_state_get(L);
  int watched;
  if (S != NULL)
    return S;
  pm_clock_init();
  S = lua_newuserdatauv(L, sizeof(*S), 0);
  memset(S, 0, sizeof(*S));
  S->closed = 1;
  lua_newtable(L); /* metatable */
  lua_pushcfunction(L, state_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &state_key);
  S->falloc = lua_getallocf(L, &S->fud);
  S->iter = 1;
  S->period = 1;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  S->main = lua_tothread(L, -1);
  lua_pop(L, 1);
  find_coroutine_functions(L, S);
  pm_hook_choose(L, S);
  watched = pm_watch_open(L, S);
  if (watched < 0)
    luaL_error(L, "not enough memory");
  if (watched == 0) {
    luaL_error(L, "perfmon: this Lua's allocator does not free objects at "
                  "the addresses lua_topointer gives; attribution could not "
                  "be kept safe across garbage collection");
  }
  S->closed = 0;
  return S;
}
