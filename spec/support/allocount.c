/*
** allocount.c -- a test module that counts the allocations of a lua_State.
**
** require("allocount") wraps the state's allocator; perfmon, required after
** it, wraps this one in turn and takes its own memory from it too, so the
** count covers Lua and perfmon alike.  allocount.count() returns how many
** blocks were allocated or grown since the module was loaded.
**
** For the memory probe's specs it is also the host's allocator beneath
** perfmon: allocount.granted() returns the bytes blocks grew by (a new
** block: all of its size) and the blocks made, of the requests it granted,
** and allocount.refuse(k, min) has it refuse k requests that grow a block
** by min bytes or more, never two in a row, so that each is refused once
** and granted when Lua, after an emergency collection, asks again.
** allocount.refused() returns how many it refused so far.
*/
#include <lauxlib.h>
#include <lua.h>

typedef struct Counter {
  lua_Alloc f;
  void *ud;
  lua_Integer count;
  lua_Integer bytes, blocks; /* granted */
  lua_Integer to_refuse, refused;
  size_t refuse_min;
  int just_refused;
} Counter;

static void *counting_alloc (void *ud, void *ptr, size_t osize, size_t nsize) {
  Counter *c = ud;
  size_t grown = ptr == NULL ? nsize : nsize > osize ? nsize - osize : 0;
  void *block;
  if (nsize > 0 && (ptr == NULL || nsize > osize))
    c->count++;
  if (grown > 0 && grown >= c->refuse_min && c->to_refuse > 0 &&
      !c->just_refused) {
    c->to_refuse--;
    c->refused++;
    c->just_refused = 1;
    return NULL;
  }
  block = c->f(c->ud, ptr, osize, nsize);
  if (block != NULL && grown > 0) {
    c->bytes += (lua_Integer)grown;
    c->blocks += ptr == NULL;
    c->just_refused = 0;
  }
  return block;
}

static Counter counter;

static int count (lua_State *L) {
  lua_pushinteger(L, counter.count);
  return 1;
}

static int granted (lua_State *L) {
  lua_pushinteger(L, counter.bytes);
  lua_pushinteger(L, counter.blocks);
  return 2;
}

static int refuse (lua_State *L) {
  lua_Integer k = luaL_checkinteger(L, 1), min = luaL_checkinteger(L, 2);
  luaL_argcheck(L, k >= 0, 1, "not a count");
  luaL_argcheck(L, min > 0, 2, "not a size");
  counter.to_refuse = k;
  counter.refuse_min = (size_t)min;
  counter.just_refused = 0;
  return 0;
}

static int refused (lua_State *L) {
  lua_pushinteger(L, counter.refused);
  return 1;
}

int luaopen_allocount (lua_State *L) {
  static const luaL_Reg funcs[] = {{"count", count},
                                   {"granted", granted},
                                   {"refuse", refuse},
                                   {"refused", refused},
                                   {NULL, NULL}};
  if (counter.f == NULL) {
    counter.f = lua_getallocf(L, &counter.ud);
    lua_setallocf(L, counting_alloc, &counter);
  }
  luaL_newlib(L, funcs);
  return 1;
}
