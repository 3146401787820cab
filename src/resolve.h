/*
** resolve.h -- which groups a function belongs to.
**
** A Lua function's set (group.h) is that of its environment: its _ENV
** upvalue or, for a function that touches no global, the environment its
** chunk was loaded with; with the groups of the source prefixes its chunk's
** path begins with, and its chunk group while "chunks" is probed.  A
** chunk is told by its prototype tree where proto.h's start-up check
** passed, else by its source name.  A C function has no set of its own,
** nor a Lua function whose set is empty (a host's helper that belongs to
** no group): it runs in its caller's.  Each answer is cached in the address map
** (engine.h's tags), keyed by the function, until attaching, detaching or
** a probe change forgets them (pm_functions_forget).
*/
#ifndef PM_RESOLVE_H
#define PM_RESOLVE_H

#include "state.h"

/* The cached value (a PM_FN_* tagged word) of the function on the top of
** the stack, resolved and cached on a miss; PM_FN_C for a Lua function
** when memory ran out (it inherits its caller's set, and is resolved
** again next time). */
uintptr_t pm_resolve (pm_State *S, lua_State *L);
/* The set of the function on the top of the stack, or NULL for a C
** function or a Lua function of no group: for the profiler's frames. */
const pm_Set *pm_resolve_set (lua_State *L, pm_State *S);
/* Resolves the Lua function at fidx without caching it, so that a
** chunk's main function tells its chunk's environment: a chunk just
** loaded (perfmon.load), or one whose _ENV was set (lupvalues.h).
** Returns 0 when memory ran out. */
int pm_resolve_chunk (lua_State *L, pm_State *S, int fidx);
/* Finds the chunks and environments of the functions that ran before the
** first monitor opened, in the heap (proto.h), where that is checked.
** What a profiler resolved without a monitor may be told better then: the
** caller forgets it (pm_functions_forget). */
void pm_resolve_discover (lua_State *L, pm_State *S);

#endif
