/*
** index.c -- the index of records by content hash (see index.h).
*/
#include "index.h"

#include <string.h>

#include "engine.h"
#include "mem.h"

static size_t index_bytes (const pm_Index *x) {
  return x->slot != NULL ? ((size_t)x->mask + 1) * sizeof(uint32_t) : 0;
}

uint32_t pm_index_find (const pm_Index *x, uint32_t h, pm_IndexSame same,
                        const void *ud) {
  uint32_t j;
  if (x->slot == NULL)
    return 0;
  for (j = h & x->mask; x->slot[j] != 0; j = (j + 1) & x->mask)
    if (same(ud, x->slot[j] - 1))
      return x->slot[j];
  return 0;
}

static void put (pm_Index *x, uint32_t h, uint32_t i) {
  uint32_t j = h & x->mask;
  while (x->slot[j] != 0)
    j = (j + 1) & x->mask;
  x->slot[j] = i + 1;
}

/* A new index for records 0..n-1 (n < 2^30), at most a quarter full. */
static int rebuild (pm_Engine *E, pm_Index *x, uint32_t n, pm_IndexHash hash_of,
                    const void *ud) {
  pm_Index y;
  uint32_t cap = 64, i;
  while (cap < 4 * n)
    cap *= 2;
  if ((y.slot = pm_alloc(E, (size_t)cap * sizeof(uint32_t))) == NULL)
    return 0;
  memset(y.slot, 0, (size_t)cap * sizeof(uint32_t));
  y.mask = cap - 1;
  for (i = 0; i < n; i++)
    put(&y, hash_of(ud, i), i);
  pm_index_free(E, x);
  *x = y;
  return 1;
}

int pm_index_add (pm_Engine *E, pm_Index *x, uint32_t n, uint32_t h,
                  pm_IndexHash hash_of, const void *ud) {
  if (x->slot == NULL || 2 * n > x->mask + 1) {
    if (n > (1u << 28) || !rebuild(E, x, n - 1, hash_of, ud))
      return 0;
  }
  put(x, h, n - 1);
  return 1;
}

void pm_index_rebuild (pm_Engine *E, pm_Index *x, uint32_t n,
                       pm_IndexHash hash_of, const void *ud) {
  uint32_t i;
  if (n == 0) {
    pm_index_free(E, x);
    return;
  }
  if (x->mask + 1 > 64 && 8 * n < x->mask + 1 && rebuild(E, x, n, hash_of, ud))
    return;
  memset(x->slot, 0, index_bytes(x)); /* n records had room: they still do */
  for (i = 0; i < n; i++)
    put(x, hash_of(ud, i), i);
}

void pm_index_free (pm_Engine *E, pm_Index *x) {
  if (x->slot != NULL)
    pm_free(E, x->slot, index_bytes(x));
  x->slot = NULL;
  x->mask = 0;
}
