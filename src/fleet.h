/*
** fleet.h -- the process's board of published snapshots.
**
** A host that runs a Lua state per worker thread or per tenant wants one
** view of them all.  Each state that opts in publishes its latest totals
** (a snapshot as perfmon.json writes it) under an entry of its own; any
** state, on any thread, copies every entry out and merges them
** (lua/perfmon/fleet.lua).  One mutex guards the board, held only to copy
** text in or out: the hook and the stopwatch never touch it.  An entry
** outlives its state: a state that closes keeps its last totals.
*/
#ifndef PM_FLEET_H
#define PM_FLEET_H

#include <stddef.h>
#include <stdint.h>

/* Puts json (len bytes) and label under entry *id, made when *id is 0;
** returns 0 when memory ran out (the entry keeps what it had). */
int pm_fleet_put (uint64_t *id, const char *label, const char *json,
                  size_t len);

/* The state of entry id closed: its entry stays, marked closed. */
void pm_fleet_close (uint64_t id);

/* Calls fn for every entry, in the order they were made, with copies taken
** under the lock (fn runs outside it and may take its time); returns 0
** when memory ran out or fn returned 0. */
typedef int (*pm_FleetVisit)(void *arg, uint64_t id, const char *label,
                             const char *json, size_t len, int closed);
int pm_fleet_each (pm_FleetVisit fn, void *arg);

#endif
