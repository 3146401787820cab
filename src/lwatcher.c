/*
** lwatcher.c -- the watcher's alerts from Lua (lwatcher.h).
*/
#include "lwatcher.h"

#include <lauxlib.h>

#include "alert.h"
#include "lalert.h"
#include "largs.h"
#include "perfmon.h"

/*
** {======================================================
** Alerts (lua/perfmon/watcher.lua)
** =======================================================
*/

/* The bound of the watcher's thresholds and input window, in µs (1e15: 31
** years; the wall clock minus an input window stays exact in a double).
** It is exported as core.watch_max_us, which watcher.configure checks its
** settings against: what configure accepts, watch accepts. */
#define PM_WATCH_MAX_US 1e15

static double check_us (lua_State *L, int arg) {
  lua_Number v = luaL_checknumber(L, arg);
  luaL_argcheck(L, v >= 0 && v < PM_WATCH_MAX_US, arg,
                "must be a number of µs in [0, 1e15)");
  return (double)v;
}

/* core.watch(dispatcher, jank_us, blocking_us, input_window_us
** [, inclusive]): jank on self time, or on inclusive time when inclusive
** is true; core.watch(nil) stops detecting alerts. */
static int l_watch (lua_State *L) {
  pm_State *S = pm_lstate(L);
  if (lua_isnil(L, 1)) {
    pm_alert_watch(L, S, 1, 0, 0, 0, 0);
    return 0;
  }
  luaL_checktype(L, 1, LUA_TFUNCTION);
  pm_alert_watch(L, S, 1, check_us(L, 2), check_us(L, 3), check_us(L, 4),
                 lua_toboolean(L, 5));
  return 0;
}

/* core.alerts() -> { {source = ..., details = ...}, ... } */
static int l_alerts (lua_State *L) {
  pm_alert_take(L, pm_lstate(L));
  return 1;
}

/* core.deliver() -> ms until the dispatcher wants its next call, or nil
** when nothing waits: calls the dispatcher now, unless inside an event,
** as perfmon_poll, which also frees the groups that died */
static int l_deliver (lua_State *L) {
  double next_ms;
  pm_lstate(L); /* the state is not closing */
  perfmon_poll(L, &next_ms);
  if (next_ms < 0)
    lua_pushnil(L);
  else
    lua_pushnumber(L, next_ms);
  return 1;
}

static int l_user_input (lua_State *L) {
  pm_alert_input(&pm_lstate(L)->e);
  return 0;
}

static int l_animation (lua_State *L) {
  pm_lcheck_type(L, 1, "perfmon.animation", LUA_TBOOLEAN);
  pm_alert_animation(&pm_lstate(L)->e, lua_toboolean(L, 1));
  return 0;
}

static const luaL_Reg watcher_funcs[] = {
    {"watch", l_watch},         {"alerts", l_alerts},
    {"deliver", l_deliver},     {"user_input", l_user_input},
    {"animation", l_animation}, {NULL, NULL}};

void pm_lwatcher_register (lua_State *L) {
  luaL_setfuncs(L, watcher_funcs, 0);
  lua_pushnumber(L, PM_WATCH_MAX_US);
  lua_setfield(L, -2, "watch_max_us");
}
