/*
** watch.c -- the allocator wrapper (see watch.h).
*/
#include "watch.h"

#include <lauxlib.h>

#include "hook.h"
#include "wrapper.h"

static void forget (pm_State *S, const void *key, uintptr_t v) {
  pm_map_del(&S->e.known, key);
  switch (PM_TAG(v)) {
    case PM_THREAD: pm_thread_forget(PM_PTR(v)); break;
    case PM_ENV: pm_env_forget(&S->e, PM_PTR(v)); break;
    case PM_CHUNK: pm_chunk_forget(&S->e, PM_PTR(v)); break;
    case PM_UPVAL: pm_upvalue_forget(&S->e, v); break;
    default: /* the start-up check's probes (pm_watch_open) */ break;
  }
}

/* The free of a block that the maps' filter says perfmon may have keyed:
** out of line, so that every other call goes straight on to the host's
** allocator without saving a register.  A function's entry was all there
** was of it. */
static PM_NOINLINE void *watch_free (pm_State *S, void *ptr, size_t osize) {
  uintptr_t v;
  if (pm_map_del(&S->e.fns, ptr) != 0)
    pm_wrapper_forget(S, ptr);
  if ((v = pm_map_get(&S->e.known, ptr)) != 0)
    forget(S, ptr, v);
  return S->e.falloc(S->e.fud, ptr, osize, 0);
}

/*
** {======================================================
** The memory probe: the bytes a block grows by (a new one from nothing),
** and the blocks made, of the requests the host's allocator grants
** =======================================================
*/

/* A request whose bytes pass a point of sampled mode's: counted once
** granted, then the point is told. */
static PM_NOINLINE void *counted_point (pm_State *S, void *ptr, size_t osize,
                                        size_t nsize, size_t grown, int made) {
  void *block = S->e.falloc(S->e.fud, ptr, osize, nsize);
  if (block != NULL) {
    S->e.allocs.bytes += grown;
    S->e.allocs.count += (uint64_t)made;
    S->alloc_point(S, grown, made);
  }
  return block;
}

/* Any other's bytes are counted before it is made, and taken back if the
** host refuses it (Lua then collects and asks again), so that the state
** alone lives across the host's allocator; the block it made, once
** granted.  Inline: made is a constant at each call. */
static PM_INLINE void *counted (pm_State *S, void *ptr, size_t osize,
                                size_t nsize, size_t grown, int made) {
  uint64_t bytes = S->e.allocs.bytes + grown;
  void *block;
  if (PM_UNLIKELY(bytes > S->e.alloc_next))
    return counted_point(S, ptr, osize, nsize, grown, made);
  S->e.allocs.bytes = bytes;
  S->asked = grown;
  block = S->e.falloc(S->e.fud, ptr, osize, nsize);
  if (PM_UNLIKELY(block == NULL))
    S->e.allocs.bytes -= S->asked;
  else
    S->e.allocs.count += (uint64_t)made;
  return block;
}

/* With no block, osize is the kind of object: a new block grows by all of
** nsize.  A block that shrinks or keeps its size is not counted. */
static PM_NOINLINE void *counted_alloc (pm_State *S, void *ptr, size_t osize,
                                        size_t nsize) {
  if (ptr == NULL)
    return counted(S, ptr, osize, nsize, nsize, 1);
  if (nsize > osize)
    return counted(S, ptr, osize, nsize, nsize - osize, 0);
  return S->e.falloc(S->e.fud, ptr, osize, nsize);
}

static void *watch_alloc (void *ud, void *ptr, size_t osize, size_t nsize) {
  pm_State *S = ud;
  if (nsize == 0) {
    if (ptr != NULL && pm_map_may_hold(&S->e.keyed, ptr))
      return watch_free(S, ptr, osize);
  } else if (PM_UNLIKELY(S->e.count_allocs))
    return counted_alloc(S, ptr, osize, nsize);
  return S->e.falloc(S->e.fud, ptr, osize, nsize);
}

/* }====================================================== */

/* Keys one probe object; a full collection must then remove the key. */
static int probe (pm_State *S, const void *key) {
  return pm_map_put(&S->e.known, key, PM_FN_C, S->e.falloc, S->e.fud);
}

static size_t string_offset (lua_State *L) {
  return (size_t)(lua_tostring(L, -1) - (const char *)lua_topointer(L, -1));
}

int pm_watch_open (lua_State *L, pm_State *S) {
  const void *keys[5];
  int i, ok = 1;
  /* first every Lua allocation, which may raise a memory error: until the
     allocator is wrapped there is nothing to undo.  Each probe object stays
     on the stack until its key is registered: a collection step in
     between must not free one unseen. */
  lua_newtable(L);
  keys[0] = lua_topointer(L, -1);
  if (luaL_loadstring(L, "return function() return 1 end") != LUA_OK)
    lua_error(L);
  keys[1] = lua_topointer(L, -1);
  lua_pushvalue(L, -1);
  lua_call(L, 0, 1);
  keys[2] = lua_topointer(L, -1);
  keys[3] = pm_thread_key(lua_newthread(L));
  lua_pushliteral(L, "perfmon: a long string that Lua does not intern");
  keys[4] = lua_topointer(L, -1);
  S->string_offset = string_offset(L);
  lua_pushliteral(L, "short");
  ok = string_offset(L) == S->string_offset;
  /* then perfmon's own, which fail by returning 0 */
  for (i = 0; i < 5; i++)
    if (!probe(S, keys[i])) {
      pm_map_free(&S->e.known, S->e.falloc, S->e.fud);
      lua_pop(L, 6);
      return -1;
    }
  lua_setallocf(L, watch_alloc, S);
  lua_pop(L, 6);
  lua_gc(L, LUA_GCCOLLECT);
  for (i = 0; i < 5; i++)
    if (pm_map_del(&S->e.known, keys[i]) != 0)
      ok = 0; /* its free went unseen, or to another address */
  if (!ok) {
    lua_setallocf(L, S->e.falloc, S->e.fud);
    pm_map_free(&S->e.known, S->e.falloc, S->e.fud);
  }
  return ok;
}

pm_State *pm_watch_state (lua_State *L) {
  void *ud;
  return lua_getallocf(L, &ud) == watch_alloc ? ud : NULL;
}

void pm_watch_close (lua_State *L, pm_State *S) {
  lua_setallocf(L, S->e.falloc, S->e.fud);
}
