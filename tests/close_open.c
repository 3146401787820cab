/*
** close_open.c -- rel-close: lua_close while perfmon is in the middle of
** things.
**
**   rel-close ROOT
**
** Each scenario runs in a fresh lua_State and leaves perfmon busy: monitors
** open, an event or nested loops open, a blocking call declared, coroutines
** suspended deep inside plugin code, a shadow stack grown by a deep
** recursion, finalizers that call perfmon while the state is being closed
** (before and after perfmon's own finalizer has run), the C API called from
** such finalizers, and lua_close given a coroutine instead of the main
** thread.  Then lua_close.  The driver checks that every byte went back to
** the allocator and that perfmon's C API said what it should; run under
** AddressSanitizer (asan.close) or valgrind (valgrind.close), any invalid
** access is reported too.
**
** Exits 0 and prints "rel-close: ok" when every scenario passed.
*/
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "driver.h"
#include "perfmon.h"

static const char *root;
static int failures;

/* host.mark(): the C API from Lua, as a host's finalizer would call it.
** While the state closes, perfmon may already be gone: PERFMON_ENOTLOADED
** is then the answer, never a crash. */
static int host_mark (lua_State *L) {
  int r1 = perfmon_event_begin(L), r2 = perfmon_event_end(L);
  int r3 = perfmon_blocking_begin(L), r4 = perfmon_blocking_end(L);
  int rs[4], i;
  rs[0] = r1, rs[1] = r2, rs[2] = r3, rs[3] = r4;
  for (i = 0; i < 4; i++)
    if (rs[i] != PERFMON_OK && rs[i] != PERFMON_ENOTLOADED &&
        rs[i] != PERFMON_EMISUSE) {
      fprintf(stderr, "rel-close: perfmon C API returned %d\n", rs[i]);
      failures++;
    }
  lua_pushinteger(L, r1);
  return 1;
}

/* Plugins shared by the scenarios: PLUGIN(name) makes a plugin group and
** returns its api table. */
static const char *const prelude =
    "perfmon = require('perfmon')\n"
    "local SRC = [[\n"
    "  local api = {}\n"
    "  local function spin(n) local s = 0 for i = 1, n do s = s + i end "
    "return s end\n"
    "  function api.deep(n, f) if n == 0 then return f() end "
    "return (api.deep(n - 1, f)) end\n"
    "  function api.gen(n) for i = 1, n do coroutine.yield(spin(i)) end end\n"
    "  function api.wrap(n) return coroutine.wrap(function() "
    "api.deep(n, coroutine.yield) end) end\n"
    "  function api.spin(n) return spin(n) end\n"
    "  function api.fail() api.deep(5, function() error('boom') end) end\n"
    "  return api\n"
    "]]\n"
    "local n = 0\n"
    "function PLUGIN(name)\n"
    "  n = n + 1\n"
    "  local g = perfmon.group{ name = name, kind = 'plugin' }\n"
    "  local env = setmetatable({}, { __index = _G })\n"
    "  return perfmon.load(SRC, '=' .. name .. n, env, g)(), g\n"
    "end\n"
    "KEEP = {}\n";

typedef struct Scenario {
  const char *name;
  const char *src;
  int from_coroutine; /* lua_close(KEEP.co's thread) */
} Scenario;

