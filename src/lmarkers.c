/*
** lmarkers.c -- the event markers and brackets from Lua (lmarkers.h).
*/
#include "lmarkers.h"

#include <lauxlib.h>

#include "hook.h"
#include "largs.h"
#include "perfmon.h"

/*
** {======================================================
** Event markers
** =======================================================
*/

/* The C API's markers, raising at the caller's position: these are called
** by the user.  A state closing (a finalizer run by lua_close) is not a
** misuse. */
static int marker (lua_State *L, int (*f)(lua_State *L), const char *misuse) {
  int rc = f(L);
  if (rc != PERFMON_OK) {
    luaL_where(L, 1);
    lua_pushstring(L, rc == PERFMON_EMISUSE ? misuse
                                            : "perfmon: the state is closing");
    lua_concat(L, 2);
    return lua_error(L);
  }
  return 0;
}

static int l_event_begin (lua_State *L) {
  return marker(L, perfmon_event_begin,
                "event_begin: an event is already open in this loop");
}

/* perfmon_event_end delivers the alerts once the event is over. */
static int l_event_end (lua_State *L) {
  return marker(L, perfmon_event_end, "event_end: no event is open");
}

static int l_nested_enter (lua_State *L) {
  return marker(L, perfmon_nested_enter, "nested_enter: too many nested loops");
}

static int l_nested_leave (lua_State *L) {
  return marker(L, perfmon_nested_leave,
                "nested_leave: no nested loop is open");
}

static int l_blocking_begin (lua_State *L) {
  return marker(L, perfmon_blocking_begin, "blocking_begin: cannot happen");
}

static int l_blocking_end (lua_State *L) {
  return marker(L, perfmon_blocking_end,
                "blocking_end: no blocking call is open");
}

/*
** Brackets: perfmon.event, nested_loop and blocking run fn(...) between a
** begin marker and its end.  The end is a to-be-closed value, so that Lua
** runs it however fn ends: a return, an error, a memory error,
** coroutine.close of a coroutine suspended inside (a pcall could fail to
** start for lack of memory and leave the bracket open for good).  Written
** in C because a host calls perfmon.event for every event, and the hook
** would see each Lua-level call a Lua version made.  Upvalue 1 of each is
** its ender, a table whose __close is the end marker.
*/

/* fn's results, above the ender (also the continuation after a yield) */
static int bracket_done (lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  return lua_gettop(L) - 1;
}

/* Stack: fn args...  An event's and a nested loop's fn is the code of the
** new iteration: its calls into the caller's own groups start them
** (pm_hook_boundary), where a blocking call's runs on in its caller's. */
static int bracket (lua_State *L, const char *fname, int (*begin)(lua_State *),
                    int boundary) {
  if (lua_type(L, 1) != LUA_TFUNCTION) {
    if (luaL_getmetafield(L, 1, "__call") == LUA_TNIL)
      return luaL_error(L,
                        "bad argument #1 to '%s' (function expected, got %s)",
                        fname, luaL_typename(L, 1));
    lua_pop(L, 1);
  }
  /* a C function has LUA_MINSTACK free slots: room for the ender */
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1); /* ender fn args... */
  if (boundary) /* before the marker's restart (pm_hook_restart) */
    pm_hook_boundary(L, pm_state_get(L));
  begin(L);
  lua_toclose(L, 1); /* nothing can fail between begin and here */
  lua_callk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, bracket_done);
  return bracket_done(L, LUA_OK, 0);
}

static int l_event (lua_State *L) {
  return bracket(L, "perfmon.event", l_event_begin, 1);
}

static int l_nested_loop (lua_State *L) {
  return bracket(L, "perfmon.nested_loop", l_nested_enter, 1);
}

static int l_blocking (lua_State *L) {
  return bracket(L, "perfmon.blocking", l_blocking_begin, 0);
}

/* Adds core[name], the bracket f whose end is the marker end. */
static void add_bracket (lua_State *L, const char *name, lua_CFunction f,
                         lua_CFunction end) {
  lua_newtable(L); /* core ender */
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, end);
  lua_setfield(L, -2, "__close");
  lua_setmetatable(L, -2);
  lua_pushcclosure(L, f, 1);
  lua_setfield(L, -2, name);
}

/* }====================================================== */

static const luaL_Reg marker_funcs[] = {{"event_begin", l_event_begin},
                                        {"event_end", l_event_end},
                                        {"nested_enter", l_nested_enter},
                                        {"nested_leave", l_nested_leave},
                                        {"blocking_begin", l_blocking_begin},
                                        {"blocking_end", l_blocking_end},
                                        {NULL, NULL}};

void pm_lmarkers_init (pm_State *S) {
  S->brackets[0] = l_event;
  S->brackets[1] = l_nested_loop;
}

void pm_lmarkers_register (lua_State *L) {
  luaL_setfuncs(L, marker_funcs, 0);
  add_bracket(L, "event", l_event, l_event_end);
  add_bracket(L, "nested_loop", l_nested_loop, l_nested_leave);
  add_bracket(L, "blocking", l_blocking, l_blocking_end);
}
