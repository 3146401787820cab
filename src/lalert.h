/*
** lalert.h -- delivering the watcher's alerts into Lua.
**
** The dispatcher (lua/perfmon/watcher.lua) is called after an event, outside
** it, in a quiet region: what the listeners run is charged to no group.  It
** takes the alerts the engine detected (alert.h) as Lua tables.
*/
#ifndef PM_LALERT_H
#define PM_LALERT_H

#include "state.h"

/* Sets the dispatcher (the function at idx, or none when it is nil), the
** thresholds in µs, and whether jank is decided on inclusive time. */
void pm_alert_watch (lua_State *L, pm_State *S, int idx, double jank_us,
                     double blocking_us, double input_window_us, int inclusive);
/* Pushes the alerts waiting, { {source = ..., details = ...}, ... }, and
** forgets them. */
void pm_alert_take (lua_State *L, pm_State *S);
/* Calls the dispatcher when alerts wait or when the delay it returned last
** time has passed; outside events only.  Never raises: a failing
** dispatcher is reported on stderr. */
void pm_alert_deliver (lua_State *L, pm_State *S);
/* Calls the dispatcher now; returns in how many ms it wants the next
** call, or -1 when nothing waits (inside an event: its end delivers). */
double pm_alert_poll (lua_State *L, pm_State *S);

#endif
