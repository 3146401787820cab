/*
** source.c -- source prefixes and chunks' keys (see source.h).
*/
#include "source.h"

#include <string.h>

#include "engine.h"
#include "hash.h"
#include "mem.h"

struct pm_SrcKey {
  uint32_t hash;
  size_t len;
  pm_Source *first; /* the prefixes under it, by their next[slot_of] */
  char s[1]; /* len bytes, a '\0' after them */
};

/* A prefix attached to a group: under its name key (0) and its path keys
** (1, and 2 or NULL), distinct. */
struct pm_Source {
  pm_Group *g;
  pm_SrcKey *key[PM_SOURCE_KEYS];
  pm_Source *next[PM_SOURCE_KEYS]; /* in each key's list */
  pm_Source *older, *newer; /* in E's list */
};

/* Which of a's keys k is: the list of k goes on by a->next[it]. */
static int slot_of (const pm_Source *a, const pm_SrcKey *k) {
  return a->key[0] == k ? 0 : a->key[1] == k ? 1 : 2;
}

/* The key of kind and s (len bytes) in buf, cut at PM_KEY_MAX; its
** length. */
static size_t key_make (char *buf, int kind, const char *s, size_t len) {
  if (len > PM_KEY_MAX - 1)
    len = PM_KEY_MAX - 1;
  buf[0] = (char)kind;
  memcpy(buf + 1, s, len);
  return len + 1;
}

/*
** {======================================================
** The prefixes' keys, by hash
** =======================================================
*/

static size_t home (const pm_Sources *S, uint32_t h) {
  return (size_t)((h * 0x9e3779b9u) >> 7) & S->mask;
}

static pm_SrcKey *key_find (const pm_Sources *S, const char *s, size_t len,
                            uint32_t h) {
  size_t i;
  if (S->nkeys == 0)
    return NULL;
  for (i = home(S, h); S->slot[i].k != NULL; i = (i + 1) & S->mask)
    if (S->slot[i].hash == h && S->slot[i].k->len == len &&
        memcmp(S->slot[i].k->s, s, len) == 0)
      return S->slot[i].k;
  return NULL;
}

static void slot_put (pm_Sources *S, uint32_t h, pm_SrcKey *k) {
  size_t i = home(S, h);
  while (S->slot[i].k != NULL)
    i = (i + 1) & S->mask;
  S->slot[i].hash = h;
  S->slot[i].k = k;
}

/* Room for one key more, the table kept under half full. */
static int keys_grow (pm_Engine *E) {
  pm_Sources *S = &E->src;
  size_t cap = S->slot == NULL ? 16 : (S->mask + 1) * 2, i, oldcap;
  pm_KeySlot *old = S->slot;
  if (S->slot != NULL && (S->nkeys + 1) * 2 <= S->mask + 1)
    return 1;
  if (S->bylen == NULL) {
    S->bylen = pm_alloc(E, (PM_KEY_MAX + 1) * sizeof(*S->bylen));
    if (S->bylen == NULL)
      return 0;
    memset(S->bylen, 0, (PM_KEY_MAX + 1) * sizeof(*S->bylen));
  }
  if ((S->slot = pm_alloc(E, cap * sizeof(*S->slot))) == NULL) {
    S->slot = old;
    return 0;
  }
  memset(S->slot, 0, cap * sizeof(*S->slot));
  oldcap = old == NULL ? 0 : S->mask + 1;
  S->mask = cap - 1;
  for (i = 0; i < oldcap; i++)
    if (old[i].k != NULL)
      slot_put(S, old[i].hash, old[i].k);
  if (old != NULL)
    pm_free(E, old, oldcap * sizeof(*old));
  return 1;
}

/* The key of kind and s, made when new; NULL when memory ran out. */
static pm_SrcKey *key_get (pm_Engine *E, int kind, const char *s, size_t len) {
  pm_Sources *S = &E->src;
  char buf[PM_KEY_MAX];
  size_t n = key_make(buf, kind, s, len);
  uint32_t h = pm_hash(PM_HASH_SEED, buf, n);
  pm_SrcKey *k = key_find(S, buf, n, h);
  if (k != NULL)
    return k;
  if (!keys_grow(E) || (k = pm_alloc(E, sizeof(*k) + n)) == NULL)
    return NULL;
  k->hash = h;
  k->len = n;
  k->first = NULL;
  memcpy(k->s, buf, n);
  k->s[n] = '\0';
  slot_put(S, h, k);
  S->nkeys++;
  S->bylen[n]++;
  if (n > S->maxlen)
    S->maxlen = n;
  return k;
}

