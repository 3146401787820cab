/*
** group.c -- groups, interned sets, environment records.
*/
#include "group.h"

#include <string.h>

#include "engine.h"
#include "hash.h"
#include "index.h"
#include "mem.h"

/*
** {======================================================
** Groups
** =======================================================
*/

pm_Group *pm_group_new (pm_Engine *E, const char *name, const char *kind,
                        int library) {
  pm_Group *g, **a;
  a = pm_grow(E, E->groups, E->ngroups, E->ngroups + 1, &E->groupcap,
              sizeof(*a), 16);
  if (a == NULL)
    return NULL;
  E->groups = a;
  g = pm_alloc(E, sizeof(*g));
  if (g == NULL)
    return NULL;
  memset(g, 0, sizeof(*g));
  g->name = pm_strdup(E, name);
  g->kind = pm_strdup(E, kind);
  if (g->name == NULL || g->kind == NULL) {
    pm_strfree(E, g->name);
    pm_strfree(E, g->kind);
    pm_free(E, g, sizeof(*g));
    return NULL;
  }
  g->id = ++E->lastid;
  g->refs = 1;
  g->library = library != 0;
  E->groups[E->ngroups++] = g;
  return g;
}

/* E->groups is sorted by id: ids grow and sweeps keep the order. */
pm_Group *pm_group_get (pm_Engine *E, int id) {
  int lo = 0, hi = E->ngroups - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (E->groups[mid]->id < id)
      lo = mid + 1;
    else if (E->groups[mid]->id > id)
      hi = mid - 1;
    else
      return E->groups[mid];
  }
  return NULL;
}

void pm_group_release (pm_Engine *E, pm_Group *g) {
  if (--g->refs == 0) {
    g->dead = 1;
    E->ndead++;
  }
}

static void group_free (pm_Engine *E, pm_Group *g) {
  pm_strfree(E, g->name);
  pm_strfree(E, g->kind);
  if (g->envs != NULL)
    pm_free(E, g->envs, (size_t)g->envcap * sizeof(pm_Env *));
  pm_free(E, g, sizeof(*g));
}

static int every (uintptr_t v, void *arg) {
  (void)v;
  (void)arg;
  return 1;
}

/* The map keeps its room: the functions come back. */
void pm_functions_forget (pm_Engine *E) {
  pm_map_filter(&E->fns, every, NULL);
  E->fns_forgets++;
}

/* }====================================================== */

/*
** {======================================================
** Environments
** =======================================================
*/

