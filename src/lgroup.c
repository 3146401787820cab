/*
** lgroup.c -- groups from Lua (lgroup.h).
*/
#include "lgroup.h"

#include <string.h>

#include <lauxlib.h>

#include "hook.h"
#include "largs.h"
#include "path.h"
#include "resolve.h"

#define GROUP_MT "perfmon.group"

/*
** {======================================================
** Groups
** =======================================================
*/

/* A handle's id is negated when it is collected: a finalizer that brings
** it back holds a group that may be freed. */
static pm_Group *check_group (lua_State *L, int arg, const char *fname) {
  int *id = luaL_testudata(L, arg, GROUP_MT);
  if (id == NULL)
    pm_larg_error(L, arg, fname,
                  lua_pushfstring(L, "perfmon.group expected, got %s",
                                  luaL_typename(L, arg)));
  if (*id <= 0)
    pm_larg_error(L, arg, fname, "perfmon.group was collected");
  return pm_group_get(&pm_lstate(L)->e, *id);
}

/* A required name field of perfmon.group's table.  The core keeps names
** as C strings, so a NUL byte would cut one silently: it is refused. */
static const char *field_string (lua_State *L, const char *key) {
  const char *s;
  size_t len;
  int t = lua_getfield(L, 1, key);
  if (t == LUA_TNIL)
    pm_larg_error(L, 1, "perfmon.group",
                  lua_pushfstring(L, "field '%s' is required (a string)", key));
  if (t != LUA_TSTRING)
    pm_larg_error(L, 1, "perfmon.group",
                  lua_pushfstring(L, "field '%s' must be a string, got %s", key,
                                  luaL_typename(L, -1)));
  s = lua_tolstring(L, -1, &len);
  if (len == 0)
    pm_larg_error(L, 1, "perfmon.group",
                  lua_pushfstring(L, "field '%s' is empty", key));
  if (memchr(s, '\0', len) != NULL)
    pm_larg_error(L, 1, "perfmon.group",
                  lua_pushfstring(L, "field '%s' contains a NUL byte: %s", key,
                                  pm_lpush_quoted(L, -1)));
  return s;
}

/* The optional boolean field of perfmon.group's table: false when absent. */
static int field_boolean (lua_State *L, const char *key) {
  int t = lua_getfield(L, 1, key);
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    pm_larg_error(L, 1, "perfmon.group",
                  lua_pushfstring(L, "field '%s' must be a boolean, got %s",
                                  key, luaL_typename(L, -1)));
  return lua_toboolean(L, -1);
}

/* perfmon.group{name = ..., kind = ..., library = false} */
static int l_group (lua_State *L) {
  static const char *const fields[] = {"name", "kind", "library", NULL};
  pm_State *S;
  pm_Group *g;
  int *id, library;
  const char *name, *kind;
  pm_lcheck_type(L, 1, "perfmon.group", LUA_TTABLE);
  pm_lcheck_fields(L, "perfmon.group", fields, 0);
  name = field_string(L, "name"); /* in order: the first bad one is named */
  kind = field_string(L, "kind");
  library = field_boolean(L, "library");
  S = pm_lstate(L);
  /* a host that makes groups and never takes a snapshot frees them too */
  pm_hook_sweep(S, 1);
  g = pm_group_new(&S->e, name, kind, library);
  if (g == NULL)
    return (pm_lnomem(L), 0);
  id = lua_newuserdatauv(L, sizeof(int), 0);
  *id = g->id;
  luaL_setmetatable(L, GROUP_MT);
  return 1;
}

static int group_index (lua_State *L) {
  pm_Group *g = check_group(L, 1, "__index");
  const char *k = lua_tostring(L, 2);
  if (k == NULL)
    lua_pushnil(L);
  else if (strcmp(k, "id") == 0)
    lua_pushinteger(L, g->id);
  else if (strcmp(k, "name") == 0)
    lua_pushstring(L, g->name);
  else if (strcmp(k, "kind") == 0)
    lua_pushstring(L, g->kind);
  else if (strcmp(k, "library") == 0)
    lua_pushboolean(L, g->library);
  else
    lua_pushnil(L);
  return 1;
}

/* The handle is one of the group's references. */
static int group_gc (lua_State *L) {
  int *id = luaL_checkudata(L, 1, GROUP_MT);
  pm_State *S = pm_state_get(L);
  pm_Group *g = (S != NULL && *id > 0) ? pm_group_get(&S->e, *id) : NULL;
  if (g != NULL)
    pm_group_release(&S->e, g);
  *id = -*id;
  return 0;
}

static int group_tostring (lua_State *L) {
  pm_Group *g = check_group(L, 1, "__tostring");
  lua_pushfstring(L, "perfmon.group %d (%s '%s')", g->id, g->kind, g->name);
  return 1;
}

