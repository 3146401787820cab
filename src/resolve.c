/*
** resolve.c -- which groups a function belongs to (see resolve.h).
*/
#include "resolve.h"

#include <string.h>

#include "path.h"
#include "proto.h"

/* The chunk record of the Lua function f: by its prototype tree, made
** from the root of its load (every prototype of the tree names it), which
** is a main function or, stripped, any function of no known tree: a
** dumped function loaded on its own, or one whose chunk's main function
** died unseen, which cannot be told apart; by its source name where the
** tree cannot be read, or for a function whose chunk was not seen yet.
** *root: whether f is the root of its record, the function its load made,
** whose first upvalue the load set to its environment. */
static pm_Chunk *chunk_of (pm_State *S, const void *f, const char *source,
                           int is_main, int *root) {
  *root = is_main;
  if (S->proto_direct) {
    const void *p = pm_proto_of(f);
    uintptr_t v = pm_map_get(&S->e.known, p);
    if (v != 0 && PM_TAG(v) == PM_CHUNK) {
      pm_Chunk *c = PM_PTR(v);
      *root = c->root == p;
      return c;
    }
    if (is_main || (*root = pm_proto_source(p) == NULL))
      return pm_chunk_tree(&S->e, p, pm_proto_walk);
  }
  return pm_chunk_get(&S->e, source - S->string_offset, 1);
}

/* The table in upvalue i of the function on the top of the stack, or
** NULL. */
static const void *upvalue_table (lua_State *L, int i) {
  const void *t = NULL;
  if (lua_getupvalue(L, -1, i) != NULL) {
    t = lua_istable(L, -1) ? lua_topointer(L, -1) : NULL;
    lua_pop(L, 1);
  }
  return t;
}

/* The environment of the load of the function on the top of the stack,
** told by the upvalues it shares with the load's functions that have an
** _ENV (pm_env_link, when monitoring began): for a function that touches
** no global, of a chunk known by its source name alone, which two loads
** may share.  NULL when none says, or two disagree. */
static pm_Env *env_of_upvalues (pm_State *S, lua_State *L) {
  pm_Env *e = NULL, *u;
  int i;
  for (i = 1; lua_getupvalue(L, -1, i) != NULL; i++) {
    lua_pop(L, 1);
    u = pm_env_of_upvalue(&S->e, lua_upvalueid(L, -1, i));
    if (u != NULL && e != NULL && u != e)
      return NULL;
    if (u != NULL)
      e = u;
  }
  return e;
}

/* The set of the Lua function on the top of the stack.  Its environment is
** its _ENV upvalue or, for a function that touches no global, the one its
** chunk was loaded with.  A load sets upvalue 1 of the function it makes
** (its root: chunk_of) to its environment: a chunk learns its environment
** from its root, named _ENV or stripped, or, failing that, from the first
** of its functions seen with an _ENV upvalue.  The root's upvalue 1 is
** linked to the environment (pm_env_link): the load's functions that read
** a global share it, which tells them where no tree or name does (stripped
** code where the tree cannot be read). */
static pm_Set *resolve_lua (pm_State *S, lua_State *L) {
  lua_Debug d;
  const void *envp = NULL;
  const char *name;
  pm_Chunk *c;
  pm_Env *e = NULL;
  pm_Path **paths = NULL;
  int i, is_main;
  int root, link, up; /* the load's root, and its upvalue that is _ENV */
  const void *first; /* the table in that upvalue */
  for (i = 1; envp == NULL && (name = lua_getupvalue(L, -1, i)) != NULL; i++) {
    if (strcmp(name, "_ENV") == 0 && lua_istable(L, -1))
      envp = lua_topointer(L, -1);
    lua_pop(L, 1);
  }
  lua_pushvalue(L, -1);
  lua_getinfo(L, ">S", &d);
  is_main = strcmp(d.what, "main") == 0;
  c = chunk_of(S, lua_topointer(L, -1), d.source, is_main, &root);
  up = root && !is_main ? pm_proto_load_env(lua_topointer(L, -1)) : 1;
  first = root ? upvalue_table(L, up) : NULL;
  if ((link = first != NULL && (envp == NULL || envp == first)))
    envp = first;
  if (envp != NULL) {
    /* out of memory: resolved again next time, since attaching to a new
       record forgets nothing (pm_env_attach) */
    if ((e = pm_env_get(&S->e, envp, 1)) == NULL ||
        (link && !pm_env_link(&S->e, lua_upvalueid(L, -1, up), e)))
      return NULL;
    if (c != NULL && (root || c->env == NULL))
      pm_chunk_set_env(&S->e, c, e);
  } else if (c != NULL) {
    /* where no tree is read, "=?" names every stripped chunk: a stripped
       function that no upvalue places takes the table in its upvalue 1,
       as a load's root has it, over that name's record */
    if (c->exact && c->env != NULL)
      e = c->env;
    else if ((e = env_of_upvalues(S, L)) == NULL && !c->exact &&
             strcmp(d.source, "=?") == 0 &&
             (first = upvalue_table(L, 1)) != NULL &&
             (e = pm_env_get(&S->e, first, 1)) == NULL)
      return NULL;
    if (e == NULL && c->env != NULL && !c->ambiguous)
      e = c->env;
    c->unresolved |= e == NULL;
  }
  if (S->e.src.used && (paths = pm_path_of(S, c, d.source, d.srclen)) == NULL)
    return NULL;
  return pm_set_for(&S->e, e, c, paths, d.short_src);
}