/* Frees k once no prefix is under it: backward-shift deletion, so that
** lookups meet no tombstones. */
static void key_drop (pm_Engine *E, pm_SrcKey *k) {
  pm_Sources *S = &E->src;
  size_t i = home(S, k->hash), j;
  if (k->first != NULL)
    return;
  while (S->slot[i].k != k)
    i = (i + 1) & S->mask;
  for (j = (i + 1) & S->mask; S->slot[j].k != NULL; j = (j + 1) & S->mask) {
    size_t h = home(S, S->slot[j].hash);
    /* j's entry may fill the hole at i unless its home lies in (i, j] */
    if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) {
      S->slot[i] = S->slot[j];
      i = j;
    }
  }
  S->slot[i].k = NULL;
  S->bylen[k->len]--;
  if (--S->nkeys == 0)
    S->maxlen = 0;
  pm_free(E, k, sizeof(*k) + k->len);
}

/* }====================================================== */

/*
** {======================================================
** Chunks' keys, sorted
** =======================================================
*/

static int key_cmp (const char *a, size_t alen, const char *b, size_t blen) {
  int c = memcmp(a, b, alen < blen ? alen : blen);
  return c != 0 ? c : (alen > blen) - (alen < blen);
}

/* The first chunk's key not below key. */
static int path_lower (const pm_Sources *S, const char *key, size_t len) {
  int lo = 0, hi = S->npaths;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (key_cmp(S->paths[mid]->key, S->paths[mid]->len, key, len) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int path_begins (const pm_Path *p, const pm_SrcKey *k) {
  return p->len >= k->len && memcmp(p->key, k->s, k->len) == 0;
}

pm_Path *pm_path_intern (pm_Engine *E, int kind, const char *s, size_t len) {
  pm_Sources *S = &E->src;
  char buf[PM_KEY_MAX];
  size_t n = key_make(buf, kind, s, len);
  int i = path_lower(S, buf, n);
  pm_Path *p, **a;
  if (i < S->npaths && key_cmp(S->paths[i]->key, S->paths[i]->len, buf, n) == 0)
    return (S->paths[i]->refs++, S->paths[i]);
  a = pm_grow(E, S->paths, S->npaths, S->npaths + 1, &S->pathcap, sizeof(*a),
              16);
  if (a == NULL)
    return NULL;
  S->paths = a;
  if ((p = pm_alloc(E, sizeof(*p))) == NULL)
    return NULL;
  memset(p, 0, sizeof(*p));
  if ((p->key = pm_alloc(E, n)) == NULL) {
    pm_free(E, p, sizeof(*p));
    return NULL;
  }
  memcpy(p->key, buf, n);
  p->len = n;
  p->refs = 1;
  memmove(&a[i + 1], &a[i], (size_t)(S->npaths - i) * sizeof(*a));
  a[i] = p;
  S->npaths++;
  return p;
}

static void path_free (pm_Engine *E, pm_Path *p) {
  pm_free(E, p->key, p->len);
  pm_free(E, p, sizeof(*p));
}

void pm_path_release (pm_Engine *E, pm_Path *p) {
  pm_Sources *S = &E->src;
  int i;
  if (--p->refs > 0)
    return;
  i = path_lower(S, p->key, p->len);
  memmove(&S->paths[i], &S->paths[i + 1],
          (size_t)(S->npaths - i - 1) * sizeof(*S->paths));
  S->npaths--;
  path_free(E, p);
}

void pm_path_note (pm_Path *p, const pm_Set *s) {
  int i;
  p->inherits |= s->n == 0;
  for (i = 0; i < p->nsets && i < PM_PATH_SETS; i++)
    if (p->sets[i] == s)
      return;
  if (p->nsets < PM_PATH_SETS)
    p->sets[p->nsets++] = s;
  else
    p->nsets = PM_PATH_SETS + 1;
}

/* What attaching or detaching a prefix forgets: the cached resolutions to
** the sets its chunks were resolved to, and where one was the empty set,
** the functions cached as their caller's (a Lua function of no group is
** cached as a C function is, resolve.c); all of them when one of those
** chunks remembers too many sets. */
#define FORGET_SETS 64

typedef struct Forget {
  const pm_Set *sets[FORGET_SETS];
  int n, all, inherits;
} Forget;

static void forget_add (Forget *f, const pm_Path *p) {
  int i, j;
  f->inherits |= p->inherits;
  if (p->nsets > PM_PATH_SETS)
    f->all = 1;
  for (i = 0; !f->all && i < p->nsets; i++) {
    for (j = 0; j < f->n && f->sets[j] != p->sets[i]; j++)
      ;
    if (j < f->n)
      continue;
    if (f->n == FORGET_SETS)
      f->all = 1;
    else
      f->sets[f->n++] = p->sets[i];
  }
}

/* The chunks k covers. */
static void forget_covered (const pm_Sources *S, const pm_SrcKey *k,
                            Forget *f) {
  int i;
  for (i = path_lower(S, k->s, k->len);
       !f->all && i < S->npaths && path_begins(S->paths[i], k); i++)
    forget_add(f, S->paths[i]);
}

static int cached_in (uintptr_t v, void *arg) {
  const Forget *f = arg;
  int i;
  if (f->inherits && v == PM_FN_C)
    return 1;
  for (i = 0; i < f->n; i++)
    if (v == ((uintptr_t)f->sets[i] | PM_FN_LUA))
      return 1;
  return 0;
}

static void forget (pm_Engine *E, Forget *f) {
  if (f->all)
    pm_functions_forget(E);
  else if (f->n > 0 || f->inherits) {
    pm_map_filter(&E->fns, cached_in, f);
    E->fns_forgets++; /* what was read from them is read again */
  }
}

static int covers (const pm_Sources *S, const pm_SrcKey *k) {
  int i = path_lower(S, k->s, k->len);
  return i < S->npaths && path_begins(S->paths[i], k);
}

/* }====================================================== */

/*
** {======================================================
** Prefixes
** =======================================================
*/

/* Takes a off the list of its key i. */
static void key_unlink (pm_Source *a, int i) {
  pm_Source **p = &a->key[i]->first;
  while (*p != a)
    p = &(*p)->next[slot_of(*p, a->key[i])];
  *p = a->next[i];
}

int pm_source_attach (pm_Engine *E, const char *name, size_t nlen,
                      const char *const *path, const size_t *plen, int npaths,
                      pm_Group *g) {
  pm_Sources *S = &E->src;
  pm_Source *a;
  pm_SrcKey *k[PM_SOURCE_KEYS] = {NULL, NULL, NULL};
  Forget f;
  int i, ok = 1;
  if ((k[0] = key_get(E, '=', name, nlen)) == NULL)
    return 0;
  for (a = k[0]->first; a != NULL; a = a->next[0])
    if (a->g == g)
      return 1;
  for (i = 0; ok && i < npaths && i < PM_SOURCE_KEYS - 1; i++)
    ok = (k[i + 1] = key_get(E, '@', path[i], plen[i])) != NULL;
  if (k[2] == k[1])
    k[2] = NULL;
  if (!ok || (a = pm_alloc(E, sizeof(*a))) == NULL) {
    for (i = PM_SOURCE_KEYS - 1; i >= 0; i--)
      if (k[i] != NULL)
        key_drop(E, k[i]);
    return 0;
  }
  a->g = g;
  for (i = 0; i < PM_SOURCE_KEYS; i++) {
    a->key[i] = k[i];
    a->next[i] = NULL;
    if (k[i] != NULL) {
      a->next[i] = k[i]->first;
      k[i]->first = a;
    }
  }
  a->newer = NULL;
  a->older = S->last;
  if (S->last != NULL)
    S->last->newer = a;
  else
    S->first = a;
  S->last = a;
  g->refs++;
  memset(&f, 0, sizeof(f));
  /* the functions resolved before the first prefix have no chunk keys */
  f.all = !S->used;
  S->used = 1;
  for (i = 0; i < PM_SOURCE_KEYS; i++)
    if (k[i] != NULL)
      forget_covered(S, k[i], &f);
  forget(E, &f);
  return 1;
}

int pm_source_detach (pm_Engine *E, const char *name, size_t nlen,
                      pm_Group *g) {
  pm_Sources *S = &E->src;
  char buf[PM_KEY_MAX];
  size_t n = key_make(buf, '=', name, nlen);
  pm_SrcKey *k = key_find(S, buf, n, pm_hash(PM_HASH_SEED, buf, n));
  pm_Source *a;
  Forget f;
  int i;
  for (a = k != NULL ? k->first : NULL; a != NULL && a->g != g; a = a->next[0])
    ;
  if (a == NULL)
    return 0;
  memset(&f, 0, sizeof(f));
  for (i = 0; i < PM_SOURCE_KEYS; i++)
    if (a->key[i] != NULL) {
      forget_covered(S, a->key[i], &f);
      key_unlink(a, i);
      key_drop(E, a->key[i]);
    }
  if (a->older != NULL)
    a->older->newer = a->newer;
  else
    S->first = a->newer;
  if (a->newer != NULL)
    a->newer->older = a->older;
  else
    S->last = a->older;
  pm_free(E, a, sizeof(*a));
  pm_group_release(E, g);
  forget(E, &f);
  return 1;
}

static int group_add (pm_Group **g, int n, pm_Group *x) {
  int i;
  for (i = 0; i < n; i++)
    if (g[i] == x)
      return n;
  g[n] = x;
  return n + 1;
}

/* The keys p begins with, found shortest first: the last PM_SET_MAX of
** them (each with a prefix at least: enough for as many groups), written
** to hit from the longest on; returns how many. */
static int keys_of (const pm_Sources *S, const pm_Path *p,
                    const pm_SrcKey **hit) {
  const pm_SrcKey *ring[PM_SET_MAX], *k;
  size_t i, lim = p->len < S->maxlen ? p->len : S->maxlen;
  uint32_t h = PM_HASH_SEED;
  int n = 0, j;
  for (i = 0; i < lim; i++) {
    h = pm_hash(h, p->key + i, 1);
    if (S->bylen[i + 1] != 0 && (k = key_find(S, p->key, i + 1, h)) != NULL)
      ring[n++ % PM_SET_MAX] = k;
  }
  for (j = 0; j < n && j < PM_SET_MAX; j++)
    hit[j] = ring[(n - 1 - j) % PM_SET_MAX];
  return j;
}

/* The keys of a chunk's two forms merged, longest first. */
int pm_source_groups (pm_Engine *E, pm_Path *const *paths, pm_Group **g,
                      int max) {
  const pm_SrcKey *hit[PM_CHUNK_KEYS][PM_SET_MAX], *k;
  int nhit[PM_CHUNK_KEYS] = {0, 0}, at[PM_CHUNK_KEYS] = {0, 0}, n = 0, i;
  for (i = 0; i < PM_CHUNK_KEYS && paths[i] != NULL; i++)
    nhit[i] = keys_of(&E->src, paths[i], hit[i]);
  while (n < max && (at[0] < nhit[0] || at[1] < nhit[1])) {
    const pm_Source *a;
    i = at[1] == nhit[1] ||
                (at[0] < nhit[0] && hit[0][at[0]]->len >= hit[1][at[1]]->len)
            ? 0
            : 1;
    k = hit[i][at[i]++];
    for (a = k->first; a != NULL && n < max; a = a->next[slot_of(a, k)])
      n = group_add(g, n, a->g);
  }
  return n;
}

void pm_sources_unmatched (pm_Engine *E,
                           void (*f)(void *ud, const char *prefix, size_t len,
                                     const pm_Group *g),
                           void *ud) {
  const pm_Source *a;
  for (a = E->src.first; a != NULL; a = a->newer)
    if (!covers(&E->src, a->key[0]) && !covers(&E->src, a->key[1]) &&
        (a->key[2] == NULL || !covers(&E->src, a->key[2])))
      f(ud, a->key[0]->s + 1, a->key[0]->len - 1, a->g);
}

void pm_sources_free (pm_Engine *E) {
  pm_Sources *S = &E->src;
  int i;
  while (S->first != NULL) {
    pm_Source *a = S->first;
    S->first = a->newer;
    for (i = 0; i < PM_SOURCE_KEYS; i++)
      if (a->key[i] != NULL) {
        key_unlink(a, i);
        key_drop(E, a->key[i]);
      }
    pm_free(E, a, sizeof(*a));
  }
  if (S->slot != NULL)
    pm_free(E, S->slot, (S->mask + 1) * sizeof(*S->slot));
  if (S->bylen != NULL)
    pm_free(E, S->bylen, (PM_KEY_MAX + 1) * sizeof(*S->bylen));
  for (i = 0; i < S->npaths; i++)
    path_free(E, S->paths[i]);
  if (S->paths != NULL)
    pm_free(E, S->paths, (size_t)S->pathcap * sizeof(*S->paths));
  memset(S, 0, sizeof(*S));
}

/* }====================================================== */
