/*
** embed.c -- perfmon-embed, a C host that embeds Lua and perfmon.
**
** What a host does with perfmon, end to end: it makes a lua_State, opens
** perfmon's C core from the library it links, loads two plugins into
** sandboxes of their own, each in its own performance group, runs an event
** loop in which every plugin handles every event, and asks perfmon which
** plugin was slow.  The plugins run the same loop, one of them ten times
** as long.  Beside perfmon's figures it prints its own: the thread's CPU
** time around each plugin call.
**
** Built against an installed perfmon (docs/embedding.md):
**   cc embed.c $(pkg-config --cflags --libs perfmon) -o perfmon-embed
** or by CMake with perfmon::perfmon (tests/embed-cmake/CMakeLists.txt).
** require("perfmon") must find perfmon's Lua files: Lua's default path has
** them for the prefix /usr/local; for another, set LUA_PATH_5_4.
*/
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <perfmon.h>

#define EVENTS 20

/* Every plugin's main chunk; its argument is the work of one event. */
static const char plugin_source[] = "local n = ...\n"
                                    "function on_event()\n"
                                    "  local s = 0\n"
                                    "  for i = 1, n do s = s + i % 7 end\n"
                                    "  return s\n"
                                    "end\n";

typedef struct Plugin {
  const char *name;
  lua_Integer work; /* loop iterations per event */
  lua_Integer group; /* its performance group's id */
  double measured_ms; /* CPU time of its calls, by the thread's clock */
} Plugin;

static Plugin plugins[] = {{"spellcheck", 100000, 0, 0},
                           {"indexer", 1000000, 0, 0}};
#define NPLUGINS ((int)(sizeof(plugins) / sizeof(plugins[0])))

/* The stack of pmain: perfmon's table, each plugin's on_event, the
** monitor. */
#define PERFMON 1
#define HANDLERS 2
#define MONITOR (HANDLERS + NPLUGINS)

static double thread_cpu_ms (void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* perfmon_* return a code rather than raise: a host decides what a
** failure means.  Here it ends the run. */
static void check (lua_State *L, int code, const char *what) {
  if (code != PERFMON_OK)
    luaL_error(L, "%s: %s", what, perfmon_strerror(code));
}

/* Loads p into a sandbox of its own (its globals, reading _G's), whose
** functions perfmon charges to p's group, and pushes its on_event. */
static void load_plugin (lua_State *L, Plugin *p) {
  int group, env;
  lua_getfield(L, PERFMON, "group"); /* perfmon.group{ name=, kind= } */
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
  lua_newtable(L); /* env = setmetatable({}, { __index = _G }) */
  env = lua_gettop(L);
  lua_createtable(L, 0, 1);
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, env);
  lua_getfield(L, PERFMON, "load"); /* perfmon.load(src, name, env, group) */
  lua_pushstring(L, plugin_source);
  lua_pushfstring(L, "=%s", p->name);
  lua_pushvalue(L, env);
  lua_pushvalue(L, group);
  lua_call(L, 4, 2);
  if (lua_isnil(L, -2))
    luaL_error(L, "plugin %s: %s", p->name, lua_tostring(L, -1));
  lua_pop(L, 1);
  lua_pushinteger(L, p->work);
  lua_call(L, 1, 0); /* its main chunk defines env.on_event */
  lua_getfield(L, env, "on_event");
  lua_replace(L, group);
  lua_settop(L, group);
}

/* One iteration of the event loop: every plugin handles the event.  A
** plugin's error is reported and the loop goes on. */
static void event (lua_State *L) {
  int i;
  check(L, perfmon_event_begin(L), "perfmon_event_begin");
  for (i = 0; i < NPLUGINS; i++) {
    double t0 = thread_cpu_ms();
    lua_pushvalue(L, HANDLERS + i);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
      fprintf(stderr, "perfmon-embed: %s: %s\n", plugins[i].name,
              lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    plugins[i].measured_ms += thread_cpu_ms() - t0;
  }
  check(L, perfmon_event_end(L), "perfmon_event_end");
}

static double field_ms (lua_State *L, int t, const char *k) {
  double v;
  lua_getfield(L, t, k);
  v = (double)lua_tointeger(L, -1) / 1e3;
  lua_pop(L, 1);
  return v;
}

/* Prints what perfmon charged each plugin, beside the host's own
** measure, and names the plugin perfmon found slowest. */
static void report (lua_State *L) {
  int i, slowest = 0;
  double cpu_ms[NPLUGINS], process_ms;
  lua_getfield(L, MONITOR, "snapshot");
  lua_pushvalue(L, MONITOR);
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "process");
  process_ms = field_ms(L, lua_gettop(L), "cpu_us");
  lua_getfield(L, -2, "groups");
  printf("plugin          cpu ms  ticks  measured ms\n");
  for (i = 0; i < NPLUGINS; i++) {
    lua_geti(L, -1, plugins[i].group);
    cpu_ms[i] = field_ms(L, lua_gettop(L), "cpu_us");
    lua_getfield(L, -1, "ticks");
    printf("%-12s %9.1f %6lld %12.1f\n", plugins[i].name, cpu_ms[i],
           (long long)lua_tointeger(L, -1), plugins[i].measured_ms);
    lua_pop(L, 2);
    if (cpu_ms[i] > cpu_ms[slowest])
      slowest = i;
  }
  printf("perfmon-embed: %s was the slowest: %.1f ms of CPU in %d events "
         "(the whole host: %.1f ms)\n",
         plugins[slowest].name, cpu_ms[slowest], EVENTS, process_ms);
}

static int pmain (lua_State *L) {
  int i;
  /* The core is in this program: opened here, it is the one
     require("perfmon") uses, and no perfmon/core.so is loaded from disk
     (a second copy, which perfmon would refuse). */
  luaL_requiref(L, "perfmon.core", luaopen_perfmon_core, 0);
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "perfmon");
  lua_call(L, 1, 1);
  for (i = 0; i < NPLUGINS; i++)
    load_plugin(L, &plugins[i]);
  /* Monitoring starts with the loop: perfmon.monitor{ "jank", "ticks" } */
  lua_getfield(L, PERFMON, "monitor");
  lua_createtable(L, 2, 0);
  lua_pushliteral(L, "jank");
  lua_rawseti(L, -2, 1);
  lua_pushliteral(L, "ticks");
  lua_rawseti(L, -2, 2);
  lua_call(L, 1, 1);
  printf("perfmon-embed: plugins %s and %s, %d events\n", plugins[0].name,
         plugins[1].name, EVENTS);
  for (i = 0; i < EVENTS; i++)
    event(L);
  report(L);
  return 0;
}

int main (void) {
  int status;
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "perfmon-embed: not enough memory\n");
    return 1;
  }
  luaL_openlibs(L);
  lua_pushcfunction(L, pmain);
  status = lua_pcall(L, 0, 0, 0);
  if (status != LUA_OK)
    fprintf(stderr, "perfmon-embed: %s\n", lua_tostring(L, -1));
  lua_close(L);
  return status == LUA_OK ? 0 : 1;
}
