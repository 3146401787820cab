/*
** snapshot.h -- what the example C hosts read out of a perfmon snapshot.
**
** A host reads a row (the process, or one group) of
** mon:snapshot():subtract(before) into a SnapStats, in C types, to print
** its table and check its figures.
*/
#ifndef SNAPSHOT_H
#define SNAPSHOT_H

#include <lua.h>

#define NDURATIONS 10 /* perfmon's durations[k]: events >= 2^(k-1) ms */

typedef struct SnapStats { /* one row of a perfmon snapshot */
  char name[64];
  long long cpu_us, ticks, blocking_us, longest;
  long long durations[NDURATIONS];
} SnapStats;

/* Field k of the table at index t, which must be an integer. */
long long snap_int_field (lua_State *L, int t, const char *k);
/* ... stats -> ...: reads the stats table on the top into *st, pops it. */
void snap_read_stats (lua_State *L, SnapStats *st);

#endif
