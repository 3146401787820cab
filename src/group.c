/*
** group.c -- groups, interned sets, environment and chunk records.
*/
#include "group.h"

#include <string.h>

#include "proto.h"
#include "state.h"

/*
** {======================================================
** Groups
** =======================================================
*/

pm_Group *pm_group_new (pm_State *S, const char *name, const char *kind) {
  pm_Group *g, **a;
  a = pm_grow(S, S->groups, S->ngroups, S->ngroups + 1, &S->groupcap,
              sizeof(*a), 16);
  if (a == NULL)
    return NULL;
  S->groups = a;
  g = pm_alloc(S, sizeof(*g));
  if (g == NULL)
    return NULL;
  memset(g, 0, sizeof(*g));
  g->name = pm_strdup(S, name);
  g->kind = pm_strdup(S, kind);
  if (g->name == NULL || g->kind == NULL) {
    pm_strfree(S, g->name);
    pm_strfree(S, g->kind);
    pm_free(S, g, sizeof(*g));
    return NULL;
  }
  g->id = ++S->lastid;
  g->refs = 1;
  S->groups[S->ngroups++] = g;
  return g;
}

/* S->groups is sorted by id: ids grow and sweeps keep the order. */
pm_Group *pm_group_get (pm_State *S, int id) {
  int lo = 0, hi = S->ngroups - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (S->groups[mid]->id < id)
      lo = mid + 1;
    else if (S->groups[mid]->id > id)
      hi = mid - 1;
    else
      return S->groups[mid];
  }
  return NULL;
}

void pm_group_release (pm_State *S, pm_Group *g) {
  if (--g->refs == 0) {
    g->dead = 1;
    S->ndead++;
  }
}

static void group_free (pm_State *S, pm_Group *g) {
  pm_strfree(S, g->name);
  pm_strfree(S, g->kind);
  if (g->envs != NULL)
    pm_free(S, g->envs, (size_t)g->envcap * sizeof(pm_Env *));
  pm_free(S, g, sizeof(*g));
}

static int is_function (uintptr_t v, void *arg) {
  (void)arg;
  return PM_TAG(v) <= PM_FN_WRAP;
}

void pm_functions_forget (pm_State *S) {
  pm_map_filter(&S->known, is_function, NULL);
}

/* }====================================================== */

/*
** {======================================================
** Environments
** =======================================================
*/

pm_Env *pm_env_get (pm_State *S, const void *table, int create) {
  uintptr_t v = pm_map_get(&S->known, table);
  pm_Env *e;
  if (v != 0 && PM_TAG(v) == PM_ENV)
    return PM_PTR(v);
  if (!create)
    return NULL;
  e = pm_alloc(S, sizeof(*e));
  if (e == NULL)
    return NULL;
  memset(e, 0, sizeof(*e));
  e->table = table;
  if (!pm_map_put(&S->known, table, (uintptr_t)e | PM_ENV, S->falloc, S->fud)) {
    pm_free(S, e, sizeof(*e));
    return NULL;
  }
  e->next = S->envs;
  if (S->envs)
    S->envs->prev = e;
  S->envs = e;
  return e;
}

static int env_find (const pm_Env *e, const pm_Group *g) {
  int i;
  for (i = 0; i < e->n; i++)
    if (e->g[i] == g)
      return i;
  return -1;
}

/* g's own list of environments: memberships read it instead of every
** environment there is. */
static int group_add_env (pm_State *S, pm_Group *g, pm_Env *e) {
  pm_Env **a =
      pm_grow(S, g->envs, g->nenv, g->nenv + 1, &g->envcap, sizeof(*a), 2);
  if (a == NULL)
    return 0;
  g->envs = a;
  g->envs[g->nenv++] = e;
  g->refs++;
  return 1;
}

static void group_drop_env (pm_State *S, pm_Group *g, const pm_Env *e) {
  int i;
  for (i = 0; i < g->nenv; i++)
    if (g->envs[i] == e) {
      g->envs[i] = g->envs[--g->nenv];
      break;
    }
  pm_group_release(S, g);
}

