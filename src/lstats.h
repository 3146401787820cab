/*
** lstats.h -- core.stats, times, counts, info, fleet_publish and
** fleet_entries: what perfmon measured and holds, out to Lua tables.
*/
#ifndef PM_LSTATS_H
#define PM_LSTATS_H

#include <lua.h>

/* Adds them to the table on the top of the stack. */
void pm_lstats_register (lua_State *L);

#endif