pm_Env *pm_env_get (pm_Engine *E, const void *table, int create) {
  uintptr_t v = pm_map_get(&E->known, table);
  pm_Env *e;
  if (v != 0 && PM_TAG(v) == PM_ENV)
    return PM_PTR(v);
  if (!create)
    return NULL;
  e = pm_alloc(E, sizeof(*e));
  if (e == NULL)
    return NULL;
  memset(e, 0, sizeof(*e));
  e->table = table;
  if (!pm_map_put(&E->known, table, (uintptr_t)e | PM_ENV, E->falloc, E->fud)) {
    pm_free(E, e, sizeof(*e));
    return NULL;
  }
  e->next = E->envs;
  if (E->envs)
    E->envs->prev = e;
  E->envs = e;
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
static int group_add_env (pm_Engine *E, pm_Group *g, pm_Env *e) {
  pm_Env **a =
      pm_grow(E, g->envs, g->nenv, g->nenv + 1, &g->envcap, sizeof(*a), 2);
  if (a == NULL)
    return 0;
  g->envs = a;
  g->envs[g->nenv++] = e;
  g->refs++;
  return 1;
}

static void group_drop_env (pm_Engine *E, pm_Group *g, const pm_Env *e) {
  int i;
  for (i = 0; i < g->nenv; i++)
    if (g->envs[i] == e) {
      g->envs[i] = g->envs[--g->nenv];
      break;
    }
  pm_group_release(E, g);
}

/* A new environment (perfmon.load's) has no function resolved through it
** yet: attaching to it forgets nothing, so loading N plugins is not N
** walks of every function known. */
int pm_env_attach (pm_Engine *E, pm_Env *e, pm_Group *g) {
  if (env_find(e, g) >= 0)
    return PM_ATTACH_OK;
  if (e->n == PM_ENV_GROUPS)
    return PM_ATTACH_FULL;
  if (!group_add_env(E, g, e))
    return PM_ATTACH_NOMEM;
  e->g[e->n++] = g;
  if (e->used)
    pm_functions_forget(E);
  return PM_ATTACH_OK;
}

int pm_env_detach (pm_Engine *E, pm_Env *e, pm_Group *g) {
  int i = env_find(e, g);
  if (i < 0)
    return 0;
  e->g[i] = e->g[--e->n];
  group_drop_env(E, g, e);
  if (e->used)
    pm_functions_forget(E);
  return 1;
}

static void env_free (pm_Engine *E, pm_Env *e) {
  int i;
  for (i = 0; i < e->n; i++)
    group_drop_env(E, e->g[i], e);
  if (e->prev)
    e->prev->next = e->next;
  else
    E->envs = e->next;
  if (e->next)
    e->next->prev = e->prev;
  pm_free(E, e, sizeof(*e));
}

void pm_env_unref (pm_Engine *E, pm_Env *e) {
  if (--e->refs == 0 && e->table == NULL)
    env_free(E, e);
}

void pm_env_forget (pm_Engine *E, pm_Env *e) {
  /* chunks loaded with it may outlive the table: their env-less
     functions still belong to its groups */
  e->table = NULL;
  if (e->refs == 0)
    env_free(E, e);
}

int pm_env_link (pm_Engine *E, const void *uv, pm_Env *e) {
  uintptr_t v = pm_map_get(&E->known, uv);
  pm_Env *old;
  if (v == 0) {
    if (!pm_map_put(&E->known, uv, (uintptr_t)e | PM_UPVAL, E->falloc, E->fud))
      return 0;
    e->refs++;
    return 1;
  }
  if (PM_TAG(v) != PM_UPVAL || (old = PM_PTR(v)) == e || old == NULL)
    return 1;
  pm_map_put(&E->known, uv, PM_UPVAL, E->falloc, E->fud); /* replaced: fits */
  pm_env_unref(E, old);
  return 1;
}

pm_Env *pm_env_of_upvalue (pm_Engine *E, const void *uv) {
  uintptr_t v = pm_map_get(&E->known, uv);
  return v != 0 && PM_TAG(v) == PM_UPVAL ? PM_PTR(v) : NULL;
}

void pm_upvalue_forget (pm_Engine *E, uintptr_t v) {
  if (PM_PTR(v) != NULL)
    pm_env_unref(E, PM_PTR(v));
}

/* }====================================================== */

/*
** {======================================================
** Sets
** =======================================================
*/

static uint32_t set_hash (pm_Group *const *g, int n) {
  uint32_t h = pm_hash_word(PM_HASH_SEED, (uint64_t)n);
  int i;
  for (i = 0; i < n; i++)
    h = pm_hash_word(h, (uint64_t)g[i]->id);
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

typedef struct SetKey {
  const pm_Engine *E;
  pm_Group *const *g;
  int n;
  uint32_t hash;
} SetKey;

static int set_same (const void *ud, uint32_t i) {
  const SetKey *k = ud;
  const pm_Set *s = k->E->sets[i];
  return s->hash == k->hash && s->n == k->n &&
         memcmp(s->g, k->g, (size_t)k->n * sizeof(*k->g)) == 0;
}

static uint32_t set_hash_of (const void *ud, uint32_t i) {
  return ((const SetKey *)ud)->E->sets[i]->hash;
}

static size_t set_size (int n) {
  return sizeof(pm_Set) + (size_t)(n > 0 ? n - 1 : 0) * sizeof(pm_Group *);
}

static int set_lib (pm_Group *const *g, int n) {
  int i;
  for (i = 0; i < n; i++)
    if (!g[i]->library)
      return 0;
  return 1;
}

/* A set of one group is that group's own (solo), which goes with it. */
static pm_Set *set_new (pm_Engine *E, pm_Group **g, int n) {
  return n == 1 ? &g[0]->solo : pm_alloc(E, set_size(n));
}

static void set_free (pm_Engine *E, pm_Set *s) {
  if (!(s->n == 1 && s == &s->g[0]->solo))
    pm_free(E, s, set_size(s->n));
}

pm_Set *pm_set_intern (pm_Engine *E, pm_Group **g, int n) {
  SetKey k;
  pm_Set *s, **a;
  uint32_t found;
  sort_groups(g, n);
  k.E = E;
  k.g = g;
  k.n = n;
  k.hash = set_hash(g, n);
  if ((found = pm_index_find(&E->setidx, k.hash, set_same, &k)) != 0)
    return E->sets[found - 1];
  a = pm_grow(E, E->sets, E->nsets, E->nsets + 1, &E->setcap, sizeof(*a), 64);
  if (a == NULL)
    return NULL;
  E->sets = a;
  if ((s = set_new(E, g, n)) == NULL)
    return NULL;
  s->hash = k.hash;
  s->n = n;
  s->lib = set_lib(g, n);
  s->ctx_from = s->ctx = NULL;
  memcpy(s->g, g, (size_t)n * sizeof(*g));
  E->sets[E->nsets] = s;
  if (!pm_index_add(E, &E->setidx, (uint32_t)E->nsets + 1, k.hash, set_hash_of,
                    &k)) {
    set_free(E, s);
    return NULL;
  }
  E->nsets++;
  return s;
}

void pm_sets_free (pm_Engine *E) {
  int i;
  E->ctx_free(E); /* contexts name sets */
  for (i = 0; i < E->nsets; i++)
    set_free(E, E->sets[i]);
  if (E->sets != NULL)
    pm_free(E, E->sets, (size_t)E->setcap * sizeof(pm_Set *));
  pm_index_free(E, &E->setidx);
  E->sets = NULL;
  E->nsets = E->setcap = 0;
  E->empty = NULL;
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

int pm_set_dying (const pm_Set *s) {
  int i;
  for (i = 0; s != NULL && i < s->n; i++)
    if (s->g[i]->dying)
      return 1;
  return 0;
}

void pm_set_spare (const pm_Set *s) {
  int i;
  for (i = 0; s != NULL && i < s->n; i++)
    s->g[i]->dying = 0;
}

/* Frees every set naming a dying group; returns how many.  The index of
** the rest is rebuilt, in place when a smaller one cannot be made. */
static int sets_reap (pm_Engine *E) {
  int i, n = 0, freed;
  SetKey k;
  for (i = 0; i < E->nsets; i++) {
    pm_Set *s = E->sets[i];
    if (pm_set_dying(s))
      set_free(E, s);
    else
      E->sets[n++] = s;
  }
  freed = E->nsets - n;
  E->nsets = n;
  if (freed > 0) {
    k.E = E;
    pm_index_rebuild(E, &E->setidx, (uint32_t)n, set_hash_of, &k);
  }
  return freed;
}

/* The dying group's last links: a pending alert, its chunk's environment. */
static void group_reap (pm_Engine *E, pm_Group *g) {
  if (g->alert_reason != 0)
    E->alerts_pending--;
  if (g->chunk_env != NULL)
    pm_env_unref(E, g->chunk_env);
  group_free(E, g);
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
static void groups_shrink (pm_Engine *E) {
  int cap;
  pm_Group **a;
  if (E->groupcap <= 16 || E->ngroups * 4 >= E->groupcap)
    return;
  cap = (int)shrunk_cap((size_t)E->ngroups, 16);
  if ((a = pm_alloc(E, (size_t)cap * sizeof(*a))) == NULL)
    return; /* kept as it is */
  memcpy(a, E->groups, (size_t)E->ngroups * sizeof(*a));
  pm_free(E, E->groups, (size_t)E->groupcap * sizeof(*a));
  E->groups = a;
  E->groupcap = cap;
}

int pm_groups_sweep (pm_Engine *E, void (*spare)(void *ud), void *ud) {
  pm_Group *g;
  int i, n = 0, freed;
  if (E->ndead == 0)
    return 0;
  for (i = 0; i < E->ngroups; i++)
    E->groups[i]->dying = E->groups[i]->dead;
  spare(ud);
  /* the stopwatch's lists of this period and window, its contexts charged
  ** and the one running */
  for (g = E->touched; g != NULL; g = g->next_touched)
    g->dying = 0;
  for (g = E->windowed; g != NULL; g = g->next_windowed)
    g->dying = 0;
  E->ctx_sweep(E); /* before the sets they name */
  if (sets_reap(E) > 0) {
    pm_functions_forget(E);
    pm_map_shrink(&E->fns, E->falloc, E->fud);
    pm_map_shrink(&E->known, E->falloc, E->fud);
  }
  for (i = 0; i < E->ngroups; i++) {
    pm_Group *d = E->groups[i];
    if (d->dying)
      group_reap(E, d); /* may release live groups: the next sweep's */
    else
      E->groups[n++] = d;
  }
  freed = E->ngroups - n;
  E->ngroups = n;
  E->ndead -= freed;
  groups_shrink(E);
  return freed;
}

void pm_groups_free (pm_Engine *E) {
  int i;
  pm_map_free(&E->fns, E->falloc, E->fud);
  E->fns_forgets++;
  pm_map_free(&E->known, E->falloc, E->fud);
  while (E->envs != NULL) {
    pm_Env *e = E->envs;
    E->envs = e->next;
    pm_free(E, e, sizeof(*e));
  }
  pm_sets_free(E); /* before the groups, which hold their own */
  for (i = 0; i < E->ngroups; i++)
    group_free(E, E->groups[i]);
  if (E->groups)
    pm_free(E, E->groups, (size_t)E->groupcap * sizeof(pm_Group *));
  E->groups = NULL;
  E->ngroups = E->groupcap = 0;
}

/* }====================================================== */