/* A new environment (perfmon.load's) has no function resolved through it
** yet: attaching to it forgets nothing, so loading N plugins is not N
** walks of every function known. */
int pm_env_attach (pm_State *S, pm_Env *e, pm_Group *g) {
  if (env_find(e, g) >= 0)
    return PM_ATTACH_OK;
  if (e->n == PM_ENV_GROUPS)
    return PM_ATTACH_FULL;
  if (!group_add_env(S, g, e))
    return PM_ATTACH_NOMEM;
  e->g[e->n++] = g;
  if (e->used)
    pm_functions_forget(S);
  return PM_ATTACH_OK;
}

int pm_env_detach (pm_State *S, pm_Env *e, pm_Group *g) {
  int i = env_find(e, g);
  if (i < 0)
    return 0;
  e->g[i] = e->g[--e->n];
  group_drop_env(S, g, e);
  if (e->used)
    pm_functions_forget(S);
  return 1;
}

static void env_free (pm_State *S, pm_Env *e) {
  int i;
  for (i = 0; i < e->n; i++)
    group_drop_env(S, e->g[i], e);
  if (e->prev)
    e->prev->next = e->next;
  else
    S->envs = e->next;
  if (e->next)
    e->next->prev = e->prev;
  pm_free(S, e, sizeof(*e));
}

void pm_env_unref (pm_State *S, pm_Env *e) {
  if (--e->refs == 0 && e->table == NULL)
    env_free(S, e);
}

void pm_env_forget (pm_State *S, pm_Env *e) {
  /* chunks loaded with it may outlive the table: their env-less
     functions still belong to its groups */
  e->table = NULL;
  if (e->refs == 0)
    env_free(S, e);
}

/* }====================================================== */

/*
** {======================================================
** Chunks
** =======================================================
*/

pm_Chunk *pm_chunk_get (pm_State *S, const void *source, int create) {
  uintptr_t v = pm_map_get(&S->known, source);
  pm_Chunk *c;
  if (v != 0 && PM_TAG(v) == PM_CHUNK)
    return PM_PTR(v);
  if (!create)
    return NULL;
  c = pm_alloc(S, sizeof(*c));
  if (c == NULL)
    return NULL;
  memset(c, 0, sizeof(*c));
  if (!pm_map_put(&S->known, source, (uintptr_t)c | PM_CHUNK, S->falloc,
                  S->fud)) {
    pm_free(S, c, sizeof(*c));
    return NULL;
  }
  c->refs = 1;
  return c;
}

typedef struct Tree {
  pm_State *S;
  pm_Chunk *c;
} Tree;

static int key_proto (const void *p, void *arg) {
  Tree *t = arg;
  if (!pm_map_put(&t->S->known, p, (uintptr_t)t->c | PM_CHUNK, t->S->falloc,
                  t->S->fud))
    return 0;
  t->c->refs++;
  return 1;
}

/* Each prototype is a key: the main function's may die long before the
** functions it defined, and the record lives while any of them does. */
pm_Chunk *pm_chunk_tree (pm_State *S, const void *root) {
  Tree t;
  t.S = S;
  t.c = pm_alloc(S, sizeof(*t.c));
  if (t.c == NULL)
    return NULL;
  memset(t.c, 0, sizeof(*t.c));
  t.c->exact = 1;
  if (!pm_proto_walk(root, key_proto, &t) && t.c->refs == 0) {
    pm_free(S, t.c, sizeof(*t.c));
    return NULL;
  }
  return t.c; /* out of memory midway: the keys made so far name it */
}

