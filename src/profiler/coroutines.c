/*
** coroutines.c -- which coroutine runs, for a profiler without a monitor
** (see coroutines.h).
*/
#include "coroutines.h"

#include <lauxlib.h>
#include <lualib.h>

#include "hook.h"
#include "sample.h"

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

/* Makes co (at index idx of L, or L itself when idx is 0) the coroutine P
** samples, and anchors it there for as long as it is: the signal handler
** sets hooks on P->s.running, so it must not be collected meanwhile, however
** the profiler was stopped and started in between.  Allocates nothing (the
** anchor has the slot); where the stack has no room left, the main thread
** stands in, which is always alive. */
static void set_running (lua_State *L, pm_Profiler *P, int idx) {
  lua_State *co = idx != 0 ? lua_tothread(L, idx) : L;
  if (!lua_checkstack(L, 3)) {
    P->s.running = P->S->main;
    return;
  }
  idx = idx != 0 ? lua_absindex(L, idx) : 0;
  if (pm_sample_running(L) == P &&
      lua_getiuservalue(L, -1, PM_PROF_ANCHOR) == LUA_TTABLE) {
    if (idx != 0)
      lua_pushvalue(L, idx);
    else
      lua_pushthread(L);
    lua_rawseti(L, -2, PM_ANCHOR_THREAD);
    P->s.running = co;
  } else { /* not the running profiler: nothing samples */
    P->s.running = P->S->main;
  }
  lua_pop(L, 2);
}

/* coroutine.resume; upvalues: the original, the pm_State.  The original
** reports the coroutine's errors, but calling it can still raise (C stack
** overflow, memory): a tracked call runs protected, since P->s.running must
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
  if (!S->closed && S->exact > 0)
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

void pm_coroutines_prepare (lua_State *L, pm_State *S, int anchor, int other) {
  int i;
  S->co_f[2] = co_wrapped; /* it resumes, as lcorolib's does */
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

void pm_coroutines_patch (lua_State *L, int anchor) {
  replace(L, anchor, PM_ANCHOR_RESUME, PM_ANCHOR_MY_RESUME);
}

void pm_coroutines_unpatch (lua_State *L, int anchor) {
  replace(L, anchor, PM_ANCHOR_MY_RESUME, PM_ANCHOR_RESUME);
}

/* }====================================================== */
