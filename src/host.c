/*
** host.c -- the public C API of perfmon.h.
**
** Each entry point finds the pm_State, settles the shadow stack of the
** calling thread (a host may have caught an error with lua_pcall, or a
** coroutine may have yielded back to C) and hands over to the stopwatch.
*/
#include "perfmon.h"

#include <lauxlib.h>

#include "alert.h"
#include "hook.h"
#include "lalert.h"
#include "sampled.h"
#include "stopwatch.h"

_Static_assert(PM_OK == PERFMON_OK && PM_EMISUSE == PERFMON_EMISUSE,
               "the engine's codes are the API's");

/* No perfmon of this copy's runs here: never loaded, closing, or loaded
** by another copy of perfmon's code, which these calls cannot reach. */
static int missing (lua_State *L) {
  return pm_state_other(L) != NULL ? PERFMON_EOTHERCOPY : PERFMON_ENOTLOADED;
}

static int with_state (lua_State *L, int (*f)(pm_State *S)) {
  pm_State *S = pm_state_get(L);
  if (S == NULL)
    return missing(L);
  pm_hook_settle(L, S);
  return f(S);
}

/* An event's boundary cancels every stopwatch under way; the code that
** marked it goes on in its own groups (pm_hook_restart). */
static int event_begin (pm_State *S) {
  int rc = pm_sw_event_begin(&S->e);
  if (rc == PERFMON_OK)
    pm_hook_restart(S);
  return rc;
}

int perfmon_event_begin (lua_State *L) {
  return with_state(L, event_begin);
}

/* The watcher's alerts are delivered once the event is over.  Its end is
** where a host that never takes a snapshot (the watcher alone) frees the
** groups that died in it: chunks compiled per event under "chunks". */
int perfmon_event_end (lua_State *L) {
  pm_State *S = pm_state_get(L);
  int rc;
  if (S == NULL)
    return missing(L);
  pm_hook_settle(L, S);
  if ((rc = pm_sw_event_end(&S->e)) == PERFMON_OK) {
    pm_hook_restart(S);
    pm_hook_sweep(S, 1);
    pm_alert_deliver(L, S);
  }
  return rc;
}

/* A sampled monitor's samples leave out the frames that spin the loop. */
int perfmon_nested_enter (lua_State *L) {
  int rc = with_state(L, pm_hook_nested_enter);
  if (rc == PERFMON_OK)
    pm_sampled_loop(L, pm_state_get(L));
  return rc;
}

int perfmon_nested_leave (lua_State *L) {
  return with_state(L, pm_hook_nested_leave);
}

int perfmon_blocking_begin (lua_State *L) {
  return with_state(L, pm_hook_blocking_begin);
}

int perfmon_blocking_end (lua_State *L) {
  return with_state(L, pm_hook_blocking_end);
}

/* A poll is also where a host that has no events (it only polls) frees
** the groups that died since: chunks compiled under "chunks" and dropped.
** pm_hook_sweep(S, 1) compares two counts when there is nothing to free. */
int perfmon_poll (lua_State *L, double *next_ms) {
  pm_State *S = pm_state_get(L);
  double next;
  if (S == NULL)
    return missing(L);
  pm_hook_settle(L, S);
  pm_hook_sweep(S, 1);
  next = pm_alert_poll(L, S);
  if (next_ms != NULL)
    *next_ms = next;
  return PERFMON_OK;
}

int perfmon_user_input (lua_State *L) {
  pm_State *S = pm_state_get(L);
  if (S == NULL)
    return missing(L);
  pm_alert_input(&S->e);
  return PERFMON_OK;
}

int perfmon_animation (lua_State *L, int on) {
  pm_State *S = pm_state_get(L);
  if (S == NULL)
    return missing(L);
  pm_alert_animation(&S->e, on != 0);
  return PERFMON_OK;
}

/* Runs src with the string arg (or none) protected, keeping its one
** result; a failure leaves nothing and says PERFMON_ELUA. */
static int run_lua (lua_State *L, const char *src, const char *arg) {
  if (pm_state_get(L) == NULL)
    return missing(L);
  if (!lua_checkstack(L, 2))
    return PERFMON_ELUA;
  if (luaL_loadstring(L, src) != LUA_OK) {
    lua_pop(L, 1); /* the message */
    return PERFMON_ELUA;
  }
  if (arg != NULL)
    lua_pushstring(L, arg);
  if (lua_pcall(L, arg != NULL, 1, 0) != LUA_OK) {
    lua_pop(L, 1);
    return PERFMON_ELUA;
  }
  return PERFMON_OK;
}

int perfmon_fleet_publish (lua_State *L, const char *label) {
  int rc = run_lua(L,
                   "local label = ...\n"
                   "return require('perfmon.fleet').publish("
                   "require('perfmon').snapshot(), label)",
                   label != NULL ? label : "");
  if (rc == PERFMON_OK)
    lua_pop(L, 1);
  return rc;
}

int perfmon_fleet_json (lua_State *L) {
  return run_lua(L,
                 "local perfmon = require('perfmon')\n"
                 "local s = require('perfmon.fleet').snapshot()\n"
                 "return s and perfmon.json(s) or '{}'",
                 NULL);
}

/* Each code in words, with what to do about it. */
const char *perfmon_strerror (int code) {
  switch (code) {
    case PERFMON_OK: return "no error";
    case PERFMON_ENOTLOADED:
      return "perfmon is not loaded in this lua_State, or the state is "
             "closing (require(\"perfmon\") or luaopen_perfmon_core first)";
    case PERFMON_EMISUSE:
      return "perfmon marker misused: an end without its begin, an event "
             "begun inside an event, or event loops nested too deep";
    case PERFMON_EOTHERCOPY:
      return "perfmon is loaded in this lua_State by another copy of the "
             "module, which this copy's calls cannot reach (two copies "
             "linked: link the host against the same library require loads, "
             "or open the host's copy first: luaL_requiref(L, "
             "\"perfmon.core\", luaopen_perfmon_core, 0))";
    case PERFMON_ELUA:
      return "perfmon's Lua modules failed: not found on package.path "
             "(perfmon.fleet, perfmon), or not enough memory";
    default: return "unknown perfmon error code";
  }
}
