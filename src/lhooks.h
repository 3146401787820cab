/*
** lhooks.h -- debug.sethook and debug.gethook while monitors are open:
** core.hook_functions puts two in the debug library that share the hook
** (a program's hook is chained behind perfmon's, hook.h) while exact
** monitors are open, and the library's own otherwise; core.owns_hook.
*/
#ifndef PM_LHOOKS_H
#define PM_LHOOKS_H

#include <lua.h>

/* debug.sethook and gethook: the shared two (shared) or the debug
** library's own: S->hooks_shared, which monitor.c calls where the count of
** exact monitors changes.  Neither allocates nor calls. */
void pm_lhooks_guard (lua_State *L, int shared);
/* Adds hook_functions and owns_hook to the table on the top of the
** stack. */
void pm_lhooks_register (lua_State *L);

#endif
