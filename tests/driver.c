/*
** driver.c -- what the reliability drivers share (see driver.h).
*/
#include "driver.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "perfmon.h"

void rel_die (const char *fmt, ...) {
  va_list ap;
  fputs("driver: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

/*
** {======================================================
** The counting, failing allocator
** =======================================================
*/

/* Lua assumes that shrinking a block never fails, so only allocations and
** growths count and may fail. */
static void *rel_alloc (void *ud, void *ptr, size_t osize, size_t nsize) {
  rel_Alloc *a = ud;
  size_t old = ptr != NULL ? osize : 0;
  void *p;
  if (nsize == 0) {
    free(ptr);
    a->live -= old;
    return NULL;
  }
  if (nsize > old) {
    a->allocs++;
    if (a->fail_at > 0 &&
        (a->allocs == a->fail_at || (a->sticky && a->allocs > a->fail_at))) {
      a->failed++;
      return NULL;
    }
  }
  p = realloc(ptr, nsize);
  if (p == NULL)
    return NULL; /* the machine's own limit: Lua raises a memory error */
  a->live += nsize - old;
  return p;
}

/* }====================================================== */

static int traceback (lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL)
    msg =
        lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Called unprotected by rel_newstate: an error here means the driver
** itself is broken, and lua_atpanic's default aborts loudly. */
static void set_paths (lua_State *L, const char *root) {
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;%s/?.lua", root, root,
                  root);
  lua_setfield(L, -2, "path");
  /* package.cpath stays (lua-cjson): package.preload comes first, so
     an installed perfmon.core is never the one loaded */
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_perfmon_core);
  lua_setfield(L, -2, "perfmon.core");
  lua_pop(L, 2);
}

lua_State *rel_newstate (rel_Alloc *a, const char *root) {
  lua_State *L;
  memset(a, 0, sizeof(*a));
  L = lua_newstate(rel_alloc, a);
  if (L == NULL)
    rel_die("lua_newstate failed");
  luaL_openlibs(L);
  set_paths(L, root);
  return L;
}

int rel_pcall (lua_State *L, int nargs) {
  int status, base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  status = lua_pcall(L, nargs, 0, base);
  lua_remove(L, base);
  return status;
}

int rel_loadfile (lua_State *L, const char *root, const char *file) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", root, file);
  return luaL_loadfile(L, path);
}

int rel_runfile (lua_State *L, const char *root, const char *file, int nargs,
                 const char *const *args) {
  int i, status = rel_loadfile(L, root, file);
  if (status != LUA_OK)
    return status;
  for (i = 0; i < nargs; i++)
    lua_pushstring(L, args[i]);
  return rel_pcall(L, nargs);
}

int rel_run (lua_State *L, const char *name, const char *src) {
  int status = luaL_loadbuffer(L, src, strlen(src), name);
  return status != LUA_OK ? status : rel_pcall(L, 0);
}

size_t rel_close (lua_State *L, rel_Alloc *a, const char *what) {
  lua_close(L);
  if (a->live != 0)
    fprintf(stderr, "driver: %s: %zu bytes still allocated after lua_close\n",
            what, a->live);
  return a->live;
}
