/*
** records.c -- the profiler's records (see records.h).
*/
#include "records.h"

#include <string.h>

#include "hash.h"
#include "mem.h"

#define PROF_RING0 1024 /* samples room made at first */
/* functions or stacks at most: their numbers + 1 and 4 times the count
** (the index's room) must fit in 32 bits */
#define PROF_MAXRECORDS (1 << 28)

/*
** {======================================================
** Functions
** =======================================================
*/

/* A long name is cut at a UTF-8 character boundary, since half a character
** is not UTF-8 and the Gecko export is JSON: where the first byte cut is a
** continuation byte (10xxxxxx), its character began before the cut and is
** dropped whole (3 bytes back at most: no character is longer than 4). */
void pm_records_copy_name (char *to, const char *name) {
  size_t n = name ? strlen(name) : 0;
  int k;
  if (n >= PM_PROF_NAME) {
    n = PM_PROF_NAME - 1;
    for (k = 0; k < 3 && ((unsigned char)name[n] & 0xC0) == 0x80; k++)
      n--;
  }
  memcpy(to, name ? name : "", n);
  to[n] = '\0';
}

typedef struct FuncKey {
  const pm_Records *R;
  uint32_t hash;
  int line, group_id;
  char what;
  char src[PM_PROF_SRC];
  char name[PM_PROF_NAME];
} FuncKey;

static int func_same (const void *ud, uint32_t i) {
  const FuncKey *k = ud;
  const pm_Func *f = &k->R->funcs[i];
  return f->hash == k->hash && f->line == k->line &&
         f->group_id == k->group_id && f->what == k->what &&
         strcmp(f->name, k->name) == 0 && strcmp(f->src, k->src) == 0;
}

static uint32_t func_hash (const void *ud, uint32_t i) {
  return ((const FuncKey *)ud)->R->funcs[i].hash;
}

int64_t pm_records_func (pm_Records *R, const char *src, const char *name,
                         int defined, char what, const pm_Group *g) {
  FuncKey k;
  pm_Func *f;
  uint32_t found;
  size_t slen = strlen(src);
  k.R = R;
  k.line = defined;
  k.group_id = g != NULL ? g->id : 0;
  k.what = what;
  if (slen >= PM_PROF_SRC)
    slen = PM_PROF_SRC - 1;
  memcpy(k.src, src, slen);
  k.src[slen] = '\0';
  pm_records_copy_name(k.name, name);
  k.hash = pm_hash(PM_HASH_SEED, k.src, slen);
  k.hash = pm_hash(k.hash, k.name, strlen(k.name));
  k.hash = pm_hash_word(k.hash, (uint64_t)k.group_id);
  k.hash =
      pm_hash_word(k.hash, (uint64_t)(int64_t)defined * 8 + (uint64_t)what);
  if ((found = pm_index_find(&R->fidx, k.hash, func_same, &k)) != 0)
    return found - 1;
  if (R->nfuncs == PROF_MAXRECORDS ||
      (f = pm_grow(R->E, R->funcs, R->nfuncs, R->nfuncs + 1, &R->capfuncs,
                   sizeof(pm_Func), 64)) == NULL)
    return -1;
  R->funcs = f;
  f = &R->funcs[R->nfuncs];
  f->group = NULL;
  if (g != NULL && (f->group = pm_strdup(R->E, g->name)) == NULL)
    return -1;
  f->hash = k.hash;
  f->line = defined;
  f->group_id = k.group_id;
  f->what = what;
  memcpy(f->src, k.src, sizeof(f->src));
  memcpy(f->name, k.name, sizeof(f->name));
  if (!pm_index_add(R->E, &R->fidx, (uint32_t)R->nfuncs + 1, k.hash, func_hash,
                    &k)) {
    pm_strfree(R->E, f->group);
    return -1;
  }
  return R->nfuncs++;
}

/* }====================================================== */

/*
** {======================================================
** Stacks
** =======================================================
*/

typedef struct NodeKey {
  const pm_Records *R;
  uint32_t hash, parent, func;
  int line;
} NodeKey;

static int node_same (const void *ud, uint32_t i) {
  const NodeKey *k = ud;
  const pm_Node *n = &k->R->nodes[i];
  return n->hash == k->hash && n->parent == k->parent && n->func == k->func &&
         n->line == k->line;
}

