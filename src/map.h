/*
** map.h -- a hash map from addresses to tagged words.
**
** Open addressing with linear probing and backward-shift deletion, so
** lookups never meet tombstones.  Memory comes from the lua_State's own
** allocator (the one perfmon wraps), called directly: growing the map never
** runs the garbage collector.  A failed growth leaves the map as it was.
*/
#ifndef PM_MAP_H
#define PM_MAP_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

typedef struct pm_Map {
  const void **keys;
  uintptr_t *vals;
  size_t mask; /* capacity - 1; capacity is a power of 2, or 0 */
  size_t count;
} pm_Map;

static inline size_t pm_map_slot (const pm_Map *m, const void *key) {
  uintptr_t h = (uintptr_t)key;
  h ^= h >> 33; /* blocks are 16-byte aligned: mix the high bits down */
  h *= (uintptr_t)0xff51afd7ed558ccdULL;
  h ^= h >> 29;
  return (size_t)h & m->mask;
}

/* Looks key up; returns 0 when absent.  Inline: the hook calls it on every
** call event. */
static inline uintptr_t pm_map_get (const pm_Map *m, const void *key) {
  size_t i;
  if (m->count == 0)
    return 0;
  for (i = pm_map_slot(m, key); m->keys[i] != NULL; i = (i + 1) & m->mask)
    if (m->keys[i] == key)
      return m->vals[i];
  return 0;
}
/* Inserts or replaces; returns 0 when memory ran out. */
int pm_map_put (pm_Map *m, const void *key, uintptr_t val, lua_Alloc f,
                void *ud);
/* Removes key if present; returns its old value or 0. */
uintptr_t pm_map_del (pm_Map *m, const void *key);
/* Removes every entry for which drop(val) is true. */
void pm_map_filter (pm_Map *m, int (*drop)(uintptr_t val, void *arg),
                    void *arg);
void pm_map_free (pm_Map *m, lua_Alloc f, void *ud);
size_t pm_map_bytes (const pm_Map *m);

#endif
