/*
** copies.c -- rel-copies: two copies of perfmon's code in one process.
**
**   rel-copies ROOT CPATH TWIN
**
** This program links perfmon, as a C host does (its sources are compiled
** in); CPATH (package.cpath) finds the perfmon/core.so the build made, the
** copy require("perfmon") loads from disk; TWIN is that core.so copied to
** another file name, a third copy.  Each copy has its own statics, so a
** copy's C API cannot reach the perfmon another copy runs.  In fresh
** lua_States:
** 1. one copy: the program's own opened through package.preload; its C
**    API answers PERFMON_OK.
** 2. a program linking one copy while require loads another: monitoring
**    from Lua works, and every C API call of the program's copy returns
**    PERFMON_EOTHERCOPY (not PERFMON_ENOTLOADED: perfmon is loaded), whose
**    message says so; the program's luaopen_perfmon_core raises an error
**    naming both files instead of starting a second perfmon, and the first
**    keeps running: its hook stays, its monitor measures.
** 3. the other way round: the program's copy first, then core.so's
**    luaopen_perfmon_core (package.loadlib) refuses, naming both files;
**    the program's C API still answers PERFMON_OK.
** 4. two .so files: core.so through require, then TWIN's
**    luaopen_perfmon_core refuses, naming both.
** 5. a state perfmon was never loaded in: PERFMON_ENOTLOADED.
** 6. perfmon_strerror: a message of its own for every code, "unknown
**    perfmon error code" for any other int.
** Every state is closed with every byte given back to its allocator.
**
** Exits 0 and prints "rel-copies: ok" when every check passed.
*/
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "driver.h"
#include "perfmon.h"

static const char *root, *cpath, *twin, *program;
static int failures;

