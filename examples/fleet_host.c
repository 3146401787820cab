/*
** fleet_host.c -- perfmon-fleet, a C host with a Lua state per thread.
**
**   perfmon-fleet ROOT
**
** Four worker threads each make a lua_State, load the same two plugins
** ("spell", ten times the work of "lint") in groups of their own, run
** events through the C API and publish their totals on the process's board
** every few events (perfmon_fleet_publish), then close their state.
** Meanwhile the main thread reads the merged view over and over
** (perfmon_fleet_json) from a state of its own, while the workers run: the
** board is the one thing the states share (run under ThreadSanitizer by
** ctest tsan.fleet).  At the end it checks, in Lua, that every worker's
** entry is there and closed, and that each plugin's merged figures are the
** sum of the per-state ones; it prints both and "perfmon-fleet: ok".
** ROOT is the repository (perfmon's Lua files are under ROOT/lua).
*/
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "perfmon.h"

#define WORKERS 4
#define EVENTS 40
#define PUBLISH_EVERY 5

static const char *root;

/* A state with the standard libraries, perfmon's C core from this program
** and its Lua files from root. */
static lua_State *new_state (void) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "perfmon-fleet: not enough memory\n");
    exit(1);
  }
  luaL_openlibs(L);
  luaL_requiref(L, "perfmon.core", luaopen_perfmon_core, 0);
  lua_pop(L, 1);
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;", root, root);
  lua_getfield(L, -2, "path");
  lua_concat(L, 2);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  return L;
}

/* Runs src with one string argument; exits on error. */
static void run (lua_State *L, const char *src, const char *arg, int nres) {
  if (luaL_loadstring(L, src) != LUA_OK) {
    fprintf(stderr, "perfmon-fleet: %s\n", lua_tostring(L, -1));
    exit(1);
  }
  lua_pushstring(L, arg);
  if (lua_pcall(L, 1, nres, 0) != LUA_OK) {
    fprintf(stderr, "perfmon-fleet: %s\n", lua_tostring(L, -1));
    exit(1);
  }
}

static void check (int rc, const char *what) {
  if (rc != PERFMON_OK) {
    fprintf(stderr, "perfmon-fleet: %s: %s\n", what, perfmon_strerror(rc));
    exit(1);
  }
}

/* The plugins, and the handlers the loop calls: global HANDLERS. */
static const char setup[] =
    "local label = ...\n"
    "local perfmon = require('perfmon')\n"
    "HANDLERS = {}\n"
    "for _, p in ipairs{ { 'spell', 200000 }, { 'lint', 20000 } } do\n"
    "  local g = perfmon.group{ name = p[1], kind = 'plugin' }\n"
    "  local env = setmetatable({}, { __index = _G })\n"
    "  assert(perfmon.load('local n = ...\\n'\n"
    "    .. 'function on_event() local s = 0 for i = 1, n do s = s + i % 7 "
    "end return s end',\n"
    "    '=' .. p[1], env, g))(p[2])\n"
    "  HANDLERS[#HANDLERS + 1] = env.on_event\n"
    "end\n"
    "MONITOR = perfmon.monitor{ 'jank', 'ticks' }\n";

static void *worker (void *arg) {
  const char *label = arg;
  lua_State *L = new_state();
  int i;
  run(L, setup, label, 0);
  for (i = 1; i <= EVENTS; i++) {
    check(perfmon_event_begin(L), "event_begin");
    run(L, "for _, h in ipairs(HANDLERS) do h() end", label, 0);
    check(perfmon_event_end(L), "event_end");
    if (i % PUBLISH_EVERY == 0)
      check(perfmon_fleet_publish(L, label), "fleet_publish");
  }
  lua_close(L); /* its last totals stay on the board */
  return NULL;
}

/* Every worker's entry, closed; each plugin merged = the sum of the
** states'. */
static const char verify[] =
    "local workers = tonumber(...)\n"
    "local fleet = require('perfmon.fleet')\n"
    "local states, merged = fleet.states(), fleet.snapshot()\n"
    "assert(#states == workers, #states .. ' states on the board')\n"
    "local function find(snap, name)\n"
    "  for _, st in pairs(snap.groups) do\n"
    "    if st.name == name then return st end\n"
    "  end\n"
    "  error('no group ' .. name)\n"
    "end\n"
    "for _, name in ipairs{ 'spell', 'lint' } do\n"
    "  local sum = { cpu_us = 0, self_us = 0, ticks = 0, events = 0 }\n"
    "  for _, s in ipairs(states) do\n"
    "    assert(s.closed, s.label .. ' is not closed')\n"
    "    local st = find(s.snapshot, name)\n"
    "    assert(st.ticks > 0, s.label .. ': ' .. name .. ' never ran')\n"
    "    print(('%-9s %-6s %8.1f ms %4d ticks'):format(s.label, name,\n"
    "      st.cpu_us / 1000, st.ticks))\n"
    "    for f in pairs(sum) do sum[f] = sum[f] + st[f] end\n"
    "  end\n"
    "  local m = find(merged, name)\n"
    "  print(('%-9s %-6s %8.1f ms %4d ticks'):format('merged', name,\n"
    "    m.cpu_us / 1000, m.ticks))\n"
    "  for f, v in pairs(sum) do\n"
    "    assert(m[f] == v, ('%s.%s: merged %d, states %d'):format(name, f, "
    "m[f], v))\n"
    "  end\n"
    "end\n"
    "assert(find(merged, 'spell').cpu_us > find(merged, 'lint').cpu_us)\n";

int main (int argc, char **argv) {
  static const char *labels[WORKERS] = {"worker 1", "worker 2", "worker 3",
                                        "worker 4"};
  pthread_t threads[WORKERS];
  lua_State *R;
  int i, reads = 0;
  if (argc != 2) {
    fprintf(stderr, "usage: perfmon-fleet ROOT\n");
    return 2;
  }
  root = argv[1];
  R = new_state();
  run(R, "require('perfmon')", "", 0);
  for (i = 0; i < WORKERS; i++)
    if (pthread_create(&threads[i], NULL, worker, (void *)labels[i]) != 0) {
      fprintf(stderr, "perfmon-fleet: cannot start a thread\n");
      return 1;
    }
  /* the merged view, read while the workers run */
  for (reads = 0; reads < 200; reads++) {
    check(perfmon_fleet_json(R), "fleet_json");
    lua_pop(R, 1);
  }
  for (i = 0; i < WORKERS; i++)
    pthread_join(threads[i], NULL);
  lua_pushinteger(R, WORKERS);
  run(R, verify, lua_tostring(R, -1), 0);
  lua_pop(R, 1);
  check(perfmon_fleet_json(R), "fleet_json");
  printf("merged JSON: %d bytes, read %d times while the workers ran\n",
         (int)lua_rawlen(R, -1), reads);
  lua_close(R);
  printf("perfmon-fleet: ok\n");
  return 0;
}
