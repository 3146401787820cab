/*
** context.c -- the contexts a change of group moves between (context.h).
*/
#include "context.h"

#include <string.h>

#include "engine.h"
#include "hash.h"
#include "mem.h"

static size_t ctx_size (int nadd) {
  return sizeof(pm_Ctx) +
         (size_t)(nadd > 0 ? nadd - 1 : 0) * sizeof(pm_Group *);
}

static uint32_t ctx_hash (const pm_Ctx *from, const pm_Set *s,
                          const pm_Set *self) {
  uint32_t h = pm_hash_word(PM_HASH_SEED, (uintptr_t)from);
  return pm_hash_word(pm_hash_word(h, (uintptr_t)s), (uintptr_t)self);
}


/*
** {======================================================
** Interning
** =======================================================
*/

typedef struct CtxKey {
  const pm_Engine *E;
  const pm_Ctx *from;
  const pm_Set *set, *self;
} CtxKey;

static int ctx_same (const void *ud, uint32_t i) {
  const CtxKey *k = ud;
  const pm_Ctx *c = k->E->ctxs[i];
  return c->from == k->from && c->set == k->set && c->self == k->self;
}

static uint32_t ctx_hash_of (const void *ud, uint32_t i) {
  return ((const CtxKey *)ud)->E->ctxs[i]->hash;
}

/* Whether g runs in base b: in its list or in those below it. */
static int running (const pm_Ctx *b, const pm_Group *g) {
  int i;
  for (; b != NULL; b = b->up)
    for (i = 0; i < b->nadd; i++)
      if (b->add[i] == g)
        return 1;
  return 0;
}

/* A new context (b, s, self), indexed; NULL when memory ran out. */
static pm_Ctx *ctx_new (pm_Engine *E, pm_Ctx *b, const pm_Set *s,
                        const pm_Set *self, uint32_t h) {
  pm_Group *add[PM_SET_MAX];
  pm_Ctx *c, **a;
  CtxKey k;
  int n = 0, i;
  if (E->nctxs >= PM_CTX_MAX) {
    E->ctx_refused++;
    return NULL;
  }
  for (i = 0; i < s->n; i++)
    if (!running(b, s->g[i]))
      add[n++] = s->g[i];
  a = pm_grow(E, E->ctxs, E->nctxs, E->nctxs + 1, &E->ctxcap, sizeof(*a), 64);
  if (a == NULL)
    return NULL;
  E->ctxs = a;
  if ((c = pm_alloc(E, ctx_size(n))) == NULL)
    return NULL;
  memset(c, 0, ctx_size(n));
  c->base = n > 0 ? c : b;
  c->set = s;
  c->self = self;
  c->from = b;
  c->up = n > 0 ? b : NULL;
  c->hash = h;
  c->nadd = n;
  memcpy(c->add, add, (size_t)n * sizeof(*add));
  E->ctxs[E->nctxs] = c;
  k.E = E;
  if (!pm_index_add(E, &E->ctxidx, (uint32_t)E->nctxs + 1, h, ctx_hash_of,
                    &k)) {
    pm_free(E, c, ctx_size(n));
    return NULL;
  }
  E->nctxs++;
  return c;
}

pm_Ctx *pm_ctx_find (pm_Engine *E, pm_Ctx *c, const pm_Set *s,
                     const pm_Set *self) {
  pm_Set *cache = (pm_Set *)s; /* a set's only mutable part: its cache */
  pm_Ctx *b = c->base;
  CtxKey k;
  uint32_t h, found;
  if (b->last_set == s && b->last->self == self)
    c = b->last;
  else {
    k.E = E;
    k.from = b;
    k.set = s;
    k.self = self;
    h = ctx_hash(b, s, self);
    if ((found = pm_index_find(&E->ctxidx, h, ctx_same, &k)) != 0)
      c = E->ctxs[found - 1];
    else if ((c = ctx_new(E, b, s, self, h)) == NULL)
      return NULL;
    b->last_set = s;
    b->last = c;
  }
  cache->ctx_from = b;
  cache->ctx = c;
  return c;
}

pm_Ctx *pm_ctx_library (pm_Engine *E, pm_Ctx *c, const pm_Set *s) {
  const pm_Set *caller = c->self;
  if (caller != NULL && !caller->lib)
    return pm_ctx_find(E, c, s, caller); /* on its caller's behalf */
  return pm_ctx_find(E, c, s, s->n > 0 ? s : caller);
}

/* }====================================================== */

/*
** {======================================================
** Sweeping and teardown
** =======================================================
*/

void pm_ctx_init (pm_Engine *E) {
  E->ctx_sweep = pm_ctx_sweep;
  E->ctx_free = pm_ctx_free;
}

void pm_ctx_spare (pm_Ctx *c) {
  const pm_Ctx *b;
  int i;
  pm_set_spare(c->set);
  pm_set_spare(c->self);
  for (b = c->base; b != NULL; b = b->up)
    for (i = 0; i < b->nadd; i++)
      b->add[i]->dying = 0;
}

static void caches_clear (pm_Engine *E) {
  int i;
  for (i = 0; i < E->nsets; i++)
    E->sets[i]->ctx_from = E->sets[i]->ctx = NULL;
  for (i = 0; i < E->nctxs; i++) {
    E->ctxs[i]->last_set = NULL;
    E->ctxs[i]->last = NULL;
  }
  E->root.last_set = NULL;
  E->root.last = NULL;
}

/* The contexts charged since the last flush and the one running keep
** their groups.  A context is made after the one it was entered from, so
** one pass in the order they were made finds every context below a dying
** one. */
void pm_ctx_sweep (pm_Engine *E) {
  int i, n = 0;
  CtxKey k;
  pm_Ctx *charged;
  for (charged = E->charged; charged != NULL; charged = charged->next_charged)
    pm_ctx_spare(charged);
  pm_ctx_spare(E->ctx);
  for (i = 0; i < E->nctxs; i++) {
    pm_Ctx *c = E->ctxs[i];
    c->dying = c->from->dying || pm_set_dying(c->set) || pm_set_dying(c->self);
  }
  for (i = 0; i < E->nctxs; i++) {
    pm_Ctx *c = E->ctxs[i];
    if (c->dying) {
      if (c == E->blocking_ctx)
        E->blocking_ctx = NULL; /* a blocking call begun there goes on */
      pm_free(E, c, ctx_size(c->nadd));
    } else
      E->ctxs[n++] = c;
  }
  if (n == E->nctxs)
    return;
  E->nctxs = n;
  k.E = E;
  pm_index_rebuild(E, &E->ctxidx, (uint32_t)n, ctx_hash_of, &k);
  caches_clear(E);
}

void pm_ctx_free (pm_Engine *E) {
  int i;
  for (i = 0; i < E->nctxs; i++)
    pm_free(E, E->ctxs[i], ctx_size(E->ctxs[i]->nadd));
  if (E->ctxs != NULL)
    pm_free(E, E->ctxs, (size_t)E->ctxcap * sizeof(pm_Ctx *));
  pm_index_free(E, &E->ctxidx);
  E->ctxs = NULL;
  E->nctxs = E->ctxcap = 0;
  caches_clear(E);
  memset(&E->root, 0, sizeof(E->root)); /* the root: nothing runs */
  E->root.base = &E->root;
  E->root.flush = E->flushes; /* never listed: stopwatch.c's flush */
  E->ctx = &E->root;
  E->charged = NULL;
  E->blocking_ctx = NULL;
}

/* }====================================================== */
