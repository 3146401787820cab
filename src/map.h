/*
** map.h -- a hash map from addresses to tagged words.
**
** Open addressing with linear probing and backward-shift deletion, so
** lookups never meet tombstones.  Memory comes from an allocator with
** lua_Alloc's contract (pm_Allocf): perfmon passes the lua_State's own, the
** one it wraps, called directly, so growing the map never runs the garbage
** collector.  A failed growth leaves the map as it was.
**
** Maps may share a filter (pm_MapFilter) of 8 bits for each of their
** slots, which says which keys any of them may hold: the allocator wrapper
** asks it at every free, most of which are of blocks no map ever held, in
** one test however many maps there are, and the filter's byte is likelier
** in the cache than an entry's line.  A key sets its bit; deletions leave
** bits set (others may share them) until the filter is made again from the
** keys, once as many keys were deleted as half its bytes.
*/
#ifndef PM_MAP_H
#define PM_MAP_H

#include <stddef.h>
#include <stdint.h>

/* lua_Alloc's signature and contract, without lua.h. */
typedef void *(*pm_Allocf)(void *ud, void *ptr, size_t osize, size_t nsize);

typedef struct pm_MapEntry {
  const void *key; /* NULL: a free slot */
  uintptr_t val;
} pm_MapEntry;

typedef struct pm_Map pm_Map;

typedef struct pm_MapFilter {
  unsigned char *bits; /* size bytes, or NULL */
  size_t size; /* a power of 2, at least its maps' slots in all; or 0 */
  size_t dels; /* deletions from its maps since it was made */
  unsigned shift; /* 64 - log2(size * 8) */
  int nmaps;
  pm_Map *maps[2];
} pm_MapFilter;

struct pm_Map {
  pm_MapEntry *e; /* key and value side by side: a hit reads one line */
  size_t mask; /* capacity - 1; capacity is a power of 2, or 0 */
  size_t count;
  unsigned shift; /* 64 - log2(capacity) */
  pm_MapFilter *filter; /* the filter its keys are in, or NULL */
  const void *probed; /* the key pm_map_promote probed last */
};

/* Fibonacci hashing: the top bits of the product depend on every bit of
** the address, so the alignment zeros at the bottom do no harm. */
static inline size_t pm_map_slot (const pm_Map *m, const void *key) {
  return (size_t)(((uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15u) >> m->shift);
}

/* 0 when no map of f holds key; 1 when one may. */
static inline int pm_map_may_hold (const pm_MapFilter *f, const void *key) {
  size_t b;
  if (f->size == 0)
    return 0;
  b = (size_t)(((uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15u) >> f->shift);
  return (f->bits[b >> 3] >> (b & 7)) & 1;
}

/* Whether key's home slot settles its lookup: it holds key (*v is its
** value) or nothing (*v is 0); 0 when it holds another key, and the rest
** of the run must be probed (pm_map_get).  Most keys are at home: the
** hook looks there inline and leaves the rest out of line, so that its
** common case needs few registers. */
static inline int pm_map_home (const pm_Map *m, const void *key, uintptr_t *v) {
  const pm_MapEntry *e;
  *v = 0;
  if (m->count == 0)
    return 1;
  e = &m->e[pm_map_slot(m, key)];
  if (e->key == key)
    *v = e->val;
  return e->key == key || e->key == NULL;
}

/* The rest of key's run after its home slot. */
uintptr_t pm_map_probe (const pm_Map *m, const void *key);
/* pm_map_probe that, for the second probe of key in a row, also moves it
** to its home slot, and the key that was there to where key was: a key
** looked up over and over (the hook's hot function) then stays where
** pm_map_home finds it, while two keys of one home slot looked up in turn
** do not take it from each other at every lookup.  Every key of the run
** stays reachable: the slots between its home and its place are all
** taken, before the swap as after. */
uintptr_t pm_map_promote (pm_Map *m, const void *key);

/* Looks key up; returns 0 when absent. */
static inline uintptr_t pm_map_get (const pm_Map *m, const void *key) {
  uintptr_t v;
  return pm_map_home(m, key, &v) ? v : pm_map_probe(m, key);
}
/* Puts the keys of m, empty, in filter f (at most two maps a filter). */
static inline void pm_map_share (pm_Map *m, pm_MapFilter *f) {
  m->filter = f;
  f->maps[f->nmaps++] = m;
}
/* Inserts or replaces; returns 0 when memory ran out. */
int pm_map_put (pm_Map *m, const void *key, uintptr_t val, pm_Allocf f,
                void *ud);
/* Removes key if present; returns its old value or 0. */
uintptr_t pm_map_del (pm_Map *m, const void *key);
/* Removes every entry for which drop(val) is true. */
void pm_map_filter (pm_Map *m, int (*drop)(uintptr_t val, void *arg),
                    void *arg);
/* Gives memory back once it is under 1/8 full: never from the hook or the
** allocator, only where a long pause is the caller's own (a sweep). */
void pm_map_shrink (pm_Map *m, pm_Allocf f, void *ud);
void pm_map_free (pm_Map *m, pm_Allocf f, void *ud);
/* The bytes of m's entries; a filter's are its size. */
size_t pm_map_bytes (const pm_Map *m);

#endif
