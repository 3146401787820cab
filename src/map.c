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

static void filter_set (pm_Map *m, const void *key) {
  size_t b = pm_map_bit(m, key);
  m->bits[b >> 3] |= (unsigned char)(1u << (b & 7));
}

static void insert_new (pm_Map *m, const void *key, uintptr_t val) {
  size_t i = find(m, key);
  m->e[i].key = key;
  m->e[i].val = val;
  m->count++;
  filter_set(m, key);
}

/* Makes the filter again from the keys there are. */
static void filter_make (pm_Map *m) {
  size_t i;
  if (m->e == NULL)
    return;
  memset(m->bits, 0, m->mask + 1);
  for (i = 0; i <= m->mask; i++)
    if (m->e[i].key != NULL)
      filter_set(m, m->e[i].key);
  m->dels = 0;
}

/* The entries and the filter, in one block. */
static size_t block_size (size_t cap) {
  return cap * (sizeof(pm_MapEntry) + 1);
}

static unsigned log2_of (size_t cap) {
  unsigned n = 0;
  while (((size_t)1 << n) < cap)
    n++;
  return n;
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
  m->bits = (unsigned char *)(e + cap);
  memset(m->bits, 0, cap);
  m->mask = cap - 1;
  m->shift = 64 - log2_of(cap);
  m->count = 0;
  m->dels = 0;
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
  if (m->e == NULL || (m->count + 1) * 2 > m->mask + 1)
    if (!resize(m, m->e ? (m->mask + 1) * 2 : 64, f, ud))
      return 0;
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
  if (++m->dels > (m->mask + 1) / 2)
    filter_make(m);
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
  if (m->count != count) /* a walk that drops nothing keeps the filter */
    filter_make(m);
}

void pm_map_shrink (pm_Map *m, pm_Allocf f, void *ud) {
  size_t cap = 64;
  if (m->e == NULL || m->mask + 1 <= 64 || m->count * 8 >= m->mask + 1)
    return;
  while (cap < m->count * 4)
    cap *= 2;
  resize(m, cap, f, ud); /* when memory runs out, m stays as it was */
}

void pm_map_free (pm_Map *m, pm_Allocf f, void *ud) {
  if (m->e)
    f(ud, m->e, block_size(m->mask + 1), 0);
  m->e = NULL;
  m->bits = NULL;
  m->mask = 0;
  m->count = 0;
  m->dels = 0;
}

size_t pm_map_bytes (const pm_Map *m) {
  return m->e ? block_size(m->mask + 1) : 0;
}
