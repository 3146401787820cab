/*
** map.c -- the address map (see map.h).
*/
#include "map.h"

#include <string.h>

/* The slot holding key, or the free slot where its probe ends (m has
** room: its load stays under 1/2). */
static size_t find (const pm_Map *m, const void *key) {
  size_t i = pm_map_slot(m, key);
  while (m->e[i].key != NULL && m->e[i].key != key)
    i = (i + 1) & m->mask;
  return i;
}

uintptr_t pm_map_probe (const pm_Map *m, const void *key) {
  size_t i = find(m, key);
  return m->e[i].key == key ? m->e[i].val : 0;
}

uintptr_t pm_map_promote (pm_Map *m, const void *key) {
  size_t i = find(m, key), home = pm_map_slot(m, key);
  pm_MapEntry e;
  if (m->e[i].key != key)
    return 0;
  if (m->probed != key) {
    m->probed = key;
    return m->e[i].val;
  }
  e = m->e[i];
  m->e[i] = m->e[home];
  m->e[home] = e;
  return e.val;
}

/*
** {======================================================
** The shared filter
** =======================================================
*/

static void filter_set (pm_MapFilter *f, const void *key) {
  size_t b;
  if (f == NULL || f->size == 0)
    return;
  b = (size_t)(((uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15u) >> f->shift);
  f->bits[b >> 3] |= (unsigned char)(1u << (b & 7));
}

/* Makes the filter again from the keys its maps hold. */
static void filter_make (pm_MapFilter *f) {
  size_t i;
  int k;
  if (f->size == 0)
    return;
  memset(f->bits, 0, f->size);
  for (k = 0; k < f->nmaps; k++) {
    const pm_Map *m = f->maps[k];
    for (i = 0; m->e != NULL && i <= m->mask; i++)
      if (m->e[i].key != NULL)
        filter_set(f, m->e[i].key);
  }
  f->dels = 0;
}

static unsigned log2_of (size_t cap) {
  unsigned n = 0;
  while (((size_t)1 << n) < cap)
    n++;
  return n;
}

/* Sizes f for its maps' slots and `extra` more, and makes it again; 0 when
** memory ran out (f stays as it was, which still holds every key: a
** smaller filter only lets more frees through). */
static int filter_fit (pm_MapFilter *f, size_t extra, pm_Allocf fa, void *ud) {
  size_t slots = extra, size = 0;
  unsigned char *bits = NULL;
  int k;
  for (k = 0; k < f->nmaps; k++)
    if (f->maps[k]->e != NULL)
      slots += f->maps[k]->mask + 1;
  if (slots > 0)
    size = (size_t)1 << log2_of(slots);
  if (size == f->size)
    return 1;
  if (size > 0 && (bits = fa(ud, NULL, 0, size)) == NULL)
    return 0;
  if (f->bits != NULL)
    fa(ud, f->bits, f->size, 0);
  f->bits = bits;
  f->size = size;
  f->shift = 64 - log2_of(size * 8);
  filter_make(f);
  return 1;
}

/* }====================================================== */

static void insert_new (pm_Map *m, const void *key, uintptr_t val) {
  size_t i = find(m, key);
  m->e[i].key = key;
  m->e[i].val = val;
  m->count++;
  filter_set(m->filter, key);
}

static size_t block_size (size_t cap) {
  return cap * sizeof(pm_MapEntry);
}

static int resize (pm_Map *m, size_t cap, pm_Allocf f, void *ud) {
  size_t oldcap = m->e ? m->mask + 1 : 0;
  pm_MapEntry *old = m->e;
  pm_MapEntry *e = f(ud, NULL, 0, block_size(cap));
  size_t i;
  if (e == NULL)
    return 0;
  for (i = 0; i < cap; i++)
    e[i].key = NULL;
  m->e = e;
  m->mask = cap - 1;
  m->shift = 64 - log2_of(cap);
  m->count = 0;
  for (i = 0; i < oldcap; i++)
    if (old[i].key != NULL)
      insert_new(m, old[i].key, old[i].val);
  if (old)
    f(ud, old, block_size(oldcap), 0);
  return 1;
}

int pm_map_put (pm_Map *m, const void *key, uintptr_t val, pm_Allocf f,
                void *ud) {
  if (m->count > 0) {
    size_t i = find(m, key);
    if (m->e[i].key == key) {
      m->e[i].val = val;
      return 1;
    }
  }
  /* keep the load under 1/2 so that probes stay short */
  if (m->e == NULL || (m->count + 1) * 2 > m->mask + 1) {
    size_t oldcap = m->e ? m->mask + 1 : 0, cap = oldcap ? 2 * oldcap : 64;
    /* the filter first: a key may go in only where a filter has its bit */
    if (m->filter != NULL && !filter_fit(m->filter, cap - oldcap, f, ud) &&
        m->filter->size == 0)
      return 0;
    if (!resize(m, cap, f, ud))
      return 0;
  }
  insert_new(m, key, val);
  return 1;
}

/* Backward-shift deletion: pull later entries of the probe run into the
** hole so that every key stays reachable from its home slot. */
static void remove_at (pm_Map *m, size_t i) {
  size_t j = i;
  m->count--;
  for (;;) {
    size_t home;
    j = (j + 1) & m->mask;
    if (m->e[j].key == NULL)
      break;
    home = pm_map_slot(m, m->e[j].key);
    if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
      m->e[i] = m->e[j];
      i = j;
    }
  }
  m->e[i].key = NULL;
}

uintptr_t pm_map_del (pm_Map *m, const void *key) {
  size_t i;
  uintptr_t v;
  if (m->count == 0)
    return 0;
  i = find(m, key);
  if (m->e[i].key != key)
    return 0;
  v = m->e[i].val;
  remove_at(m, i);
  if (m->filter != NULL && ++m->filter->dels > m->filter->size / 2)
    filter_make(m->filter);
  return v;
}

void pm_map_filter (pm_Map *m, int (*drop)(uintptr_t val, void *arg),
                    void *arg) {
  size_t i = 0, count;
  if (m->e == NULL)
    return;
  count = m->count;
  while (i <= m->mask) {
    /* after a removal, slot i may hold a shifted entry: look again */
    if (m->e[i].key != NULL && drop(m->e[i].val, arg))
      remove_at(m, i);
    else
      i++;
  }
  /* a walk that drops nothing keeps the filter */
  if (m->count != count && m->filter != NULL)
    filter_make(m->filter);
}

void pm_map_shrink (pm_Map *m, pm_Allocf f, void *ud) {
  size_t cap = 64;
  if (m->e == NULL || m->mask + 1 <= 64 || m->count * 8 >= m->mask + 1)
    return;
  while (cap < m->count * 4)
    cap *= 2;
  /* when memory runs out, m and its filter stay as they were */
  if (resize(m, cap, f, ud) && m->filter != NULL)
    filter_fit(m->filter, 0, f, ud);
}

void pm_map_free (pm_Map *m, pm_Allocf f, void *ud) {
  if (m->e)
    f(ud, m->e, block_size(m->mask + 1), 0);
  m->e = NULL;
  m->mask = 0;
  m->count = 0;
  if (m->filter != NULL)
    filter_fit(m->filter, 0, f, ud); /* with no map left: freed */
}

size_t pm_map_bytes (const pm_Map *m) {
  return m->e ? block_size(m->mask + 1) : 0;
}