static const Scenario scenarios[] = {
    {"monitor open",
     "local a = PLUGIN('a')\n"
     "KEEP.m = perfmon.monitor{ 'jank', 'ticks', 'blocking', 'chunks' }\n"
     "perfmon.event(a.spin, 1000)\n",
     0},
    {"two monitors, one closed",
     "local a = PLUGIN('a')\n"
     "KEEP.m1 = perfmon.monitor{ 'jank' }\n"
     "local m2 = perfmon.monitor{ 'ticks' }\n"
     "a.spin(10) m2:close()\n"
     "KEEP.m3 = perfmon.monitor{ 'chunks' }\n",
     0},
    {"event, nested loops and a blocking call open",
     "local a = PLUGIN('a')\n"
     "KEEP.m = perfmon.monitor{ 'jank', 'blocking' }\n"
     "local core = require('perfmon.core')\n"
     "perfmon.event_begin() a.spin(100)\n"
     "for _ = 1, 3 do core.nested_enter() a.spin(10) "
     "perfmon.event_begin() end\n"
     "core.blocking_begin()\n",
     0},
    {"coroutines suspended in plugin code",
     "local a, b = PLUGIN('a'), PLUGIN('b')\n"
     "KEEP.m = perfmon.monitor{ 'jank', 'ticks' }\n"
     "KEEP.cos = {}\n"
     "for i = 1, 20 do\n"
     "  local co = coroutine.create(i % 2 == 0 and a.gen or b.gen)\n"
     "  coroutine.resume(co, 5)\n"
     "  KEEP.cos[i] = co\n"
     "  local w = a.wrap(i) w() KEEP.cos[#KEEP.cos + 1] = w\n"
     "end\n"
     "KEEP.inev = coroutine.create(function() perfmon.event(a.deep, 10, "
     "coroutine.yield) end)\n"
     "coroutine.resume(KEEP.inev)\n"
     "KEEP.dead = coroutine.create(a.fail) coroutine.resume(KEEP.dead)\n",
     0},
    {"a deep shadow stack",
     "local a = PLUGIN('a')\n"
     "KEEP.m = perfmon.monitor{ 'jank' }\n"
     "pcall(a.deep, 150000, function() error('deep') end)\n"
     "KEEP.co = coroutine.create(a.deep)\n"
     "coroutine.resume(KEEP.co, 10000, coroutine.yield)\n",
     0},
    {"stack overflow while monitored",
     "local a = PLUGIN('a')\n"
     "KEEP.m = perfmon.monitor{ 'jank', 'ticks' }\n"
     "local function inf(n) return 1 + inf(n + 1) end\n"
     "assert(not pcall(a.deep, 10, function() return inf(1) end))\n"
     "assert(not pcall(a.deep, 1e7, function() end))\n",
     0},
    {"finalizers call perfmon as the state closes",
     /* objects made before and after the monitor: finalizers run in the
        reverse order of their marking, so some run before perfmon's own
        finalizer and some after it */
     "local a = PLUGIN('a')\n"
     "local function fin()\n"
     "  pcall(function() KEEP.m:snapshot() end)\n"
     "  pcall(perfmon.event, a.spin, 100)\n"
     "  pcall(perfmon.monitor, { 'ticks' })\n"
     "  pcall(PLUGIN, 'late')\n"
     "  pcall(perfmon.info)\n"
     "  local co = coroutine.wrap(a.gen) pcall(co, 3)\n"
     "  host.mark()\n"
     "end\n"
     "for i = 1, 5 do KEEP[#KEEP + 1] = setmetatable({}, { __gc = fin }) "
     "end\n"
     "KEEP.m = perfmon.monitor{ 'jank', 'ticks' }\n"
     "for i = 1, 5 do KEEP[#KEEP + 1] = setmetatable({}, { __gc = fin }) "
     "end\n",
     0},
    {"lua_close given a suspended coroutine",
     "local a = PLUGIN('a')\n"
     "KEEP.m = perfmon.monitor{ 'jank', 'ticks' }\n"
     "KEEP.co = coroutine.create(a.gen)\n"
     "coroutine.resume(KEEP.co, 5)\n",
     1},
    {"monitors opened and closed many times",
     "local a = PLUGIN('a')\n"
     "for i = 1, 50 do local m <close> = perfmon.monitor{ 'jank', 'chunks' } "
     "perfmon.event(a.spin, 10) local p = PLUGIN('p') p.spin(1) end\n"
     "KEEP.m = perfmon.monitor{ 'ticks' }\n",
     0},
};

static void run (const Scenario *sc) {
  rel_Alloc a;
  lua_State *L = rel_newstate(&a, root), *victim = L;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, host_mark);
  lua_setfield(L, -2, "mark");
  lua_setglobal(L, "host");
  if (rel_run(L, "=prelude", prelude) != LUA_OK ||
      rel_run(L, sc->name, sc->src) != LUA_OK) {
    fprintf(stderr, "rel-close: %s: %s\n", sc->name, lua_tostring(L, -1));
    failures++;
  }
  if (sc->from_coroutine) {
    lua_getglobal(L, "KEEP");
    lua_getfield(L, -1, "co");
    victim = lua_tothread(L, -1);
    lua_pop(L, 2);
    if (victim == NULL) {
      fprintf(stderr, "rel-close: %s: no coroutine\n", sc->name);
      failures++;
      victim = L;
    }
  }
  if (rel_close(victim, &a, sc->name) != 0)
    failures++;
}

int main (int argc, char **argv) {
  size_t i, n = sizeof(scenarios) / sizeof(scenarios[0]);
  if (argc < 2)
    rel_die("usage: rel-close ROOT");
  root = argv[1];
  for (i = 0; i < n; i++) {
    run(&scenarios[i]);
    printf("rel-close: %s: closed\n", scenarios[i].name);
  }
  if (failures > 0)
    rel_die("%d failures", failures);
  printf("rel-close: ok\n");
  return 0;
}
