/*
** alert.c -- detection and delivery of the watcher's alerts.
*/
#include "alert.h"

#include <math.h>
#include <stdio.h>

#include <lauxlib.h>

#include "stopwatch.h"

static const char dispatcher_key = 'd'; /* registry[&key]: the dispatcher */

/*
** {======================================================
** Detection
** =======================================================
*/

/* Jank is visible when an animation ran during the event, or input came
** during it or shortly before it began. */
static int visible (pm_State *S) {
  return S->event_animated ||
         (S->last_input > 0 &&
          S->last_input >= S->event_since - S->input_window);
}

void pm_alert_check (pm_State *S, pm_Group *g, double jank_us, double self_us,
                     double blocking_us) {
  int reason = PM_ALERT_NONE;
  if (jank_us > g->alert_jank)
    g->alert_jank = jank_us;
  if (self_us > g->alert_self)
    g->alert_self = self_us;
  if (blocking_us > g->alert_blocking)
    g->alert_blocking = blocking_us;
  if (S->jank_threshold > 0 && jank_us >= S->jank_threshold)
    reason = PM_ALERT_JANK;
  else if (S->blocking_threshold > 0 && blocking_us >= S->blocking_threshold)
    reason = PM_ALERT_BLOCKING;
  if (reason == PM_ALERT_NONE)
    return;
  if (g->alert_reason == PM_ALERT_NONE) { /* the first since it was taken */
    g->alert_reason = reason;
    g->alert_visible = 0;
    g->alert_count = g->alert_self_count = 0;
    S->alerts_pending++;
  }
  g->alert_count++;
  g->alert_self_count +=
      reason == PM_ALERT_JANK && self_us >= S->jank_threshold;
  g->alert_visible |= reason == PM_ALERT_JANK && visible(S);
  g->alert_time = pm_realtime_us();
}

void pm_alert_event_begin (pm_State *S) {
  if (S->watching) {
    S->event_since = pm_wall_us();
    S->event_animated = S->animating;
  }
}

void pm_alert_input (pm_State *S) {
  S->last_input = pm_wall_us();
}

void pm_alert_animation (pm_State *S, int on) {
  S->animating = on;
  S->event_animated |= on;
}

/* }====================================================== */

/*
** {======================================================
** Delivery
** =======================================================
*/

void pm_alert_watch (lua_State *L, pm_State *S, int idx, double jank_us,
                     double blocking_us, double input_window_us) {
  int i;
  S->watching = !lua_isnil(L, idx);
  lua_pushvalue(L, idx);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &dispatcher_key);
  S->jank_threshold = jank_us;
  S->blocking_threshold = blocking_us;
  S->input_window = input_window_us;
  S->alert_due = 0; /* the next event's end asks it when to call again */
  if (!S->watching) { /* nobody will take them: no stale alert later */
    for (i = 0; i < S->ngroups; i++) {
      pm_Group *g = S->groups[i];
      g->alert_reason = PM_ALERT_NONE;
      g->alert_jank = g->alert_self = g->alert_blocking = 0;
    }
    S->alerts_pending = 0;
  }
}

/* ... list -> ... list; appends {source = {...}, details = {...}} */
static void push_alert (lua_State *L, const pm_Group *g, int n) {
  int ids[PM_ENV_GROUPS + 2], nids, k;
  lua_createtable(L, 0, 2);
  lua_createtable(L, 0, 4); /* ... list alert source */
  lua_pushinteger(L, g->id);
  lua_setfield(L, -2, "id");
  lua_pushstring(L, g->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, g->kind);
  lua_setfield(L, -2, "kind");
  nids = pm_memberships(g, ids, PM_ENV_GROUPS + 2);
  lua_createtable(L, nids, 0);
  for (k = 0; k < nids; k++) {
    lua_pushinteger(L, ids[k]);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "memberships");
  lua_setfield(L, -2, "source");
  lua_createtable(L, 0, 8); /* ... list alert details */
  lua_pushstring(L, g->alert_reason == PM_ALERT_JANK ? "jank" : "blocking");
  lua_setfield(L, -2, "reason");
  lua_pushinteger(L, (lua_Integer)g->alert_jank);
  lua_setfield(L, -2, "highest_jank_us");
  lua_pushinteger(L, (lua_Integer)g->alert_self);
  lua_setfield(L, -2, "highest_self_us");
  lua_pushinteger(L, (lua_Integer)g->alert_blocking);
  lua_setfield(L, -2, "highest_blocking_us");
  lua_pushboolean(L, g->alert_visible);
  lua_setfield(L, -2, "visible");
  lua_pushinteger(L, (lua_Integer)g->alert_time);
  lua_setfield(L, -2, "time_us");
  lua_pushinteger(L, g->alert_count);
  lua_setfield(L, -2, "count");
  lua_pushinteger(L, g->alert_self_count);
  lua_setfield(L, -2, "self_count");
  lua_setfield(L, -2, "details");
  lua_rawseti(L, -2, n);
}

/* Two passes: a memory error while the list is built loses no alert. */
void pm_alert_take (lua_State *L, pm_State *S) {
  int i, n = 0;
  lua_createtable(L, S->alerts_pending, 0);
  for (i = 0; i < S->ngroups; i++)
    if (S->groups[i]->alert_reason != PM_ALERT_NONE)
      push_alert(L, S->groups[i], ++n);
  for (i = 0; i < S->ngroups; i++) {
    pm_Group *g = S->groups[i];
    g->alert_reason = PM_ALERT_NONE;
    g->alert_jank = g->alert_self = g->alert_blocking = 0;
  }
  S->alerts_pending = 0;
}

void pm_alert_deliver (lua_State *L, pm_State *S) {
  int status;
  if (!S->watching || S->quiet || S->in_event[S->loop])
    return;
  if (S->alerts_pending == 0 && pm_wall_us() < S->alert_due)
    return;
  if (!lua_checkstack(L, 2))
    return; /* no room to call it now; the next event end tries again */
  lua_rawgetp(L, LUA_REGISTRYINDEX, &dispatcher_key);
  pm_sw_quiet(S, 1);
  status = lua_pcall(L, 0, 1, 0);
  pm_sw_quiet(S, 0);
  if (status != LUA_OK) {
    fprintf(stderr, "perfmon: the watcher's dispatcher failed: %s\n",
            lua_isstring(L, -1) ? lua_tostring(L, -1) : "(no message)");
    S->alert_due = HUGE_VAL;
  } else {
    /* the dispatcher returns in how many µs it wants to be called again */
    S->alert_due =
        lua_isnumber(L, -1) ? pm_wall_us() + lua_tonumber(L, -1) : HUGE_VAL;
  }
  lua_pop(L, 1);
}

/* }====================================================== */

double pm_alert_poll (lua_State *L, pm_State *S) {
  S->alert_due = 0;
  pm_alert_deliver(L, S);
  if (!S->watching || S->alert_due == HUGE_VAL)
    return -1;
  return S->alert_due > pm_wall_us() ? (S->alert_due - pm_wall_us()) / 1000 : 0;
}
