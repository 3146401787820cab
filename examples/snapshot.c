/*
** snapshot.c -- reading perfmon snapshots from C (see snapshot.h).
*/
#include "snapshot.h"

#include <stdio.h>

#include <lauxlib.h>

long long snap_int_field (lua_State *L, int t, const char *k) {
  long long v;
  int isnum;
  lua_getfield(L, t, k);
  v = (long long)lua_tointegerx(L, -1, &isnum);
  if (!isnum)
    luaL_error(L, "snapshot: field '%s' is not an integer", k);
  lua_pop(L, 1);
  return v;
}

void snap_read_stats (lua_State *L, SnapStats *st) {
  int t = lua_gettop(L), k;
  if (!lua_istable(L, t))
    luaL_error(L, "snapshot: stats table expected");
  lua_getfield(L, t, "name");
  snprintf(st->name, sizeof(st->name), "%s", luaL_optstring(L, -1, "?"));
  lua_pop(L, 1);
  st->cpu_us = snap_int_field(L, t, "cpu_us");
  st->ticks = snap_int_field(L, t, "ticks");
  st->blocking_us = snap_int_field(L, t, "blocking_us");
  st->alloc_bytes = snap_int_field(L, t, "alloc_bytes");
  st->longest = snap_int_field(L, t, "longest");
  lua_getfield(L, t, "durations");
  for (k = 0; k < NDURATIONS; k++) {
    lua_rawgeti(L, -1, k + 1);
    st->durations[k] = (long long)lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  lua_settop(L, t - 1);
}

void snap_read_group (lua_State *L, int id, SnapStats *st) {
  if (lua_rawgeti(L, -1, id) != LUA_TTABLE)
    luaL_error(L, "snapshot: no group %d", id);
  snap_read_stats(L, st);
}

void snap_call_method (lua_State *L, int ref, const char *name) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  lua_getfield(L, -1, name);
  lua_insert(L, -2);
  lua_call(L, 1, 1);
}

int snap_since (lua_State *L, int monitor_ref, int before_ref) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, before_ref);
  snap_call_method(L, monitor_ref, "snapshot");
  lua_getfield(L, -1, "subtract");
  lua_insert(L, -2);
  lua_pushvalue(L, -3);
  lua_call(L, 2, 1); /* before d */
  return lua_gettop(L);
}
