/*
** alert.h -- detecting alerts: a group's time in one event crossed a
** threshold.
**
** Firefox's PerformanceWatcher, in two halves.  Detection (here, in the
** engine) runs at each event commit, and only while someone listens: per
** group it keeps the highest jank and blocking times since its last alert,
** and marks the group when one of them reaches its threshold.  Delivery
** (lalert.h) hands the marked groups to the Lua dispatcher after the event.
*/
#ifndef PM_ALERT_H
#define PM_ALERT_H

#include "engine.h"

enum { PM_ALERT_NONE, PM_ALERT_JANK, PM_ALERT_BLOCKING };

/* g ran jank_us of CPU (self_us of it in the innermost frame) and blocked
** blocking_us in the event just ended.  Jank is detected on self time, or
** on inclusive time where the watcher asked for it (alert_inclusive); the
** details say how many of those events janked on self time. */
void pm_alert_check (pm_Engine *E, pm_Group *g, double jank_us, double self_us,
                     double blocking_us);
void pm_alert_event_begin (pm_Engine *E);
void pm_alert_input (pm_Engine *E);
void pm_alert_animation (pm_Engine *E, int on);

/* Whether alerts are detected (someone listens), the thresholds in µs, and
** whether jank is decided on inclusive time rather than self time; when
** they are no longer detected, the alerts waiting go. */
void pm_alert_thresholds (pm_Engine *E, int watching, double jank_us,
                          double blocking_us, double input_window_us,
                          int inclusive);
/* Forgets every alert waiting: they were taken. */
void pm_alert_clear (pm_Engine *E);

#endif