void pm_chunk_set_env (pm_State *S, pm_Chunk *c, pm_Env *e) {
  int replaced = 0;
  if (c->env == e || c->ambiguous)
    return;
  if (c->exact && c->env != NULL) {
    /* one load: its main function names the environment it was loaded
       with, over what a function under `local _ENV = M` suggested */
    pm_env_unref(S, c->env);
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
    pm_functions_forget(S);
}

void pm_chunk_forget (pm_State *S, pm_Chunk *c) {
  if (--c->refs > 0)
    return;
  if (c->env)
    pm_env_unref(S, c->env);
  if (c->group)
    pm_group_release(S, c->group); /* a chunk group dies with its chunk */
  pm_free(S, c, sizeof(*c));
}

/* }====================================================== */

/*
** {======================================================
** Source prefixes
** =======================================================
*/

static int source_find (pm_State *S, const char *prefix, size_t len,
                        pm_Group *g) {
  int i;
  for (i = 0; i < S->nsources; i++)
    if (S->sources[i].g == g && S->sources[i].len == len &&
        memcmp(S->sources[i].prefix, prefix, len) == 0)
      return i;
  return -1;
}

int pm_source_attach (pm_State *S, const char *prefix, size_t len,
                      pm_Group *g) {
  pm_Source *src;
  if (source_find(S, prefix, len, g) >= 0)
    return 1;
  src = pm_grow(S, S->sources, S->nsources, S->nsources + 1, &S->sourcecap,
                sizeof(*src), 8);
  if (src == NULL)
    return 0;
  S->sources = src;
  src = &S->sources[S->nsources];
  if ((src->prefix = pm_alloc(S, len + 1)) == NULL)
    return 0;
  memcpy(src->prefix, prefix, len);
  src->prefix[len] = '\0';
  src->len = len;
  src->g = g;
  g->refs++;
  S->nsources++;
  pm_functions_forget(S);
  return 1;
}

int pm_source_detach (pm_State *S, const char *prefix, size_t len,
                      pm_Group *g) {
  int i = source_find(S, prefix, len, g);
  if (i < 0)
    return 0;
  pm_free(S, S->sources[i].prefix, S->sources[i].len + 1);
  S->sources[i] = S->sources[--S->nsources];
  pm_group_release(S, g);
  pm_functions_forget(S);
  return 1;
}

static void sources_free (pm_State *S) {
  int i;
  for (i = 0; i < S->nsources; i++)
    pm_free(S, S->sources[i].prefix, S->sources[i].len + 1);
  if (S->sources != NULL)
    pm_free(S, S->sources, (size_t)S->sourcecap * sizeof(pm_Source));
  S->sources = NULL;
  S->nsources = S->sourcecap = 0;
}

/* }====================================================== */

/*
** {======================================================
** Sets
** =======================================================
*/

static uint32_t set_hash (pm_Group *const *g, int n) {
  uint32_t h = 2166136261u ^ (uint32_t)n;
  int i;
  for (i = 0; i < n; i++)
    h = (h ^ (uint32_t)(g[i]->id)) * 16777619u;
  return h;
}

static void sort_groups (pm_Group **g, int n) {
  int i, j;
  for (i = 1; i < n; i++) { /* n <= PM_SET_MAX: insertion sort */
    pm_Group *x = g[i];
    for (j = i; j > 0 && g[j - 1]->id > x->id; j--)
      g[j] = g[j - 1];
    g[j] = x;
  }
}

static int sets_resize (pm_State *S, size_t cap) {
  size_t i;
  pm_Set **a = pm_alloc(S, cap * sizeof(*a));
  if (a == NULL)
    return 0;
  memset(a, 0, cap * sizeof(*a));
  if (S->sets) {
    for (i = 0; i <= S->setmask; i++) {
      pm_Set *s = S->sets[i], *next;
      for (; s != NULL; s = next) {
        next = s->next;
        s->next = a[s->hash & (cap - 1)];
        a[s->hash & (cap - 1)] = s;
      }
    }
    pm_free(S, S->sets, (S->setmask + 1) * sizeof(*a));
  }
  S->sets = a;
  S->setmask = cap - 1;
  return 1;
}

static pm_Set *set_intern (pm_State *S, pm_Group **g, int n) {
  uint32_t h;
  pm_Set *s;
  size_t size;
  sort_groups(g, n);
  h = set_hash(g, n);
  if (S->sets != NULL)
    for (s = S->sets[h & S->setmask]; s != NULL; s = s->next)
      if (s->hash == h && s->n == n &&
          memcmp(s->g, g, (size_t)n * sizeof(*g)) == 0)
        return s;
  if ((S->sets == NULL || S->nsets + 1 > S->setmask + 1) &&
      !sets_resize(S, S->sets ? (S->setmask + 1) * 2 : 64))
    return NULL;
  size = sizeof(pm_Set) + (size_t)(n > 0 ? n - 1 : 0) * sizeof(pm_Group *);
  s = pm_alloc(S, size);
  if (s == NULL)
    return NULL;
  s->hash = h;
  s->n = n;
  memcpy(s->g, g, (size_t)n * sizeof(*g));
  s->next = S->sets[h & S->setmask];
  S->sets[h & S->setmask] = s;
  S->nsets++;
  return s;
}

static size_t set_size (const pm_Set *s) {
  return sizeof(pm_Set) +
         (size_t)(s->n > 0 ? s->n - 1 : 0) * sizeof(pm_Group *);
}

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

pm_Set *pm_set_for (pm_State *S, pm_Env *e, pm_Chunk *c, const char *source,
                    const char *chunkname) {
  pm_Group *g[PM_SET_MAX];
  int n = 0, i;
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
  if (c != NULL && (S->probes & PM_BIT(PM_PROBE_CHUNKS))) {
    if (c->group == NULL) {
      c->group = pm_group_new(S, chunkname, "chunk");
      if (c->group == NULL)
        return NULL;
      if (c->env) {
        c->group->chunk_env = c->env;
        c->env->refs++;
      }
    }
    n = set_add(g, n, c->group);
  }
  if (source != NULL && S->nsources > 0) {
    const char *path = source + (*source == '@' || *source == '=');
    for (i = 0; i < S->nsources; i++)
      if (strncmp(path, S->sources[i].prefix, S->sources[i].len) == 0)
        n = set_add(g, n, S->sources[i].g);
  }
  return set_intern(S, g, n);
}

void pm_sets_free (pm_State *S) {
  size_t i;
  if (S->sets == NULL)
    return;
  for (i = 0; i <= S->setmask; i++) {
    pm_Set *s = S->sets[i], *next;
    for (; s != NULL; s = next) {
      next = s->next;
      pm_free(S, s, set_size(s));
    }
  }
  pm_free(S, S->sets, (S->setmask + 1) * sizeof(pm_Set *));
  S->sets = NULL;
  S->nsets = 0;
  S->empty = NULL;
}

/* }====================================================== */

/*
** {======================================================
** Memberships
** =======================================================
*/

static int add_id (int *ids, int n, int max, int id) {
  if (n < max)
    ids[n] = id;
  return n + 1;
}

int pm_memberships (const pm_Group *g, int *ids, int max) {
  pm_Group *cand[PM_ENV_GROUPS];
  int ncand = 0, n = 0, i, k, j;
  n = add_id(ids, n, max, 0); /* everything runs in the process */
  if (g->chunk_env != NULL) {
    for (i = 0; i < g->chunk_env->n; i++)
      n = add_id(ids, n, max, g->chunk_env->g[i]->id);
    return n;
  }
  for (k = 0; k < g->nenv; k++) {
    const pm_Env *e = g->envs[k];
    int m = 0;
    if (k == 0) { /* first environment: every other group is a candidate */
      for (i = 0; i < e->n; i++)
        if (e->g[i] != g)
          cand[m++] = e->g[i];
    } else { /* later ones: keep the candidates attached here too */
      for (j = 0; j < ncand; j++)
        if (env_find(e, cand[j]) >= 0)
          cand[m++] = cand[j];
    }
    if ((ncand = m) == 0)
      break;
  }
  for (i = 0; i < ncand; i++)
    n = add_id(ids, n, max, cand[i]->id);
  return n;
}

/* }====================================================== */

/*
** {======================================================
** Sweeping dead groups, and teardown
** =======================================================
*/

static int set_dying (const pm_Set *s) {
  int i;
  for (i = 0; i < s->n; i++)
    if (s->g[i]->dying)
      return 1;
  return 0;
}

/* Frees every set naming a dying group; returns how many. */
static size_t sets_reap (pm_State *S) {
  size_t i, freed = 0;
  for (i = 0; S->sets != NULL && i <= S->setmask; i++) {
    pm_Set **p = &S->sets[i];
    while (*p != NULL) {
      pm_Set *s = *p;
      if (set_dying(s)) {
        *p = s->next;
        pm_free(S, s, set_size(s));
        S->nsets--;
        freed++;
      } else
        p = &s->next;
    }
  }
  return freed;
}

/* The dying group's last links: a pending alert, its chunk's environment. */
static void group_reap (pm_State *S, pm_Group *g) {
  if (g->alert_reason != 0)
    S->alerts_pending--;
  if (g->chunk_env != NULL)
    pm_env_unref(S, g->chunk_env);
  group_free(S, g);
}

/* The room to shrink a table of n items to: a power of 2 from `least`
** up, at least twice n. */
static size_t shrunk_cap (size_t n, size_t least) {
  size_t cap = least;
  while (cap < n * 2)
    cap *= 2;
  return cap;
}

/* Gives the array of groups back its room once under 1/4 full. */
static void groups_shrink (pm_State *S) {
  int cap;
  pm_Group **a;
  if (S->groupcap <= 16 || S->ngroups * 4 >= S->groupcap)
    return;
  cap = (int)shrunk_cap((size_t)S->ngroups, 16);
  if ((a = pm_alloc(S, (size_t)cap * sizeof(*a))) == NULL)
    return; /* kept as it is */
  memcpy(a, S->groups, (size_t)S->ngroups * sizeof(*a));
  pm_free(S, S->groups, (size_t)S->groupcap * sizeof(*a));
  S->groups = a;
  S->groupcap = cap;
}

int pm_groups_sweep (pm_State *S, void (*spare)(pm_State *S)) {
  pm_Group *g;
  int i, n = 0, freed;
  if (S->ndead == 0)
    return 0;
  for (i = 0; i < S->ngroups; i++)
    S->groups[i]->dying = S->groups[i]->dead;
  spare(S);
  /* the stopwatch's lists of this period and window */
  for (g = S->touched; g != NULL; g = g->next_touched)
    g->dying = 0;
  for (g = S->windowed; g != NULL; g = g->next_windowed)
    g->dying = 0;
  if (sets_reap(S) > 0) {
    pm_functions_forget(S);
    if (S->setmask + 1 > 64 && S->nsets * 8 < S->setmask + 1)
      sets_resize(S, shrunk_cap(S->nsets, 64)); /* out of memory: kept */
    pm_map_shrink(&S->known, S->falloc, S->fud);
  }
  for (i = 0; i < S->ngroups; i++) {
    pm_Group *d = S->groups[i];
    if (d->dying)
      group_reap(S, d); /* may release live groups: the next sweep's */
    else
      S->groups[n++] = d;
  }
  freed = S->ngroups - n;
  S->ngroups = n;
  S->ndead -= freed;
  groups_shrink(S);
  return freed;
}

void pm_groups_free (pm_State *S) {
  int i;
  while (S->envs != NULL) {
    pm_Env *e = S->envs;
    S->envs = e->next;
    pm_free(S, e, sizeof(*e));
  }
  for (i = 0; i < S->ngroups; i++)
    group_free(S, S->groups[i]);
  if (S->groups)
    pm_free(S, S->groups, (size_t)S->groupcap * sizeof(pm_Group *));
  S->groups = NULL;
  S->ngroups = S->groupcap = 0;
  sources_free(S);
  pm_sets_free(S);
}

/* }====================================================== */
