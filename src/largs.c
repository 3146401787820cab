/*
** largs.c -- the state and argument checks every binding makes (largs.h).
*/
#include "largs.h"

#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

pm_State *pm_lstate (lua_State *L) {
  pm_State *S = pm_state_get(L);
  if (S == NULL)
    luaL_error(L, "perfmon: the state is closing");
  return S;
}

void *pm_lnomem (lua_State *L) {
  luaL_error(L, "not enough memory");
  return NULL;
}

/*
** {======================================================
** Argument errors
** =======================================================
*/

/* Argument errors name the public function (perfmon.group), never the
** name Lua finds for the caller, which is "group", a local's name, or
** "perfmon.core.group" depending on how it was called. */
int pm_larg_error (lua_State *L, int arg, const char *fname, const char *msg) {
  return luaL_error(L, "bad argument #%d to '%s' (%s)", arg, fname, msg);
}

/* Argument arg is of type t, never converted (a number is no string). */
void pm_lcheck_type (lua_State *L, int arg, const char *fname, int t) {
  if (lua_type(L, arg) != t)
    pm_larg_error(L, arg, fname,
                  lua_pushfstring(L, "%s expected, got %s", lua_typename(L, t),
                                  luaL_typename(L, arg)));
}

/* Pushes the string at idx quoted as Lua's %q writes it, on one line
** (a string that is not valid UTF-8 is a message too): what was given,
** whatever its bytes; another value as tostring shows it. */
const char *pm_lpush_quoted (lua_State *L, int idx) {
  luaL_Buffer b;
  size_t len, i;
  const char *s;
  if (lua_type(L, idx) != LUA_TSTRING)
    return luaL_tolstring(L, idx, NULL);
  s = lua_tolstring(L, idx, &len);
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '"');
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      luaL_addchar(&b, '\\');
      luaL_addchar(&b, (char)c);
    } else if (c < 0x20 || c == 0x7f) {
      char esc[8]; /* \ddd when a digit follows, as %q */
      int digit = i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '9';
      snprintf(esc, sizeof(esc), digit ? "\\%03d" : "\\%d", c);
      luaL_addstring(&b, esc);
    } else {
      luaL_addchar(&b, (char)c);
    }
  }
  luaL_addchar(&b, '"');
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* Every key of the option table at 1 is a string of fields (NULL-ended)
** or, with npos > 0, an integer in [1, npos]. */
void pm_lcheck_fields (lua_State *L, const char *fname,
                       const char *const fields[], lua_Integer npos) {
  lua_pushnil(L);
  while (lua_next(L, 1) != 0) {
    int k = 0;
    lua_pop(L, 1); /* the value */
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *key = lua_tostring(L, -1);
      while (fields[k] != NULL && strcmp(fields[k], key) != 0)
        k++;
      if (fields[k] != NULL && strlen(key) == lua_rawlen(L, -1))
        continue;
    } else if (npos > 0 && lua_isinteger(L, -1)) {
      lua_Integer i = lua_tointeger(L, -1);
      if (i >= 1 && i <= npos)
        continue;
    }
    {
      luaL_Buffer b;
      const char *key =
          lua_type(L, -1) == LUA_TSTRING
              ? pm_lpush_quoted(L, -1)
              : lua_pushfstring(L, "[%s]", luaL_tolstring(L, -1, NULL));
      luaL_buffinit(L, &b);
      for (k = 0; fields[k] != NULL; k++) {
        if (k > 0)
          luaL_addstring(&b, ", ");
        luaL_addstring(&b, fields[k]);
      }
      luaL_pushresult(&b);
      pm_larg_error(L, 1, fname,
                    lua_pushfstring(L, "unknown field %s (%sfields: %s)", key,
                                    npos > 0 ? "a list, and " : "",
                                    lua_tostring(L, -1)));
    }
  }
}

/* }====================================================== */
