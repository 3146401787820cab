/*
** allocount.c -- a test module that counts the allocations of a lua_State.
**
** require("allocount") wraps the state's allocator; perfmon, required after
** it, wraps this one in turn and takes its own memory from it too, so the
** count covers Lua and perfmon alike.  allocount.count() returns how many
** blocks were allocated or grown since the module was loaded.
*/
#include <lauxlib.h>
#include <lua.h>

typedef struct Counter {
  lua_Alloc f;
  void *ud;
  lua_Integer count;
} Counter;

static void *counting_alloc (void *ud, void *ptr, size_t osize, size_t nsize) {
  Counter *c = ud;
  if (nsize > 0 && (ptr == NULL || nsize > osize))
    c->count++;
  return c->f(c->ud, ptr, osize, nsize);
}

static Counter counter;

static int count (lua_State *L) {
  lua_pushinteger(L, counter.count);
  return 1;
}

int luaopen_allocount (lua_State *L) {
  if (counter.f == NULL) {
    counter.f = lua_getallocf(L, &counter.ud);
    lua_setallocf(L, counting_alloc, &counter);
  }
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, count);
  lua_setfield(L, -2, "count");
  return 1;
}
