/*
** alert.h -- alerts: a group's time in one event crossed a threshold.
**
** Firefox's PerformanceWatcher, in two halves.  Detection runs at each
** event commit, and only while a dispatcher is set (someone listens): per
** group it keeps the highest jank and blocking times since its last alert,
** and marks the group when one of them reaches its threshold.  Delivery
** calls the dispatcher (lua/perfmon/watcher.lua) after the event, outside
** it, in a quiet region: what the listeners run is charged to no group.
*/
#ifndef PM_ALERT_H
#define PM_ALERT_H

#include "state.h"

enum { PM_ALERT_NONE, PM_ALERT_JANK, PM_ALERT_BLOCKING };

/* g ran jank_us of CPU (self_us of it in the innermost frame) and blocked
** blocking_us in the event just ended.  Jank is detected on inclusive
** time; the details say how many of those events janked on self time. */
void pm_alert_check (pm_State *S, pm_Group *g, double jank_us, double self_us,
                     double blocking_us);
void pm_alert_event_begin (pm_State *S);
void pm_alert_input (pm_State *S);
void pm_alert_animation (pm_State *S, int on);

/* Sets the dispatcher (the function at idx, or none when it is nil) and the
** thresholds in µs. */
void pm_alert_watch (lua_State *L, pm_State *S, int idx, double jank_us,
                     double blocking_us, double input_window_us);
/* Pushes the alerts waiting, { {source = ..., details = ...}, ... }, and
** forgets them. */
void pm_alert_take (lua_State *L, pm_State *S);
/* Calls the dispatcher when alerts wait or when the delay it returned last
** time has passed;
** outside events only.  Never raises: a failing dispatcher is reported on
** stderr. */
void pm_alert_deliver (lua_State *L, pm_State *S);
/* Calls the dispatcher now (outside events); returns in how many ms it
** wants the next call, or -1 when nothing waits. */
double pm_alert_poll (lua_State *L, pm_State *S);

#endif
