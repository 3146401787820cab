/*
** lalert.c -- delivering the watcher's alerts into Lua (see lalert.h).
*/
#include "lalert.h"

#include <math.h>
#include <stdio.h>

#include "alert.h"
#include "group.h"
#include "stopwatch.h"

static const char dispatcher_key = 'd'; /* registry[&key]: the dispatcher */

void pm_alert_watch (lua_State *L, pm_State *S, int idx, double jank_us,
                     double blocking_us, double input_window_us,
                     int inclusive) {
  lua_pushvalue(L, idx);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &dispatcher_key);
  pm_alert_thresholds(&S->e, !lua_isnil(L, idx), jank_us, blocking_us,
                      input_window_us, inclusive);
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
  lua_createtable(L, S->e.alerts_pending, 0);
  for (i = 0; i < S->e.ngroups; i++)
    if (S->e.groups[i]->alert_reason != PM_ALERT_NONE)
      push_alert(L, S->e.groups[i], ++n);
  pm_alert_clear(&S->e);
}

void pm_alert_deliver (lua_State *L, pm_State *S) {
  int status;
  if (!S->e.watching || S->e.quiet || S->e.in_event[S->e.loop])
    return;
  if (S->e.alerts_pending == 0 && pm_wall_us() < S->e.alert_due)
    return;
  if (!lua_checkstack(L, 2))
    return; /* no room to call it now; the next event end tries again */
  lua_rawgetp(L, LUA_REGISTRYINDEX, &dispatcher_key);
  pm_sw_quiet(&S->e, 1);
  status = lua_pcall(L, 0, 1, 0);
  pm_sw_quiet(&S->e, 0);
  if (status != LUA_OK) {
    fprintf(stderr, "perfmon: the watcher's dispatcher failed: %s\n",
            lua_isstring(L, -1) ? lua_tostring(L, -1) : "(no message)");
    S->e.alert_due = HUGE_VAL;
  } else {
    /* the dispatcher returns in how many µs it wants to be called again */
    S->e.alert_due =
        lua_isnumber(L, -1) ? pm_wall_us() + lua_tonumber(L, -1) : HUGE_VAL;
  }
  lua_pop(L, 1);
}

/* Inside an event nothing is delivered, and nothing waits for a poll: the
** event's end delivers. */
double pm_alert_poll (lua_State *L, pm_State *S) {
  if (S->e.in_event[S->e.loop])
    return -1;
  S->e.alert_due = 0;
  pm_alert_deliver(L, S);
  if (!S->e.watching || S->e.alert_due == HUGE_VAL)
    return -1;
  return S->e.alert_due > pm_wall_us() ? (S->e.alert_due - pm_wall_us()) / 1000
                                       : 0;
}