/* core.is_group(x) */
static int l_is_group (lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, GROUP_MT) != NULL);
  return 1;
}

/* perfmon.attach(env, group) */
static int l_attach (lua_State *L) {
  pm_State *S = pm_lstate(L);
  pm_Env *e;
  pm_Group *g;
  pm_lcheck_type(L, 1, "perfmon.attach", LUA_TTABLE);
  g = check_group(L, 2, "perfmon.attach");
  e = pm_env_get(&S->e, lua_topointer(L, 1), 1);
  if (e == NULL)
    return (pm_lnomem(L), 0);
  switch (pm_env_attach(&S->e, e, g)) {
    case PM_ATTACH_FULL:
      return pm_larg_error(L, 1, "perfmon.attach",
                           "environment already has the most groups "
                           "perfmon allows (31)");
    case PM_ATTACH_NOMEM: return (pm_lnomem(L), 0);
    default: return 0;
  }
}

/* perfmon.detach(env, group) -> whether it was attached */
static int l_detach (lua_State *L) {
  pm_State *S = pm_lstate(L);
  pm_Env *e;
  pm_Group *g;
  pm_lcheck_type(L, 1, "perfmon.detach", LUA_TTABLE);
  g = check_group(L, 2, "perfmon.detach");
  e = pm_env_get(&S->e, lua_topointer(L, 1), 0);
  lua_pushboolean(L, e != NULL && pm_env_detach(&S->e, e, g));
  return 1;
}

/* The prefix argument of attach_source and detach_source. */
static const char *check_prefix (lua_State *L, const char *fname, size_t *len) {
  const char *p;
  pm_lcheck_type(L, 1, fname, LUA_TSTRING);
  p = lua_tolstring(L, 1, len);
  if (*len == 0)
    pm_larg_error(L, 1, fname, "the prefix is empty");
  if (strlen(p) != *len)
    pm_larg_error(L, 1, fname, "the prefix holds a NUL byte");
  return p;
}

/* perfmon.attach_source(prefix, group): every chunk whose path begins
** with prefix, both normalised (path.h), or whose name begins with it as
** written, belongs to group */
static int l_attach_source (lua_State *L) {
  pm_State *S = pm_lstate(L);
  char full[PM_KEY_MAX], named[PM_KEY_MAX];
  const char *path[2];
  size_t len, plen[2];
  const char *prefix = check_prefix(L, "perfmon.attach_source", &len);
  pm_Group *g = check_group(L, 2, "perfmon.attach_source");
  path[0] = full, path[1] = named;
  if (len >= PM_KEY_MAX ||
      (plen[0] = pm_path_normal(S, prefix, len, full, named, &plen[1])) == 0)
    return pm_larg_error(L, 1, "perfmon.attach_source",
                         lua_pushfstring(L,
                                         "the prefix is longer than %d "
                                         "bytes as an absolute path",
                                         PM_KEY_MAX - 1));
  if (!pm_source_attach(&S->e, prefix, len, path, plen, plen[1] > 0 ? 2 : 1, g))
    return (pm_lnomem(L), 0);
  return 0;
}

/* perfmon.detach_source(prefix, group) -> whether it was attached */
static int l_detach_source (lua_State *L) {
  pm_State *S = pm_lstate(L);
  size_t len;
  const char *prefix = check_prefix(L, "perfmon.detach_source", &len);
  pm_Group *g = check_group(L, 2, "perfmon.detach_source");
  lua_pushboolean(L, pm_source_detach(&S->e, prefix, len, g));
  return 1;
}

/* core.chunk(fn): fn is the main function of a chunk just loaded */
static int l_chunk (lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_argcheck(L, !lua_iscfunction(L, 1), 1, "Lua function expected");
  if (!pm_resolve_chunk(L, pm_lstate(L), 1))
    return (pm_lnomem(L), 0);
  return 0;
}

/* }====================================================== */

static const luaL_Reg group_funcs[] = {{"group", l_group},
                                       {"is_group", l_is_group},
                                       {"attach", l_attach},
                                       {"detach", l_detach},
                                       {"attach_source", l_attach_source},
                                       {"detach_source", l_detach_source},
                                       {"chunk", l_chunk},
                                       {NULL, NULL}};

static const luaL_Reg group_meta[] = {{"__index", group_index},
                                      {"__tostring", group_tostring},
                                      {"__gc", group_gc},
                                      {NULL, NULL}};

void pm_lgroup_register (lua_State *L) {
  if (luaL_newmetatable(L, GROUP_MT))
    luaL_setfuncs(L, group_meta, 0);
  lua_pop(L, 1);
  luaL_setfuncs(L, group_funcs, 0);
}