static uint32_t node_hash (const void *ud, uint32_t i) {
  return ((const NodeKey *)ud)->R->nodes[i].hash;
}

int64_t pm_records_node (pm_Records *R, uint32_t parent, uint32_t func,
                         int line) {
  NodeKey k;
  pm_Node *n;
  uint32_t found;
  k.R = R;
  k.parent = parent;
  k.func = func;
  k.line = line;
  k.hash = pm_hash_word(pm_hash_word(pm_hash_word(PM_HASH_SEED, parent), func),
                        (uint64_t)line);
  if ((found = pm_index_find(&R->nidx, k.hash, node_same, &k)) != 0)
    return found - 1;
  if (R->nnodes == PROF_MAXRECORDS ||
      (n = pm_grow(R->E, R->nodes, R->nnodes, R->nnodes + 1, &R->capnodes,
                   sizeof(pm_Node), 64)) == NULL)
    return -1;
  R->nodes = n;
  n = &R->nodes[R->nnodes];
  n->parent = parent;
  n->func = func;
  n->line = line;
  n->hash = k.hash;
  n->self = n->total = 0;
  if (!pm_index_add(R->E, &R->nidx, (uint32_t)R->nnodes + 1, k.hash, node_hash,
                    &k))
    return -1;
  return R->nnodes++;
}

/* }====================================================== */

/*
** {======================================================
** Samples
** =======================================================
*/

/* Makes the ring room for one more sample when it can: twice as large, up
** to the limit, its samples in order from the start. */
static void ring_grow (pm_Records *R) {
  int need = R->cap > 0 ? 2 * R->cap : PROF_RING0, k;
  pm_Sample *r;
  if (R->limit != 0 && need > R->limit)
    need = R->limit; /* the ring is never larger than max_samples */
  if (need <= R->cap || R->cap > PROF_MAXRECORDS ||
      (r = pm_alloc(R->E, (size_t)need * sizeof(pm_Sample))) == NULL)
    return; /* the oldest go, or this one when there is none */
  for (k = 0; k < R->count; k++)
    r[k] = *pm_records_at(R, k);
  if (R->ring != NULL)
    pm_free(R->E, R->ring, (size_t)R->cap * sizeof(pm_Sample));
  R->ring = r;
  R->cap = need;
  R->first = 0;
}

const pm_Sample *pm_records_at (const pm_Records *R, int k) {
  return &R->ring[(R->first + k) % R->cap];
}

int pm_records_sample (pm_Records *R, uint32_t top, const pm_Sample *s) {
  uint32_t k;
  R->nodes[top - 1].self += s->weight;
  for (k = top; k != 0; k = R->nodes[k - 1].parent)
    R->nodes[k - 1].total += s->weight;
  if (R->count == R->cap)
    ring_grow(R);
  if (R->cap == 0) {
    R->dropped++;
    return 0;
  }
  if (R->count < R->cap) {
    R->ring[(R->first + R->count++) % R->cap] = *s;
  } else { /* full: the oldest goes */
    R->ring[R->first] = *s;
    R->first = (R->first + 1) % R->cap;
    R->dropped++;
  }
  return 1;
}

static void ring_free (pm_Records *R) {
  if (R->ring != NULL)
    pm_free(R->E, R->ring, (size_t)R->cap * sizeof(pm_Sample));
  R->ring = NULL;
  R->cap = R->first = R->count = 0;
}

void pm_records_limit (pm_Records *R, int limit) {
  if (limit != R->limit) {
    ring_free(R);
    R->limit = limit;
  }
}

/* }====================================================== */

void pm_records_free (pm_Records *R) {
  int i;
  for (i = 0; i < R->nfuncs; i++)
    pm_strfree(R->E, R->funcs[i].group);
  if (R->funcs != NULL)
    pm_free(R->E, R->funcs, (size_t)R->capfuncs * sizeof(pm_Func));
  if (R->nodes != NULL)
    pm_free(R->E, R->nodes, (size_t)R->capnodes * sizeof(pm_Node));
  pm_index_free(R->E, &R->fidx);
  pm_index_free(R->E, &R->nidx);
  R->funcs = NULL;
  R->nodes = NULL;
  R->nfuncs = R->capfuncs = R->nnodes = R->capnodes = 0;
  ring_free(R);
}
