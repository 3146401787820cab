/*
** hash.h -- the one hash function: FNV-1a, 32 bits.
**
** For records interned by their contents (sets of groups, the profiler's
** functions and stacks, the cache of call names).  Addresses are hashed by
** the address map's own Fibonacci hashing (map.h), which needs no bytes.
*/
#ifndef PM_HASH_H
#define PM_HASH_H

#include <stddef.h>
#include <stdint.h>

#define PM_HASH_SEED 2166136261u

static inline uint32_t pm_hash (uint32_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  while (n--)
    h = (h ^ *s++) * 16777619u;
  return h;
}

static inline uint32_t pm_hash_word (uint32_t h, uint64_t v) {
  return pm_hash(h, &v, sizeof(v));
}

#endif
