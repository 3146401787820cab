/*
** lmonitor.h -- core.open and core.close: perfmon.monitor's probes, mode
** and rate checked, and the monitor opened or closed (monitor.h).
*/
#ifndef PM_LMONITOR_H
#define PM_LMONITOR_H

#include <lua.h>

/* The probes' names, in PM_PROBE_* order, NULL-ended. */
extern const char *const pm_probe_names[];

/* Adds open and close, rate_min_us and rate_max_us to the table on the
** top of the stack. */
void pm_lmonitor_register (lua_State *L);

#endif
