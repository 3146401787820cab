/*
** xl/api.c -- the entry point of perfmon's native build for Lite XL's
** native-plugin loader, and the table of the Lua API it fills (xl/api.h).
*/
#define PM_XL_NO_RENAME
#include "xl/api.h"

#include <stdio.h>

#include "perfmon.h"

pm_XLApi pm_xl;

/* One table for the process: there is one Lite XL, and one Lua in it. */
static int filled;

const char *pm_xl_fill (void *(*resolve)(const char *name)) {
  pm_XLApi api;
#define PM_XL_RESOLVE(f)                                                       \
  if ((api.f = (__typeof__(f) *)resolve(#f)) == NULL)                          \
    return #f;
  PM_XL_FUNCTIONS(PM_XL_RESOLVE)
#undef PM_XL_RESOLVE
  pm_xl = api;
  return NULL;
}

/* Lite XL's system.load_native_plugin("perfmon", path) calls this, with
** its XL; the core's own luaopen does the rest.  A function XL does not
** give (a Lite XL whose Lua is not the 5.4 this was built for) is an error
** naming it, raised through XL's own luaL_error where there is one. */
__attribute__((visibility("default"))) int
luaopen_lite_xl_perfmon (lua_State *L, void *(*XL)(const char *name)) {
  if (!filled) {
    const char *missing = pm_xl_fill(XL);
    if (missing != NULL) {
      static const char fmt[] = "perfmon: this Lite XL's native-plugin API "
                                "gives no %s, which perfmon's native build "
                                "calls (built for Lua %s)";
      int (*error)(lua_State *, const char *, ...) =
          (int (*)(lua_State *, const char *, ...))XL("luaL_error");
      if (error != NULL)
        return error(L, fmt, missing, LUA_VERSION_MAJOR "." LUA_VERSION_MINOR);
      fprintf(stderr, fmt, missing, LUA_VERSION_MAJOR "." LUA_VERSION_MINOR);
      fputc('\n', stderr);
      return 0; /* Lite XL: "entrypoint must return a value" */
    }
    filled = 1;
  }
  return luaopen_perfmon_core(L);
}
