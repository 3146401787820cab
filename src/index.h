/*
** index.h -- an index of records by the hash of their contents.
**
** The records themselves live in an array of their owner's; the index maps
** a hash to their numbers, by open addressing with linear probing (slots
** hold a record's number + 1; 0 is free), kept under half full.  Interning
** is a find, then an add of the new record at the end of the array.  The
** profiler's functions and stacks are interned this way, and so are the
** sets of groups.
*/
#ifndef PM_INDEX_H
#define PM_INDEX_H

#include <stdint.h>

typedef struct pm_Engine pm_Engine;

typedef struct pm_Index {
  uint32_t *slot;
  uint32_t mask; /* capacity - 1, or 0 when empty */
} pm_Index;

/* Whether record i (its number, from 0) has the contents ud describes. */
typedef int (*pm_IndexSame)(const void *ud, uint32_t i);
/* The hash of record i. */
typedef uint32_t (*pm_IndexHash)(const void *ud, uint32_t i);

/* The number + 1 of the record of hash h that same(ud, i) accepts, or 0. */
uint32_t pm_index_find (const pm_Index *x, uint32_t h, pm_IndexSame same,
                        const void *ud);
/* Indexes record n - 1, of hash h, the last of n; when the index is half
** full it is rebuilt larger, with hash_of(ud, i) for records 0..n-2.
** Returns 0 when memory ran out (the index is as it was). */
int pm_index_add (pm_Engine *E, pm_Index *x, uint32_t n, uint32_t h,
                  pm_IndexHash hash_of, const void *ud);
/* Rebuilds x for records 0..n-1, after records were removed and the rest
** renumbered: smaller once it is under 1/8 full (or freed when n is 0),
** else, or when a smaller one cannot be made, in place.  Never fails. */
void pm_index_rebuild (pm_Engine *E, pm_Index *x, uint32_t n,
                       pm_IndexHash hash_of, const void *ud);
void pm_index_free (pm_Engine *E, pm_Index *x);

#endif
