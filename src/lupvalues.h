/*
** lupvalues.h -- debug.setupvalue and debug.upvaluejoin that tell perfmon
** which functions they move to another environment.
**
** A function's groups are resolved once, from its _ENV upvalue (or, for
** stripped code, the upvalue a load sets), and cached by its address
** (resolve.h).  perfmon's setupvalue and upvaluejoin behave as the debug
** library's and forget the cached resolutions they may change, so that
** they are followed at the next call: a setupvalue of an _ENV changes
** every function sharing that upvalue, which only a walk of the heap
** could list, so every cached resolution goes; an upvaluejoin changes one
** function's upvalue, and its own goes.  Upvalues of other names resolve
** nothing and forget nothing.  C code that calls lua_setupvalue or
** lua_upvaluejoin itself is not seen.
*/
#ifndef PM_LUPVALUES_H
#define PM_LUPVALUES_H

#include <lua.h>

/* Adds core.upvalue_functions(debug) to the table on the top of the
** stack: from then on the debug library's setupvalue and upvaluejoin are
** perfmon's. */
void pm_upvalues_register (lua_State *L);

#endif
