/*
** chunk.c -- chunk records, and the set a function's environment, chunk
** and chunk's keys give (chunk.h).
*/
#include "chunk.h"

#include <string.h>

#include "engine.h"
#include "mem.h"

/*
** {======================================================
** Chunks
** =======================================================
*/

pm_Chunk *pm_chunk_get (pm_Engine *E, const void *source, int create) {
  uintptr_t v = pm_map_get(&E->known, source);
  pm_Chunk *c;
  if (v != 0 && PM_TAG(v) == PM_CHUNK)
    return PM_PTR(v);
  if (!create)
    return NULL;
  c = pm_alloc(E, sizeof(*c));
  if (c == NULL)
    return NULL;
  memset(c, 0, sizeof(*c));
  if (!pm_map_put(&E->known, source, (uintptr_t)c | PM_CHUNK, E->falloc,
                  E->fud)) {
    pm_free(E, c, sizeof(*c));
    return NULL;
  }
  c->refs = 1;
  return c;
}

typedef struct Tree {
  pm_Engine *E;
  pm_Chunk *c;
} Tree;

static int key_proto (const void *p, void *arg) {
  Tree *t = arg;
  uintptr_t v = pm_map_get(&t->E->known, p);
  if (v != 0 && PM_TAG(v) == PM_CHUNK)
    return 1; /* a stripped function keyed as a root before its parent */
  if (!pm_map_put(&t->E->known, p, (uintptr_t)t->c | PM_CHUNK, t->E->falloc,
                  t->E->fud))
    return 0;
  t->c->refs++;
  return 1;
}

/* Each prototype is a key: the main function's may die long before the
** functions it defined, and the record lives while any of them does. */
pm_Chunk *pm_chunk_tree (pm_Engine *E, const void *root, pm_Walk walk) {
  Tree t;
  t.E = E;
  t.c = pm_alloc(E, sizeof(*t.c));
  if (t.c == NULL)
    return NULL;
  memset(t.c, 0, sizeof(*t.c));
  t.c->exact = 1;
  t.c->root = root;
  if (!walk(root, key_proto, &t) && t.c->refs == 0) {
    pm_free(E, t.c, sizeof(*t.c));
    return NULL;
  }
  return t.c; /* out of memory midway: the keys made so far name it */
}

void pm_chunk_set_env (pm_Engine *E, pm_Chunk *c, pm_Env *e) {
  int replaced = 0;
  if (c->env == e || c->ambiguous)
    return;
  if (c->exact && c->env != NULL) {
    /* one load: its main function names the environment it was loaded
       with, over what a function under `local _ENV = M` suggested */
    pm_env_unref(E, c->env);
    c->env = NULL;
    replaced = 1;
  }
  if (c->env == NULL) {
    c->env = e;
    e->refs++;
  } else {
    /* two chunks of different environments share one interned source
       name: their env-less functions cannot be told apart */
    c->ambiguous = 1;
  }
  if (c->unresolved || c->ambiguous || replaced)
    pm_functions_forget(E);
}

void pm_chunk_forget (pm_Engine *E, pm_Chunk *c) {
  int i;
  if (--c->refs > 0)
    return;
  if (c->env)
    pm_env_unref(E, c->env);
  if (c->group)
    pm_group_release(E, c->group); /* a chunk group dies with its chunk */
  for (i = 0; i < PM_CHUNK_KEYS; i++)
    if (c->path[i] != NULL)
      pm_path_release(E, c->path[i]);
  pm_free(E, c, sizeof(*c));
}

/* }====================================================== */

/*
** {======================================================
** Sets of a function
** =======================================================
*/

/* Adds g to the n groups of set unless it is there or the set is full. */
static int set_add (pm_Group **set, int n, pm_Group *g) {
  int i;
  for (i = 0; i < n; i++)
    if (set[i] == g)
      return n;
  if (n == PM_SET_MAX)
    return n;
  set[n] = g;
  return n + 1;
}

pm_Set *pm_set_for (pm_Engine *E, pm_Env *e, pm_Chunk *c, pm_Path *const *paths,
                    const char *chunkname) {
  pm_Group *g[PM_SET_MAX], *m[PM_SET_MAX];
  pm_Set *s;
  int n = 0, i, k;
  if (e != NULL) {
    memcpy(g, e->g, (size_t)e->n * sizeof(*g));
    n = e->n;
    e->used = 1;
  }
  if (c != NULL && c->exact && c->env != NULL && c->env != e) {
    for (i = 0; i < c->env->n; i++)
      n = set_add(g, n, c->env->g[i]);
    c->env->used = 1;
  }
  if (c != NULL && (E->probes & PM_BIT(PM_PROBE_CHUNKS))) {
    if (c->group == NULL) {
      c->group = pm_group_new(E, chunkname, "chunk", 0);
      if (c->group == NULL)
        return NULL;
      if (c->env) {
        c->group->chunk_env = c->env;
        c->env->refs++;
      }
    }
    n = set_add(g, n, c->group);
  }
  if (paths != NULL) {
    k = pm_source_groups(E, paths, m, PM_SET_MAX);
    for (i = 0; i < k; i++)
      n = set_add(g, n, m[i]);
  }
  s = pm_set_intern(E, g, n);
  for (i = 0; paths != NULL && s != NULL && i < PM_CHUNK_KEYS; i++)
    if (paths[i] != NULL)
      pm_path_note(paths[i], s);
  return s;
}

/* }====================================================== */

/*
** {======================================================
** Teardown
** =======================================================
*/

static int drop_record (uintptr_t v, void *arg) {
  if (PM_TAG(v) == PM_CHUNK)
    pm_chunk_forget(arg, PM_PTR(v));
  return 1;
}

void pm_chunks_free (pm_Engine *E) {
  pm_map_filter(&E->known, drop_record, E);
  pm_groups_free(E);
  pm_sources_free(E);
}

/* }====================================================== */
