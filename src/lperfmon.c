/*
** lperfmon.c -- perfmon.core, the Lua binding of the C core: the state
** opened by the first require and closed by lua_close, and the module's
** table, whose functions each binding adds (largs.h says what they share).
**
** Monitors, snapshots and their arithmetic live in lua/perfmon/init.lua,
** which is the API users see.  Functions that users call directly (group,
** attach, detach, the event markers) are exported as they are, so that
** their errors name the function the user called.
*/
#include <lauxlib.h>

#include "fleet.h"
#include "hook.h"
#include "lgroup.h"
#include "lhooks.h"
#include "lmarkers.h"
#include "lmonitor.h"
#include "lstats.h"
#include "lupvalues.h"
#include "lwatcher.h"
#include "monitor.h"
#include "perfmon.h"
#include "profiler/profiler.h"
#include "watch.h"

/* core.wall_us() -> the monotonic clock the watcher's delays use */
static int l_wall_us (lua_State *L) {
  lua_pushnumber(L, pm_wall_us());
  return 1;
}


static const luaL_Reg core_funcs[] = {{"wall_us", l_wall_us}, {NULL, NULL}};

/*
** {======================================================
** The state: opened by the first require, closed by lua_close
** =======================================================
*/

/* lua_close: finalizers run before any memory is freed, so perfmon lets go
** of everything here and hands the allocator back before the sweep. */
static int state_close (lua_State *L) {
  pm_State *S = lua_touserdata(L, 1);
  if (S->closed)
    return 0;
  if (S->profiler != NULL) /* one whose __gc ran and that was restarted */
    pm_profiler_stop(L, S->profiler, 0, PM_PROF_STOPPED);
  pm_monitor_free(L, S);
  if (S->fleet_id != 0)
    pm_fleet_close(S->fleet_id); /* its last totals stay on the board */
  pm_chunks_free(&S->e);
  pm_watch_close(L, S);
  S->closed = 1;
  return 0;
}

static void state_open (lua_State *L) {
  pm_State *S = pm_state_get(L);
  int watched;
  if (S != NULL)
    return;
  S = pm_state_new(L, state_close);
  pm_hook_choose(L, S);
  S->hooks_shared = pm_lhooks_guard;
  pm_lmarkers_init(S);
  watched = pm_watch_open(L, S);
  if (watched < 0)
    luaL_error(L, "not enough memory");
  if (watched == 0) {
    luaL_error(L, "perfmon: this Lua's allocator does not free objects at "
                  "the addresses lua_topointer gives; attribution could not "
                  "be kept safe across garbage collection");
  }
  pm_state_ready(L, S);
}

/* }====================================================== */

LUAMOD_API int luaopen_perfmon_core (lua_State *L) {
  state_open(L);
  luaL_newlib(L, core_funcs);
  pm_lgroup_register(L);
  pm_lmonitor_register(L);
  pm_lstats_register(L);
  pm_lmarkers_register(L);
  pm_lwatcher_register(L);
  pm_lhooks_register(L);
  pm_profiler_register(L); /* core.profiler_* */
  pm_upvalues_register(L); /* core.upvalue_functions */
  return 1;
}
