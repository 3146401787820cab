/*
** lmonitor.c -- monitors from Lua (lmonitor.h).
*/
#include "lmonitor.h"

#include <string.h>

#include <lauxlib.h>

#include "largs.h"
#include "monitor.h"

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

/* The `mode` field of the probes table: 0 exact (the default), 1 sampled. */
static int check_mode (lua_State *L) {
  static const char *const modes[] = {"exact", "sampled", NULL};
  int k = 0;
  size_t len;
  const char *s;
  if (lua_getfield(L, 1, "mode") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  while (s != NULL && modes[k] != NULL &&
         (strlen(modes[k]) != len || memcmp(s, modes[k], len) != 0))
    k++;
  if (s == NULL || modes[k] == NULL)
    monitor_argerror(
        L, lua_pushfstring(L, "mode \"exact\" or \"sampled\" expected, got %s",
                           s != NULL ? pm_lpush_quoted(L, -1)
                                     : luaL_typename(L, -1)));
  lua_pop(L, 1);
  return k;
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

/* core.open(probes) -> mask, rate_us: takes the probes the list names, for
** a monitor of probes.mode; rate_us is false for an exact one */
static int l_open (lua_State *L) {
  static const char *const fields[] = {"mode", "rate_us", NULL};
  pm_State *S = pm_lstate(L);
  const char *err;
  lua_Integer i;
  unsigned mask = 0;
  uint32_t rate;
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
  if ((err = pm_monitor_open(L, S, mask, rate)) != NULL)
    return luaL_error(L, "perfmon: %s", err);
  lua_pushinteger(L, mask);
  if (rate != 0)
    lua_pushinteger(L, rate);
  else
    lua_pushboolean(L, 0);
  return 2;
}

/* core.close(mask, rate_us), with what core.open returned */
static int l_close (lua_State *L) {
  pm_State *S = pm_state_get(L);
  unsigned mask = check_probes(L, 1);
  lua_Integer rate = lua_toboolean(L, 2) ? luaL_checkinteger(L, 2) : 0;
  luaL_argcheck(L, rate >= 0 && rate <= PM_RATE_MAX, 2, "not a rate_us");
  if (S != NULL)
    pm_monitor_close(L, S, mask, (uint32_t)rate);
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