static void fail (const char *fmt, ...) {
  va_list ap;
  fputs("rel-copies: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  failures++;
}

/*
** {======================================================
** States and the C API
** =======================================================
*/

/* A state with the program's perfmon in package.preload (rel_newstate)
** and, for the Lua checks, CORE (the core.so require finds through
** CPATH), TWIN, PROGRAM and HOST_OPEN, the program's luaopen_perfmon_core;
** and REFUSED(open, running, this), which asserts that calling open, the
** copy in file `this`, is refused with an error naming both files.
** own: whether require("perfmon") gets the program's copy; if not, the
** preload entry is removed and require loads core.so. */
static lua_State *new_state (rel_Alloc *a, int own) {
  lua_State *L = rel_newstate(a, root);
  lua_getglobal(L, "package");
  lua_pushstring(L, cpath);
  lua_setfield(L, -2, "cpath");
  if (!own) {
    lua_getfield(L, -1, "preload");
    lua_pushnil(L);
    lua_setfield(L, -2, "perfmon.core");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, luaopen_perfmon_core);
  lua_setglobal(L, "HOST_OPEN");
  lua_pushstring(L, twin);
  lua_setglobal(L, "TWIN");
  lua_pushstring(L, program);
  lua_setglobal(L, "PROGRAM");
  if (rel_run(L, "=core",
              "CORE = assert(package.searchpath('perfmon.core', "
              "package.cpath))\n"
              "function REFUSED(open, running, this)\n"
              "  local ok, err = pcall(open)\n"
              "  assert(not ok, this .. ' opened a second perfmon')\n"
              "  assert(err:find('another copy of perfmon (' .. running .. "
              "')', 1, true)\n"
              "    and err:find('this copy (' .. this .. ')', 1, true),\n"
              "    'the error does not name both files: ' .. err)\n"
              "end") != LUA_OK)
    rel_die("core.so not found through %s: %s", cpath, lua_tostring(L, -1));
  return L;
}

static void run (lua_State *L, const char *what, const char *src) {
  if (rel_run(L, what, src) != LUA_OK) {
    fail("%s: %s", what + 1, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

static void close_state (lua_State *L, rel_Alloc *a, const char *what) {
  if (rel_close(L, a, what) != 0)
    failures++;
}

/* Every function of the C API, in an order that is right when perfmon
** runs: each must return want. */
static void api_calls (lua_State *L, int want, const char *what) {
  static const char *const names[] = {
      "perfmon_event_begin",  "perfmon_nested_enter",
      "perfmon_nested_leave", "perfmon_blocking_begin",
      "perfmon_blocking_end", "perfmon_user_input",
      "perfmon_animation(1)", "perfmon_animation(0)",
      "perfmon_event_end",    "perfmon_poll"};
  int rc[10], i;
  double next_ms;
  rc[0] = perfmon_event_begin(L);
  rc[1] = perfmon_nested_enter(L);
  rc[2] = perfmon_nested_leave(L);
  rc[3] = perfmon_blocking_begin(L);
  rc[4] = perfmon_blocking_end(L);
  rc[5] = perfmon_user_input(L);
  rc[6] = perfmon_animation(L, 1);
  rc[7] = perfmon_animation(L, 0);
  rc[8] = perfmon_event_end(L);
  rc[9] = perfmon_poll(L, &next_ms);
  for (i = 0; i < 10; i++)
    if (rc[i] != want)
      fail("%s: %s returned %d (%s), expected %d (%s)", what, names[i], rc[i],
           perfmon_strerror(rc[i]), want, perfmon_strerror(want));
}

/* }====================================================== */

/*
** {======================================================
** The scenarios
** =======================================================
*/

static void one_copy (void) {
  rel_Alloc a;
  lua_State *L = new_state(&a, 1);
  run(L, "=one copy",
      "local perfmon = require('perfmon')\n"
      "assert(package.loaded['perfmon.core'] ~= nil)\n"
      "assert(debug.getregistry()._CLIBS[CORE] == nil,\n"
      "  'core.so was loaded: the program has its own copy')\n"
      "MON = perfmon.monitor{ 'jank', 'ticks' }\n");
  api_calls(L, PERFMON_OK, "one copy");
  close_state(L, &a, "one copy");
}

/* A plugin in its group, an event and the monitor's count of it: the Lua
** side of perfmon at work.  Run twice: before and after the refused
** second copy. */
static const char *const plugin_event =
    "local perfmon = require('perfmon')\n"
    "if not G then\n"
    "  G = perfmon.group{ name = 'p', kind = 'plugin' }\n"
    "  local env = setmetatable({}, { __index = _G })\n"
    "  F = perfmon.load('return function(n) local s = 0 '\n"
    "    .. 'for i = 1, n do s = s + i end return s end', '=p', env, G)()\n"
    "  MON = perfmon.monitor{ 'jank', 'ticks' }\n"
    "  OWNS = require('perfmon.core').owns_hook\n"
    "  assert(OWNS(), 'no hook of perfmon\\'s under a monitor')\n"
    "end\n"
    "local before = MON:snapshot()\n"
    "perfmon.event(F, 1000)\n"
    "local d = MON:snapshot():subtract(before)\n"
    "assert(d.groups[G.id].ticks == 1,\n"
    "  'the plugin was counted ' .. d.groups[G.id].ticks .. ' times, not 1')\n"
    "assert(OWNS(), 'the hook was replaced')\n";

static void program_and_require (void) {
  rel_Alloc a;
  lua_State *L = new_state(&a, 0);
  const char *msg = perfmon_strerror(PERFMON_EOTHERCOPY);
  run(L, "=require loads core.so",
      "require('perfmon')\n"
      "assert(debug.getregistry()._CLIBS[CORE],\n"
      "  'require did not load ' .. CORE)\n");
  run(L, "=Lua side, one copy", plugin_event);
  api_calls(L, PERFMON_EOTHERCOPY, "program and require");
  if (strstr(msg, "another copy") == NULL)
    fail("perfmon_strerror(PERFMON_EOTHERCOPY) does not say why: %s", msg);
  /* the program's copy opened by hand (luaL_requiref would do the same) */
  run(L, "=the program's copy opened second",
      "REFUSED(HOST_OPEN, CORE, PROGRAM)");
  run(L, "=Lua side, the second copy refused", plugin_event);
  api_calls(L, PERFMON_EOTHERCOPY, "program and require, after the refusal");
  close_state(L, &a, "program and require");
}

static void program_first (void) {
  rel_Alloc a;
  lua_State *L = new_state(&a, 1);
  run(L, "=the program's copy, then core.so",
      "require('perfmon')\n"
      "REFUSED(assert(package.loadlib(CORE, 'luaopen_perfmon_core')),\n"
      "        PROGRAM, CORE)");
  run(L, "=Lua side, program first", plugin_event);
  api_calls(L, PERFMON_OK, "program first");
  close_state(L, &a, "program first");
}

static void two_files (void) {
  rel_Alloc a;
  lua_State *L = new_state(&a, 0);
  run(L, "=core.so, then its twin",
      "require('perfmon')\n"
      "REFUSED(assert(package.loadlib(TWIN, 'luaopen_perfmon_core')),\n"
      "        CORE, TWIN)");
  run(L, "=Lua side, two files", plugin_event);
  api_calls(L, PERFMON_EOTHERCOPY, "two files");
  close_state(L, &a, "two files");
}

static void never_loaded (void) {
  rel_Alloc a;
  lua_State *L = rel_newstate(&a, root);
  api_calls(L, PERFMON_ENOTLOADED, "never loaded");
  close_state(L, &a, "never loaded");
}

static void messages (void) {
  static const int codes[] = {PERFMON_OK, PERFMON_ENOTLOADED, PERFMON_EMISUSE,
                              PERFMON_EOTHERCOPY, PERFMON_ELUA};
  static const int others[] = {1, -5, INT_MIN, INT_MAX};
  const char *unknown = "unknown perfmon error code";
  int i, j, n = (int)(sizeof(codes) / sizeof(codes[0]));
  for (i = 0; i < n; i++) {
    const char *m = perfmon_strerror(codes[i]);
    if (m == NULL || m[0] == '\0' || strcmp(m, unknown) == 0)
      fail("perfmon_strerror(%d) has no message of its own", codes[i]);
    else
      for (j = 0; j < i; j++)
        if (strcmp(m, perfmon_strerror(codes[j])) == 0)
          fail("perfmon_strerror(%d) is that of %d", codes[i], codes[j]);
  }
  for (i = 0; i < (int)(sizeof(others) / sizeof(others[0])); i++) {
    const char *m = perfmon_strerror(others[i]);
    if (m == NULL || strcmp(m, unknown) != 0)
      fail("perfmon_strerror(%d): \"%s\"", others[i], m ? m : "(null)");
  }
}

/* }====================================================== */

int main (int argc, char **argv) {
  if (argc != 4)
    rel_die("usage: rel-copies ROOT CPATH TWIN");
  program = argv[0];
  root = argv[1];
  cpath = argv[2];
  twin = argv[3];
  one_copy();
  program_and_require();
  program_first();
  two_files();
  never_loaded();
  messages();
  if (failures > 0)
    rel_die("%d checks failed", failures);
  printf("rel-copies: ok\n");
  return 0;
}
