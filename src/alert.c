/*
** alert.c -- detecting the watcher's alerts (see alert.h).
*/
#include "alert.h"

#include "group.h"

/*
** {======================================================
** Detection
** =======================================================
*/

/* Jank is visible when an animation ran during the event, or input came
** during it or shortly before it began. */
static int visible (pm_Engine *E) {
  return E->event_animated ||
         (E->last_input > 0 &&
          E->last_input >= E->event_since - E->input_window);
}

void pm_alert_check (pm_Engine *E, pm_Group *g, double jank_us, double self_us,
                     double blocking_us) {
  int reason = PM_ALERT_NONE;
  if (jank_us > g->alert_jank)
    g->alert_jank = jank_us;
  if (self_us > g->alert_self)
    g->alert_self = self_us;
  if (blocking_us > g->alert_blocking)
    g->alert_blocking = blocking_us;
  /* a dispatcher's inclusive time holds the plugin's it calls: only its
  ** own time says it janked, unless the watcher was asked otherwise */
  if (E->jank_threshold > 0 &&
      (E->alert_inclusive ? jank_us : self_us) >= E->jank_threshold)
    reason = PM_ALERT_JANK;
  else if (E->blocking_threshold > 0 && blocking_us >= E->blocking_threshold)
    reason = PM_ALERT_BLOCKING;
  if (reason == PM_ALERT_NONE)
    return;
  if (g->alert_reason == PM_ALERT_NONE) { /* the first since it was taken */
    g->alert_reason = reason;
    g->alert_visible = 0;
    g->alert_count = g->alert_self_count = 0;
    E->alerts_pending++;
  }
  g->alert_count++;
  g->alert_self_count +=
      reason == PM_ALERT_JANK && self_us >= E->jank_threshold;
  g->alert_visible |= reason == PM_ALERT_JANK && visible(E);
  g->alert_time = pm_realtime_us();
}

void pm_alert_event_begin (pm_Engine *E) {
  if (E->watching) {
    E->event_since = pm_wall_us();
    E->event_animated = E->animating;
  }
}

void pm_alert_input (pm_Engine *E) {
  E->last_input = pm_wall_us();
}

void pm_alert_animation (pm_Engine *E, int on) {
  E->animating = on;
  E->event_animated |= on;
}

void pm_alert_clear (pm_Engine *E) {
  int i;
  for (i = 0; i < E->ngroups; i++) {
    pm_Group *g = E->groups[i];
    g->alert_reason = PM_ALERT_NONE;
    g->alert_jank = g->alert_self = g->alert_blocking = 0;
  }
  E->alerts_pending = 0;
}

void pm_alert_thresholds (pm_Engine *E, int watching, double jank_us,
                          double blocking_us, double input_window_us,
                          int inclusive) {
  E->watching = watching;
  E->alert_inclusive = inclusive;
  E->jank_threshold = jank_us;
  E->blocking_threshold = blocking_us;
  E->input_window = input_window_us;
  E->alert_due = 0; /* the next event's end asks when to call again */
  if (!watching) /* nobody will take them: no stale alert later */
    pm_alert_clear(E);
}

/* }====================================================== */
