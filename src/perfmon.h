/*
** perfmon.h -- the public C API of perfmon, for hosts that drive Lua from C.
**
** perfmon attributes the CPU time of a lua_State to performance groups
** (plugins, pages, sandboxes).  A host that runs its event loop in C tells
** perfmon where each iteration of the loop begins and ends, where nested
** event loops run, and where it blocks; everything else happens inside Lua
** (require("perfmon"), monitors, snapshots).
**
** perfmon_event_end also delivers the watcher's alerts
** (require("perfmon.watcher")) raised by the event, by calling the Lua
** listeners after it; a listener's error is reported, never raised.
**
** Every function takes any thread of the lua_State that perfmon is loaded in
** (luaopen_perfmon_core, or require("perfmon") from Lua).  They never raise
** Lua errors: they return PERFMON_OK or a negative code saying what was
** wrong (perfmon_strerror says it in words), and a misuse leaves perfmon's
** state unchanged.
**
** These functions reach the perfmon that their own copy of perfmon's code
** loaded.  A host that links perfmon (this API) while require("perfmon")
** loads another copy, a perfmon/core.so, gets PERFMON_EOTHERCOPY from every
** call: link the host against the library require loads, or have the
** host's copy loaded first (luaL_requiref(L, "perfmon.core",
** luaopen_perfmon_core, 0) before require("perfmon")).  A second copy's
** luaopen_perfmon_core raises an error naming both files rather than run a
** second perfmon in the same lua_State.
*/
#ifndef PERFMON_H
#define PERFMON_H

#include <lua.h>

/* The module is built with hidden symbols (CMakeLists.txt): only what this
** header declares is exported, and calls between perfmon's own files go
** direct, not through the PLT. */
#if defined(__GNUC__)
#define PERFMON_API __attribute__((visibility("default")))
#else
#define PERFMON_API
#endif

#define PERFMON_OK 0
#define PERFMON_ENOTLOADED (-1) /* perfmon was never loaded in this state */
#define PERFMON_EMISUSE (-2) /* end without begin, begin inside an event */
#define PERFMON_EOTHERCOPY (-3) /* loaded by another copy of perfmon */
#define PERFMON_ELUA (-4) /* perfmon's Lua modules failed (fleet) */

/* A message for a code these functions return: what went wrong and what to
** do about it ("unknown perfmon error code" for any other int).  The
** string is static: never free it. */
PERFMON_API const char *perfmon_strerror (int code);

/* Opens the C core; require("perfmon") calls it through package.cpath. */
LUAMOD_API PERFMON_API int luaopen_perfmon_core (lua_State *L);

/* One iteration of the host's event loop.  Time between the two calls is
** committed to the groups that ran, with their jank histograms. */
PERFMON_API int perfmon_event_begin (lua_State *L);
PERFMON_API int perfmon_event_end (lua_State *L);

/* A nested event loop: every measure under way in the outer iteration is
** cancelled, so the code that spun the loop is not charged for it. */
PERFMON_API int perfmon_nested_enter (lua_State *L);
PERFMON_API int perfmon_nested_leave (lua_State *L);

/* A blocking call: its wall time is charged as blocking_us to the groups
** running around it.  Nested pairs count once. */
PERFMON_API int perfmon_blocking_begin (lua_State *L);
PERFMON_API int perfmon_blocking_end (lua_State *L);

/* What makes jank visible to the user, for the watcher's alerts: input
** (a keystroke, a click) just arrived; an animation starts (on != 0) or
** stops.  Jank in an event during an animation, or within the watcher's
** input window after input, is reported as visible. */
PERFMON_API int perfmon_user_input (lua_State *L);
/* The host is idle: delivers the watcher's alerts whose buffering delay has
** passed (require("perfmon.watcher").poll()).  *next_ms (if not NULL) gets
** the ms until more are due, or -1 when nothing waits: the timeout of the
** host's next wait.  Inside an event it delivers nothing and says -1: the
** event's end delivers (a host that waits inside an event handler marks
** its loop as nested, perfmon_nested_enter).  It also frees the groups
** that died, as an event's end does. */
PERFMON_API int perfmon_poll (lua_State *L, double *next_ms);
PERFMON_API int perfmon_animation (lua_State *L, int on);

/* The process-wide view of several states (lua/perfmon/fleet.lua, on any
** threads): perfmon_fleet_publish puts L's totals now on the process's
** board, under label; perfmon_fleet_json pushes onto L's stack the JSON
** of every published state's last totals merged by kind and name
** ("{}" when none published), as perfmon.json writes a snapshot. */
PERFMON_API int perfmon_fleet_publish (lua_State *L, const char *label);
PERFMON_API int perfmon_fleet_json (lua_State *L);

#endif
