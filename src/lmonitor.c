/*
** lmonitor.c -- monitors from Lua (lmonitor.h).
*/
#include "lmonitor.h"

#include <string.h>

#include <lauxlib.h>

#include "largs.h"
#include "monitor.h"
#include "sampled.h"
#include "sampler.h"
#include "stopwatch.h"

const char *const pm_probe_names[] = {"jank",   "blocking", "ticks",
                                      "chunks", "memory",   NULL};

/*
** {======================================================
** Monitors
** =======================================================
*/

static unsigned check_probes (lua_State *L, int arg) {
  lua_Integer mask = luaL_checkinteger(L, arg);
  luaL_argcheck(L, mask > 0 && mask < (1 << PM_NPROBES), arg,
                "invalid probe mask");
  return (unsigned)mask;
}

/*
** perfmon.monitor's argument is checked here, and only here: init.lua calls
** core.open protected and raises the error again at its caller's line.
*/
static int monitor_argerror (lua_State *L, const char *msg) {
  return pm_larg_error(L, 1, "perfmon.monitor", msg);
}

/* Pushes "jank, blocking, ...": the probes, for a message. */
static const char *probe_list (lua_State *L) {
  luaL_Buffer b;
  int i;
  luaL_buffinit(L, &b);
  for (i = 0; pm_probe_names[i] != NULL; i++) {
    if (i > 0)
      luaL_addstring(&b, ", ");
    luaL_addstring(&b, pm_probe_names[i]);
  }
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* The index in choices of the probes table's field, or -1 without one;
** anything else is an error naming what was expected. */
static int check_choice (lua_State *L, const char *field,
                         const char *const choices[], const char *expected) {
  int k = 0;
  size_t len;
  const char *s;
  if (lua_getfield(L, 1, field) == LUA_TNIL) {
    lua_pop(L, 1);
    return -1;
  }
  s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  while (s != NULL && choices[k] != NULL &&
         (strlen(choices[k]) != len || memcmp(s, choices[k], len) != 0))
    k++;
  if (s == NULL || choices[k] == NULL)
    monitor_argerror(L, lua_pushfstring(L, "%s %s expected, got %s", field,
                                        expected,
                                        s != NULL ? pm_lpush_quoted(L, -1)
                                                  : luaL_typename(L, -1)));
  lua_pop(L, 1);
  return k;
}

/* The `mode` field of the probes table: 0 exact (the default), 1 sampled. */
static int check_mode (lua_State *L) {
  static const char *const modes[] = {"exact", "sampled", NULL};
  int k = check_choice(L, "mode", modes, "\"exact\" or \"sampled\"");
  return k < 0 ? 0 : k;
}

/* The `timer` field, for a sampled monitor: "cpu" or "tick" (sampled.h). */
static int check_timer (lua_State *L, int sampled) {
  static const char *const timers[] = {"cpu", "tick", NULL};
  int k = check_choice(L, "timer", timers, "\"cpu\" or \"tick\"");
  if (k >= 0 && !sampled)
    monitor_argerror(L, "timer is for a monitor of mode \"sampled\"");
  return k < 0 ? PM_SAMPLED_ANY_TIMER : k == 0 ? PM_TIMER_CPU : PM_TIMER_TICK;
}

/* The `rate_us` field of the probes table, for a sampled monitor: how
** many µs of CPU time between two samples, an integer in
** [PM_RATE_MIN, PM_RATE_MAX] (exported as core.rate_min_us and
** core.rate_max_us, which the plugin watcher checks its option against),
** PM_RATE_DEFAULT without one.  An exact monitor takes none.  Returns 0
** for an exact monitor. */
#define PM_RATE_MIN 100
#define PM_RATE_MAX 1000000
#define PM_RATE_DEFAULT 4000
static uint32_t check_rate (lua_State *L, int sampled) {
  lua_Integer r = 0;
  int isint = 0, number;
  if (lua_getfield(L, 1, "rate_us") == LUA_TNIL) {
    lua_pop(L, 1);
    return sampled ? PM_RATE_DEFAULT : 0;
  }
  if (!sampled)
    monitor_argerror(L, "rate_us is for a monitor of mode \"sampled\"");
  if ((number = lua_type(L, -1) == LUA_TNUMBER))
    r = lua_tointegerx(L, -1, &isint);
  if (!isint || r < PM_RATE_MIN || r > PM_RATE_MAX) {
    const char *got =
        number ? luaL_tolstring(L, -1, NULL) : luaL_typename(L, -1);
    monitor_argerror(L, lua_pushfstring(L,
                                        "rate_us: an integer in [%d, %d] "
                                        "expected, got %s",
                                        PM_RATE_MIN, PM_RATE_MAX, got));
  }
  lua_pop(L, 1);
  return (uint32_t)r;
}

/* The `window_ms` field of the probes table, for a sampled monitor: the
** sample window (stopwatch.h) it opens, for that many ms of wall time,
** below the watcher's bound (core.watch_max_us); 0 without one. */
#define PM_WINDOW_MAX_MS 1e12 /* as the message says */
static double check_window (lua_State *L, int sampled) {
  double ms;
  if (lua_getfield(L, 1, "window_ms") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  if (!sampled)
    monitor_argerror(L, "window_ms is for a monitor of mode \"sampled\"");
  ms = lua_tonumber(L, -1);
  if (lua_type(L, -1) != LUA_TNUMBER || !(ms > 0 && ms < PM_WINDOW_MAX_MS))
    monitor_argerror(
        L, lua_pushfstring(L,
                           "window_ms: a positive number of ms below 1e+12 "
                           "expected, got %s",
                           lua_type(L, -1) == LUA_TNUMBER
                               ? luaL_tolstring(L, -1, NULL)
                               : luaL_typename(L, -1)));
  lua_pop(L, 1);
  return ms;
}

/* core.open(probes) -> mask, rate_us[, window_ms]: takes the probes the
** list names, for a monitor of probes.mode; rate_us is false for an exact
** one.  One windowed monitor at a time: its window's figures are the
** groups' one pm_WindowStats. */
static int l_open (lua_State *L) {
  static const char *const fields[] = {"mode", "rate_us", "window_ms", "timer",
                                       NULL};
  pm_State *S = pm_lstate(L);
  const char *err;
  lua_Integer i;
  unsigned mask = 0;
  uint32_t rate;
  int timer;
  double window;
  if (!lua_istable(L, 1))
    monitor_argerror(L,
                     lua_pushfstring(L, "table of probe names expected, got %s",
                                     luaL_typename(L, 1)));
  for (i = 1; lua_geti(L, 1, i) != LUA_TNIL; i++) {
    int k = 0;
    size_t len;
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *s = lua_tolstring(L, -1, &len);
      while (pm_probe_names[k] != NULL &&
             (strlen(pm_probe_names[k]) != len ||
              memcmp(s, pm_probe_names[k], len) != 0))
        k++;
    }
    if (lua_type(L, -1) != LUA_TSTRING || pm_probe_names[k] == NULL) {
      const char *name = pm_lpush_quoted(L, -1);
      monitor_argerror(L, lua_pushfstring(L,
                                          "unknown probe %s at index %I "
                                          "(probes: %s)",
                                          name, i, probe_list(L)));
    }
    mask |= PM_BIT(k);
    lua_pop(L, 1);
  }
  pm_lcheck_fields(L, "perfmon.monitor", fields, i - 1);
  if (mask == 0)
    monitor_argerror(L, lua_pushfstring(L, "at least one probe expected (%s)",
                                        probe_list(L)));
  rate = check_rate(L, check_mode(L));
  window = check_window(L, rate != 0);
  timer = check_timer(L, rate != 0);
  if (window > 0 && pm_sampled_windowed(S))
    return luaL_error(L, "perfmon: a monitor with window_ms is open already "
                         "(one at a time)");
  if (window > 0)
    pm_sw_window(&S->e, window * 1000);
  if ((err = pm_monitor_open(L, S, mask,
                             rate | (window > 0 ? PM_SAMPLED_WINDOW : 0),
                             timer)) != NULL) {
    pm_sw_window_end(&S->e);
    return luaL_error(L, "perfmon: %s", err);
  }
  lua_pushinteger(L, mask);
  if (rate != 0)
    lua_pushinteger(L, rate);
  else
    lua_pushboolean(L, 0);
  if (window > 0)
    lua_pushnumber(L, window);
  return window > 0 ? 3 : 2;
}

/* core.close(mask, rate_us, window_ms), with what core.open returned: a
** windowed monitor's window ends with it */
static int l_close (lua_State *L) {
  pm_State *S = pm_state_get(L);
  unsigned mask = check_probes(L, 1);
  lua_Integer rate = lua_toboolean(L, 2) ? luaL_checkinteger(L, 2) : 0;
  int windowed = rate != 0 && lua_toboolean(L, 3);
  luaL_argcheck(L, rate >= 0 && rate <= PM_RATE_MAX, 2, "not a rate_us");
  if (S != NULL && (rate != 0 ? S->nsampled : S->exact) > 0) {
    if (windowed)
      pm_sw_window_end(&S->e);
    pm_monitor_close(L, S, mask,
                     (uint32_t)rate | (windowed ? PM_SAMPLED_WINDOW : 0));
  }
  return 0;
}

/* }====================================================== */

static const luaL_Reg monitor_funcs[] = {
    {"open", l_open}, {"close", l_close}, {NULL, NULL}};

void pm_lmonitor_register (lua_State *L) {
  luaL_setfuncs(L, monitor_funcs, 0);
  lua_pushinteger(L, PM_RATE_MIN);
  lua_setfield(L, -2, "rate_min_us");
  lua_pushinteger(L, PM_RATE_MAX);
  lua_setfield(L, -2, "rate_max_us");
}
