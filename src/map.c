/*
** map.c -- the address map (see map.h).
*/
#include "map.h"

static void insert_new (pm_Map *m, const void *key, uintptr_t val) {
  size_t i = pm_map_slot(m, key);
  while (m->keys[i] != NULL)
    i = (i + 1) & m->mask;
  m->keys[i] = key;
  m->vals[i] = val;
  m->count++;
}

static int grow (pm_Map *m, lua_Alloc f, void *ud) {
  size_t oldcap = m->keys ? m->mask + 1 : 0;
  size_t cap = oldcap ? oldcap * 2 : 64;
  const void **okeys = m->keys;
  uintptr_t *ovals = m->vals;
  const void **keys = f(ud, NULL, 0, cap * sizeof(*keys));
  uintptr_t *vals = keys ? f(ud, NULL, 0, cap * sizeof(*vals)) : NULL;
  size_t i;
  if (vals == NULL) {
    if (keys)
      f(ud, keys, cap * sizeof(*keys), 0);
    return 0;
  }
  for (i = 0; i < cap; i++)
    keys[i] = NULL;
  m->keys = keys;
  m->vals = vals;
  m->mask = cap - 1;
  m->count = 0;
  for (i = 0; i < oldcap; i++)
    if (okeys[i] != NULL)
      insert_new(m, okeys[i], ovals[i]);
  if (okeys) {
    f(ud, okeys, oldcap * sizeof(*okeys), 0);
    f(ud, ovals, oldcap * sizeof(*ovals), 0);
  }
  return 1;
}

int pm_map_put (pm_Map *m, const void *key, uintptr_t val, lua_Alloc f,
                void *ud) {
  size_t i;
  if (m->count > 0) {
    for (i = pm_map_slot(m, key); m->keys[i] != NULL; i = (i + 1) & m->mask)
      if (m->keys[i] == key) {
        m->vals[i] = val;
        return 1;
      }
  }
  /* keep the load under 1/2 so that probes stay short */
  if (m->keys == NULL || (m->count + 1) * 2 > m->mask + 1)
    if (!grow(m, f, ud))
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
    if (m->keys[j] == NULL)
      break;
    home = pm_map_slot(m, m->keys[j]);
    if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
      m->keys[i] = m->keys[j];
      m->vals[i] = m->vals[j];
      i = j;
    }
  }
  m->keys[i] = NULL;
}

uintptr_t pm_map_del (pm_Map *m, const void *key) {
  size_t i;
  if (m->count == 0)
    return 0;
  for (i = pm_map_slot(m, key); m->keys[i] != NULL; i = (i + 1) & m->mask)
    if (m->keys[i] == key) {
      uintptr_t v = m->vals[i];
      remove_at(m, i);
      return v;
    }
  return 0;
}

void pm_map_filter (pm_Map *m, int (*drop)(uintptr_t val, void *arg),
                    void *arg) {
  size_t i = 0;
  if (m->keys == NULL)
    return;
  while (i <= m->mask) {
    /* after a removal, slot i may hold a shifted entry: look again */
    if (m->keys[i] != NULL && drop(m->vals[i], arg))
      remove_at(m, i);
    else
      i++;
  }
}

void pm_map_free (pm_Map *m, lua_Alloc f, void *ud) {
  if (m->keys) {
    f(ud, m->keys, (m->mask + 1) * sizeof(*m->keys), 0);
    f(ud, m->vals, (m->mask + 1) * sizeof(*m->vals), 0);
  }
  m->keys = NULL;
  m->vals = NULL;
  m->mask = 0;
  m->count = 0;
}

size_t pm_map_bytes (const pm_Map *m) {
  return m->keys ? (m->mask + 1) * (sizeof(*m->keys) + sizeof(*m->vals)) : 0;
}
