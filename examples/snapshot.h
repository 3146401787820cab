/*
** snapshot.h -- how the example C hosts take and read a perfmon snapshot.
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
  long long cpu_us, ticks, blocking_us, alloc_bytes, longest;
  long long durations[NDURATIONS];
} SnapStats;

/* Field k of the table at index t, which must be an integer. */
long long snap_int_field (lua_State *L, int t, const char *k);
/* ... stats -> ...: reads the stats table on the top into *st, pops it. */
void snap_read_stats (lua_State *L, SnapStats *st);
/* ... groups -> ... groups: reads groups[id] into *st. */
void snap_read_group (lua_State *L, int id, SnapStats *st);

/* Calls method `name` of the object in registry slot `ref` with no
** arguments, and leaves its one result on the stack. */
void snap_call_method (lua_State *L, int ref, const char *name);
/* ... -> ... before d: d = mon:snapshot():subtract(before), for the
** monitor and the snapshot in registry slots monitor_ref and before_ref;
** returns d's index. */
int snap_since (lua_State *L, int monitor_ref, int before_ref);

#endif
