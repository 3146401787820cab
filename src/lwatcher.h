/*
** lwatcher.h -- core.watch, alerts, deliver, user_input, animation and
** watch_max_us: the watcher's (lua/perfmon/watcher.lua) way to the alerts
** (alert.h, lalert.h).
*/
#ifndef PM_LWATCHER_H
#define PM_LWATCHER_H

#include <lua.h>

/* Adds them to the table on the top of the stack. */
void pm_lwatcher_register (lua_State *L);

#endif
