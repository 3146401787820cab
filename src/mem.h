/*
** mem.h -- perfmon's own memory: its records, counted.
**
** Every record perfmon makes (groups, sets, environment and chunk records,
** shadow stacks, the profiler's tables) comes from the allocator Lua was
** given, called directly: making one never runs the garbage collector, and
** the allocator wrapper (watch.c) never counts it as the program's.
** E->bytes counts what is held, for perfmon.info().
*/
#ifndef PM_MEM_H
#define PM_MEM_H

#include "engine.h"

void *pm_alloc (pm_Engine *E, size_t n); /* NULL when memory ran out */
void pm_free (pm_Engine *E, void *p, size_t n);
/* The array a of n items of `size` bytes, with room for `need` (its
** capacity *cap doubled from `first` as often as it takes): a itself when
** it has the room, else a new copy (a is freed, *cap updated), or NULL
** when memory ran out (a and *cap as they were). */
void *pm_grow (pm_Engine *E, void *a, int n, int need, int *cap, size_t size,
               int first);
char *pm_strdup (pm_Engine *E, const char *s);
void pm_strfree (pm_Engine *E, char *s);

#endif