/* Resolves and caches the function on the top of the stack. */
static uintptr_t resolve (pm_State *S, lua_State *L, const void *key) {
  uintptr_t v = PM_FN_C;
  if (lua_iscfunction(L, -1)) {
    /* where every coroutine has the hook, resume and wrap are C functions
       like any other */
    lua_CFunction f = lua_tocfunction(L, -1);
    if (f == S->co_f[0] && !S->threads_hooked)
      v = PM_FN_RESUME;
    else if (f == S->co_f[1] && !S->threads_hooked)
      v = PM_FN_WRAP;
  } else {
    pm_Set *s = resolve_lua(S, L);
    if (s == NULL)
      return PM_FN_C; /* out of memory: inherit the caller's set */
    /* code of no group is its caller's as a C function is: the time of a
       plugin's call into a host's helper is the plugin's self time */
    if (s->n > 0)
      v = (uintptr_t)s | PM_FN_LUA;
  }
  pm_map_put(&S->e.fns, key, v, S->e.falloc, S->e.fud);
  return v;
}

uintptr_t pm_resolve (pm_State *S, lua_State *L) {
  const void *key = lua_topointer(L, -1);
  uintptr_t v = pm_map_get(&S->e.fns, key);
  return v != 0 ? v : resolve(S, L, key);
}

/* Chunks that ran before monitoring began: their main function was never
** seen by the hook, and a function of theirs that touches no global has
** nothing but its chunk to say whose it is.  When the first monitor opens,
** every chunk whose main prototype is still alive is keyed by its tree,
** then the Lua functions with an _ENV upvalue tell their chunks'
** environments, main functions first (a chunk's others may run under
** `local _ENV = M`), none overriding one known (the chunk may have
** reassigned its _ENV since it was loaded): to its exact chunk, or, where
** the main prototype is gone, to the record of its source name, which a
** long name (a file's path) gives one load alone.  Each of those functions
** also links its upvalues to its environment (pm_env_link): a function of
** the same load that touches no global shares some of them, which tells
** its load where a source name shared by two loads cannot.  Stripped
** code is among them: its main function's upvalue 1 is its _ENV, and a
** stripped function whose main prototype is gone reads its _ENV through
** the upvalue that came down from its parent's first, if its parent was
** the main function (pm_proto_passed_env: deeper, a guess); such a
** function is the root of a tree of its own when first resolved
** (chunk_of). */
typedef struct Discovery {
  pm_State *S;
  int mains; /* the pass over main functions, or over the others */
} Discovery;

static int discover_chunk (const void *obj, int proto, void *arg) {
  pm_State *S = ((Discovery *)arg)->S;
  uintptr_t v;
  if (proto && pm_proto_is_main(obj)) {
    v = pm_map_get(&S->e.known, obj);
    if ((v == 0 || PM_TAG(v) != PM_CHUNK) &&
        pm_chunk_tree(&S->e, obj, pm_proto_walk) == NULL)
      return 0; /* out of memory: the rest stays unknown */
  }
  return 1;
}

static int discover_env (const void *obj, int proto, void *arg) {
  Discovery *d = arg;
  pm_State *S = d->S;
  const void *p, *table, *uv;
  pm_Chunk *c;
  pm_Env *e;
  uintptr_t v;
  int i;
  if (proto || pm_proto_is_main(p = pm_proto_of(obj)) != d->mains)
    return 1;
  v = pm_map_get(&S->e.known, p);
  if ((table = pm_proto_env(obj, S->string_offset)) == NULL &&
      (pm_proto_source(p) != NULL || (v != 0 && PM_TAG(v) == PM_CHUNK) ||
       (table = pm_proto_passed_env(obj)) == NULL))
    return 1; /* it cannot tell */
  if ((e = pm_env_get(&S->e, table, 1)) == NULL)
    return 0;
  for (i = 0; (uv = pm_proto_upvalue(obj, i)) != NULL; i++)
    if (!pm_env_link(&S->e, uv, e))
      return 0;
  if ((v == 0 || PM_TAG(v) != PM_CHUNK) && pm_proto_source(p) == NULL)
    return 1; /* stripped, of no tree: no name to tell it by */
  if (v == 0 || PM_TAG(v) != PM_CHUNK)
    v = pm_map_get(&S->e.known, pm_proto_source(p));
  c = v != 0 && PM_TAG(v) == PM_CHUNK ? PM_PTR(v) : NULL;
  if (c != NULL && c->env != NULL)
    return 1; /* known already */
  if (c == NULL && (c = pm_chunk_get(&S->e, pm_proto_source(p), 1)) == NULL)
    return 0;
  pm_chunk_set_env(&S->e, c, e);
  return 1;
}

void pm_resolve_discover (lua_State *L, pm_State *S) {
  Discovery d;
  d.S = S;
  d.mains = 1;
  if (!S->proto_heap || !pm_proto_heap(L, discover_chunk, &d) ||
      !pm_proto_heap(L, discover_env, &d))
    return;
  d.mains = 0;
  pm_proto_heap(L, discover_env, &d);
}

const pm_Set *pm_resolve_set (lua_State *L, pm_State *S) {
  uintptr_t v = pm_resolve(S, L);
  return PM_TAG(v) == PM_FN_LUA ? PM_PTR(v) : NULL;
}

int pm_resolve_chunk (lua_State *L, pm_State *S, int fidx) {
  int ok;
  lua_pushvalue(L, fidx);
  ok = resolve_lua(S, L) != NULL;
  lua_pop(L, 1);
  return ok;
}
