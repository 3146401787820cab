/*
** xl_test.c -- lite-xl.native: perfmon's native build for Lite XL
** (src/xl/api.h) opened as Lite XL's loader opens it.
**
**   xl-test PERFMON_SO LUA_DIR
**
** Lite XL's loader calls luaopen_lite_xl_perfmon(L, XL), XL giving the
** address of each Lua API function by name.  Here XL is this program's
** own Lua (dlsym), less one function at a time: for each function of
** api.h's list, left out, the entry point must raise an error naming it
** (luaL_error left out, it cannot raise: it must return no value, which
** Lite XL reports, rather than crash).  Then with every function given:
** each was asked for, the core opens, and perfmon (LUA_DIR's modules over
** that core) charges a busy chunk its time (within spec/support/truth.lua's
** 25% + 3 ms of os.clock), on the path the start-up checks chose.  The library exports the entry point alone.
**
** Exits 0 and prints "xl-test: ok" when all of it held.
*/
#define _GNU_SOURCE /* RTLD_DEFAULT */
#define PM_XL_NO_RENAME
#include "xl/api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <lualib.h>

typedef int (*pm_Entry)(lua_State *L, void *(*XL)(const char *name));

static const char *const functions[] = {
#define PM_XL_NAME(f) #f,
    PM_XL_FUNCTIONS(PM_XL_NAME)
#undef PM_XL_NAME
};
#define NFUNCTIONS (sizeof(functions) / sizeof(functions[0]))

static int failures;
static const char *missing; /* the function XL leaves out, or NULL */
static int asked[NFUNCTIONS]; /* how often XL was asked for each */

static void fail (const char *what, const char *detail) {
  printf("xl-test: FAIL: %s%s%s\n", what, detail ? ": " : "",
         detail ? detail : "");
  failures++;
}

static void *xl (const char *name) {
  size_t i;
  for (i = 0; i < NFUNCTIONS; i++)
    if (strcmp(functions[i], name) == 0)
      asked[i]++;
  if (missing != NULL && strcmp(name, missing) == 0)
    return NULL;
  return dlsym(RTLD_DEFAULT, name);
}

static pm_Entry entry;

static int open_native (lua_State *L) {
  return entry(L, xl);
}

/* Opens the native build with XL leaving out name; checks the outcome. */
static void open_without (const char *name) {
  lua_State *L = luaL_newstate();
  char expected[128];
  int top, status;
  missing = name;
  lua_pushcfunction(L, open_native);
  status = lua_pcall(L, 0, LUA_MULTRET, 0);
  top = lua_gettop(L);
  snprintf(expected, sizeof expected, "gives no %s,", name);
  if (strcmp(name, "luaL_error") == 0) {
    if (status != LUA_OK || top != 0)
      fail("without luaL_error, the entry point returned something", name);
  } else if (status != LUA_ERRRUN) {
    fail("no error when XL gives no", name);
  } else if (strstr(lua_tostring(L, -1), expected) == NULL) {
    fail("the error does not name the missing function", lua_tostring(L, -1));
  }
  lua_close(L);
}

static const char workload[] =
    "local core, lua_dir = ...\n"
    "package.path = lua_dir .. '/?.lua;' .. lua_dir .. '/?/init.lua'\n"
    "package.cpath = ''\n"
    "package.loaded['perfmon.core'] = core\n"
    "local perfmon = require('perfmon')\n"
    "local g = perfmon.group { name = 'busy', kind = 'plugin' }\n"
    "local env = setmetatable({}, { __index = _G })\n"
    "perfmon.attach(env, g)\n"
    "local busy = load('local s = 0 for i = 1, 3e6 do s = s + i end "
    "return s', '=busy', 't', env)\n"
    "local m = perfmon.monitor { 'jank' }\n"
    "local t0 = os.clock()\n"
    "perfmon.event(busy)\n"
    "local clock_us = math.floor((os.clock() - t0) * 1e6)\n"
    "local st = m:snapshot().groups[g.id]\n"
    "local info = perfmon.info()\n"
    "print(('xl-test: busy: self %d us of %d us by os.clock; path %s, "
    "sethook %s, chunks %s'):format(st.self_us, clock_us, info.path, "
    "info.sethook, info.chunks))\n"
    "assert(math.abs(st.self_us - clock_us) <= clock_us / 4 + 3000,\n"
    "  'busy is not charged its time')\n";

/* Opens it with every function given, and runs perfmon over it. */
static void open_all (const char *lua_dir) {
  lua_State *L = luaL_newstate();
  size_t i;
  luaL_openlibs(L);
  missing = NULL;
  memset(asked, 0, sizeof asked);
  lua_pushcfunction(L, open_native);
  if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
    fail("the entry point failed with every function given",
         lua_tostring(L, -1));
    lua_close(L);
    return;
  }
  for (i = 0; i < NFUNCTIONS; i++)
    if (asked[i] == 0)
      fail("XL was never asked for", functions[i]);
  if (!lua_istable(L, -1))
    fail("the entry point returned no table", luaL_typename(L, -1));
  if (luaL_loadstring(L, workload) != LUA_OK) {
    fail("the workload does not load", lua_tostring(L, -1));
  } else {
    lua_insert(L, -2); /* the workload, the core */
    lua_pushstring(L, lua_dir);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK)
      fail("perfmon over the native build", lua_tostring(L, -1));
  }
  lua_close(L);
}

int main (int argc, char **argv) {
  void *lib;
  size_t i;
  if (argc != 3) {
    fprintf(stderr, "usage: xl-test PERFMON_SO LUA_DIR\n");
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "xl-test: %s\n", dlerror());
    return 1;
  }
  *(void **)&entry = dlsym(lib, "luaopen_lite_xl_perfmon");
  if (entry == NULL) {
    fprintf(stderr, "xl-test: no luaopen_lite_xl_perfmon in %s\n", argv[1]);
    return 1;
  }
  if (dlsym(lib, "luaopen_perfmon_core") != NULL ||
      dlsym(lib, "perfmon_event_begin") != NULL)
    fail("the native build exports more than its entry point", NULL);
  /* before the table is ever filled: a failed fill leaves it empty */
  for (i = 0; i < NFUNCTIONS; i++)
    open_without(functions[i]);
  open_all(argv[2]);
  if (failures > 0)
    return 1;
  printf("xl-test: ok (%zu functions)\n", NFUNCTIONS);
  return 0;
}
