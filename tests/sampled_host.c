/*
** sampled_host.c -- perfmon-sampled-host: a sampled monitor in a C host.
**
** A host that drives its event loop in C (perfmon_event_begin and
** perfmon_event_end) while a sampled monitor is open: no hook may be set,
** every perfmon_* call must return PERFMON_OK, and perfmon's figures must
** agree with the host's own clock (CLOCK_THREAD_CPUTIME_ID around each
** plugin call and around the loop):
**   - each plugin's CPU time, within the tolerance of sampling;
**   - the process's CPU time, exactly (the markers bracket it);
**   - the heavy plugin's events in its durations histogram.
**
**   perfmon-sampled-host      (ctest capi.sampled)
**
** Exits 0 and prints "perfmon-sampled-host: ok" only then.
*/
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "perfmon.h"

#define EVENTS 150
#define TOLERANCE 0.25 /* sampling: a share within a few samples */
#define SLACK_MS 12.0 /* three samples' worth at HZ=250 */

/* A plugin's main chunk: on_event spins for ms of its own CPU time. */
static const char plugin_source[] = "local ms = ...\n"
                                    "function on_event()\n"
                                    "  local t = os.clock() + ms / 1000\n"
                                    "  while os.clock() < t do end\n"
                                    "end\n";

typedef struct Plugin {
  const char *name;
  double ms; /* its work in one event */
  lua_Integer group; /* its group's id */
  double measured_ms; /* CPU time of its calls, by the thread's clock */
} Plugin;

static Plugin plugins[] = {{"heavy", 12, 0, 0}, {"light", 1, 0, 0}};
#define NPLUGINS ((int)(sizeof(plugins) / sizeof(plugins[0])))

/* pmain's stack: perfmon, each plugin's on_event, the monitor */
#define PERFMON 1
#define HANDLERS 2
#define MONITOR (HANDLERS + NPLUGINS)

static int failures;

static void fail (const char *what, double got, double want) {
  fprintf(stderr, "perfmon-sampled-host: %s: %.1f, expected %.1f\n", what, got,
          want);
  failures++;
}

static void near (const char *what, double got, double want, double rel,
                  double slack) {
  if (got < want * (1 - rel) - slack || got > want * (1 + rel) + slack)
    fail(what, got, want);
}

static double thread_cpu_ms (void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void check (lua_State *L, int code, const char *what) {
  if (code != PERFMON_OK)
    luaL_error(L, "%s: %s", what, perfmon_strerror(code));
}

/* Loads p into its own sandbox and group, and pushes its on_event. */
static void load_plugin (lua_State *L, Plugin *p) {
  int group, env;
  lua_getfield(L, PERFMON, "group");
  lua_createtable(L, 0, 2);
  lua_pushstring(L, p->name);
  lua_setfield(L, -2, "name");
  lua_pushliteral(L, "plugin");
  lua_setfield(L, -2, "kind");
  lua_call(L, 1, 1);
  group = lua_gettop(L);
  lua_getfield(L, group, "id");
  p->group = lua_tointeger(L, -1);
  lua_pop(L, 1);
  lua_newtable(L);
  env = lua_gettop(L);
  lua_createtable(L, 0, 1);
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, env);
  lua_getfield(L, PERFMON, "load");
  lua_pushstring(L, plugin_source);
  lua_pushfstring(L, "=%s", p->name);
  lua_pushvalue(L, env);
  lua_pushvalue(L, group);
  lua_call(L, 4, 2);
  if (lua_isnil(L, -2))
    luaL_error(L, "plugin %s: %s", p->name, lua_tostring(L, -1));
  lua_pop(L, 1);
  lua_pushnumber(L, p->ms);
  lua_call(L, 1, 0);
  lua_getfield(L, env, "on_event");
  lua_replace(L, group);
  lua_settop(L, group);
}

/* A number field of the table on the top, or -1 */
static double number (lua_State *L, const char *k) {
  double v;
  lua_getfield(L, -1, k);
  v = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : -1;
  lua_pop(L, 1);
  return v;
}

static void checks (lua_State *L, double loop_ms) {
  int i;
  lua_getfield(L, MONITOR, "snapshot");
  lua_pushvalue(L, MONITOR);
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "process");
  near("the process's cpu_us (ms)", number(L, "cpu_us") / 1e3, loop_ms, 0.05,
       2);
  if (number(L, "events") != EVENTS)
    fail("the process's events", number(L, "events"), EVENTS);
  lua_pop(L, 1);
  lua_getfield(L, -1, "groups");
  for (i = 0; i < NPLUGINS; i++) {
    lua_geti(L, -1, plugins[i].group);
    if (!lua_istable(L, -1)) {
      fail(plugins[i].name, 0, plugins[i].measured_ms);
    } else {
      near(plugins[i].name, number(L, "cpu_us") / 1e3, plugins[i].measured_ms,
           TOLERANCE, SLACK_MS);
      if (i == 0) { /* durations[4]: its events of 8 ms or more */
        lua_getfield(L, -1, "durations");
        lua_geti(L, -1, 4);
        if (lua_tonumber(L, -1) < 0.9 * EVENTS)
          fail("heavy's events of 8 ms or more", lua_tonumber(L, -1), EVENTS);
        lua_pop(L, 2);
      }
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
}

static int pmain (lua_State *L) {
  int e, i;
  double loop_ms;
  luaL_requiref(L, "perfmon.core", luaopen_perfmon_core, 0);
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "perfmon");
  lua_call(L, 1, 1);
  for (i = 0; i < NPLUGINS; i++)
    load_plugin(L, &plugins[i]);
  /* perfmon.monitor{ "jank", mode = "sampled" } */
  lua_getfield(L, PERFMON, "monitor");
  lua_createtable(L, 1, 1);
  lua_pushliteral(L, "jank");
  lua_rawseti(L, -2, 1);
  lua_pushliteral(L, "sampled");
  lua_setfield(L, -2, "mode");
  lua_call(L, 1, 1);
  if (lua_gethook(L) != NULL)
    fail("a hook set by a sampled monitor", 1, 0);
  loop_ms = thread_cpu_ms();
  for (e = 0; e < EVENTS; e++) {
    check(L, perfmon_event_begin(L), "perfmon_event_begin");
    for (i = 0; i < NPLUGINS; i++) {
      double t0 = thread_cpu_ms();
      lua_pushvalue(L, HANDLERS + i);
      lua_call(L, 0, 0);
      plugins[i].measured_ms += thread_cpu_ms() - t0;
    }
    check(L, perfmon_event_end(L), "perfmon_event_end");
  }
  loop_ms = thread_cpu_ms() - loop_ms;
  checks(L, loop_ms);
  printf("perfmon-sampled-host: heavy %.1f ms, light %.1f ms, loop %.1f ms "
         "by the host's clock\n",
         plugins[0].measured_ms, plugins[1].measured_ms, loop_ms);
  return 0;
}

int main (void) {
  int status;
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "perfmon-sampled-host: not enough memory\n");
    return 1;
  }
  luaL_openlibs(L);
  lua_pushcfunction(L, pmain);
  status = lua_pcall(L, 0, 0, 0);
  if (status != LUA_OK) {
    fprintf(stderr, "perfmon-sampled-host: %s\n", lua_tostring(L, -1));
    failures++;
  }
  lua_close(L);
  if (failures == 0)
    printf("perfmon-sampled-host: ok\n");
  return failures == 0 ? 0 : 1;
}
